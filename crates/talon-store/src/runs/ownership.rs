//! Which gateway runs a run: leases, renewals, takeovers of runs whose gateway died, and the
//! cancellation flag every gateway watches.

use sqlx::Row;

use super::{COLUMNS, LIVE, RunRecord};
use crate::{Store, StoreError, now_ms, placeholders};

/// The PostgreSQL channel run changes are announced on.
pub const RUNS_CHANNEL: &str = "talon_runs";

/// What [`Store::cancel_run_tree`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunsCancelled {
    /// Live runs flagged: their gateways stop them.
    pub flagged: u64,
    /// Of those, the ones no gateway held, ended now.
    pub ended: u64,
}

impl Store {
    /// Renews `owner`'s lease on `held` — the live runs it really runs now, not every row that
    /// names it (a run whose executor is gone, or whose end could not be written yet, must not
    /// be kept alive by a process that only owns the row) — and its claims on results it is
    /// announcing, until `until`; the runs it no longer holds (taken over, or ended) are not
    /// renewed. The number of runs renewed.
    pub async fn renew_run_leases(
        &self,
        owner: &str,
        held: &[String],
        until: i64,
    ) -> Result<u64, StoreError> {
        let mut renewed = 0;
        // A few runs at a time per process: bounded statements on both engines.
        for ids in held.chunks(64) {
            let list = placeholders(4, ids.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE agent_runs SET lease_until = $2, updated_at = $3 WHERE owner = $1 AND status IN {LIVE} AND id IN ({list})"
            )))
            .bind(owner)
            .bind(until)
            .bind(now_ms());
            for id in ids {
                query = query.bind(id);
            }
            renewed += query.execute(self.pool()).await?.rows_affected();
        }
        // And its claims on results it is announcing (see `Store::claim_deliveries`).
        sqlx::query(
            "UPDATE run_outbox SET claim_until = $2 WHERE claim_owner = $1 AND delivered_at = 0 AND claim_until > 0",
        )
        .bind(owner)
        .bind(until)
        .execute(self.pool())
        .await?;
        Ok(renewed)
    }

    /// Takes over, for `owner` until `until`, at most `limit` live runs whose lease ran out (their
    /// gateway died); the runs taken, the longest expired first. Never one of `held`, the runs
    /// `owner` runs now: a run whose lease lapsed while this process could not reach the store
    /// is still running (or ending) here, and taking it again would start it twice. One statement takes them: on
    /// PostgreSQL its rows are picked `FOR UPDATE SKIP LOCKED`, so two gateways never take the
    /// same run, nor wait for each other's takeover.
    pub async fn take_over_runs(
        &self,
        owner: &str,
        held: &[String],
        until: i64,
        limit: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let now = now_ms();
        // The held runs are few (a process runs `max_concurrent` at most): listed inline.
        let not_held = if held.is_empty() {
            String::new()
        } else {
            format!(" AND id NOT IN ({})", placeholders(5, held.len()))
        };
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (\
             SELECT id FROM agent_runs WHERE status IN {LIVE} AND lease_until < $1{not_held} \
             ORDER BY lease_until, id LIMIT $4{}) \
             UPDATE agent_runs SET owner = $2, lease_until = $3, updated_at = $1, takeovers = takeovers + 1 \
             WHERE status IN {LIVE} AND lease_until < $1{not_held} AND id IN (SELECT id FROM picked) \
             RETURNING {COLUMNS}",
            self.skip_locked()
        )))
        .bind(now)
        .bind(owner)
        .bind(until)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX));
        for id in held {
            query = query.bind(id);
        }
        let rows = query.fetch_all(self.pool()).await?;
        // RETURNING follows no order; the oldest takeover goes first. `created_at` stands in
        // for the old lease, which the statement has overwritten.
        let mut taken = rows
            .iter()
            .map(super::record)
            .collect::<Result<Vec<_>, StoreError>>()?;
        taken.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(taken)
    }

    /// Flags `id` and every live run below it as cancelled-on-request; the number flagged. The
    /// gateways running them (whichever they are) see the durable flag, stop them and end them
    /// `cancelled`. Runs nest a few levels at most, so the tree is walked level by level.
    pub async fn request_run_cancel(&self, id: &str) -> Result<u64, StoreError> {
        let flag = |column: &'static str, key: String| async move {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE agent_runs SET cancel_requested = 1, updated_at = $2 WHERE {column} = $1 AND status IN {LIVE}"
            )))
            .bind(key)
            .bind(now_ms())
            .execute(self.pool())
            .await
            .map(|done| done.rows_affected())
        };
        let mut flagged = flag("id", id.to_string()).await?;
        let mut level = vec![id.to_string()];
        while !level.is_empty() {
            let mut next = Vec::new();
            for parent in &level {
                flagged += flag("parent_id", parent.clone()).await?;
                let children = sqlx::query("SELECT id FROM agent_runs WHERE parent_id = $1")
                    .bind(parent)
                    .fetch_all(self.pool())
                    .await?;
                for child in children {
                    next.push(child.try_get::<String, _>("id")?);
                }
            }
            level = next;
        }
        if flagged > 0 {
            self.notify_runs().await;
        }
        Ok(flagged)
    }

    /// Cancels `id` and every live run below it ([`Store::request_run_cancel`]), and ends at
    /// once, `cancelled` and delivered (whoever cancelled knows; no model turn starts for it),
    /// those of its tree no gateway holds: a lapsed lease means nobody watches the flag, and the
    /// run would otherwise stay `running` with its slot held. The CLI (with or without a
    /// gateway running) and every gateway call this one operation.
    pub async fn cancel_run_tree(&self, id: &str) -> Result<RunsCancelled, StoreError> {
        let flagged = self.request_run_cancel(id).await?;
        let unheld = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM agent_runs WHERE cancel_requested = 1 AND status IN {LIVE} AND lease_until < $2 \
             AND root_id = (SELECT root_id FROM agent_runs WHERE id = $1)"
        )))
        .bind(id)
        .bind(now_ms())
        .fetch_all(self.pool())
        .await?;
        let mut ended = 0;
        for row in unheld {
            let run: String = row.try_get("id")?;
            if self
                .finish_run(
                    &run,
                    None,
                    super::RunStatus::Cancelled,
                    "cancelled",
                    super::RunUsage::default(),
                    true,
                )
                .await?
            {
                ended += 1;
            }
        }
        Ok(RunsCancelled { flagged, ended })
    }

    /// Tells the other processes on this database that runs changed (a cancel, an end), so
    /// their waiters look at once instead of at their next poll (PostgreSQL's `NOTIFY`; a
    /// no-op on SQLite, where one process runs everything). A notification that cannot be sent
    /// only costs the poll's delay.
    pub(crate) async fn notify_runs(&self) {
        if self.engine() == crate::Engine::Postgres
            && let Err(e) = sqlx::query(sqlx::AssertSqlSafe(format!("NOTIFY {RUNS_CHANNEL}")))
                .execute(self.pool())
                .await
        {
            tracing::debug!(error = %e, "cannot NOTIFY run changes");
        }
    }

    /// Wakes `wake` whenever another process announces run changes (see [`Store::listen`]).
    pub fn notify_run_changes(&self, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.listen(RUNS_CHANNEL, wake);
    }

    /// Marks a live run as waiting for a person's approval (`true`) or running again; `false`
    /// when the run is no longer live.
    pub async fn set_run_waiting(&self, id: &str, waiting: bool) -> Result<bool, StoreError> {
        let status = if waiting {
            "waiting_approval"
        } else {
            "running"
        };
        let done = sqlx::query(
            "UPDATE agent_runs SET status = $2, updated_at = $3 WHERE id = $1 AND status IN ('running', 'waiting_approval')",
        )
        .bind(id)
        .bind(status)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

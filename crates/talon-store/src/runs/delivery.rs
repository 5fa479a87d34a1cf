//! A run's end and the outbox that carries its result to the parent session exactly once.

use sqlx::Row;

use super::{Delivery, LIVE, RunStatus, RunUsage};
use crate::{Store, StoreError, now_ms};

impl Store {
    /// Ends a live run with `status` and `result`, and puts the result in the outbox for its
    /// parent session, in one transaction; `delivered`: the caller waited for the run and has
    /// the result now, so the row is written delivered. `false` when the run had ended already
    /// (its first end stands: a result is delivered once) or, with `owner`, is no longer held
    /// by that gateway (another took it over: its end is the new owner's to record).
    pub async fn finish_run(
        &self,
        id: &str,
        owner: Option<&str>,
        status: RunStatus,
        result: &str,
        usage: RunUsage,
        delivered: bool,
    ) -> Result<bool, StoreError> {
        if status.is_live() {
            return Err(StoreError::Invalid {
                what: "run status",
                reason: format!("{} is not an end", status.as_str()),
            });
        }
        let mut tx = self.pool().begin().await?;
        if end_in(
            &mut tx,
            id,
            owner,
            status,
            result,
            usage,
            delivered,
            now_ms(),
        )
        .await?
        .is_none()
        {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        self.notify_runs().await;
        Ok(true)
    }

    /// Claims, for `owner` until `until`, at most `limit` undelivered results of `parent_session`
    /// that nobody else is announcing: the claimed ones, oldest first. The claimant shows them
    /// in a turn of the session and marks them delivered when it saves that turn
    /// ([`Store::finish_turn_delivering`]); if it dies first, the claim runs out and another
    /// gateway announces them. One statement claims them: on PostgreSQL its rows are picked
    /// `FOR UPDATE SKIP LOCKED`, so two gateways claiming at once take different rows instead of
    /// queuing on each other (SQLite has one writer).
    pub async fn claim_deliveries(
        &self,
        parent_session: &str,
        owner: &str,
        until: i64,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (\
             SELECT child_id FROM run_outbox WHERE parent_session = $1 AND delivered_at = 0 AND claim_until < $2 \
             ORDER BY created_at, child_id LIMIT $5{}) \
             UPDATE run_outbox SET claim_owner = $3, claim_until = $4 \
             WHERE parent_session = $1 AND delivered_at = 0 AND claim_until < $2 AND child_id IN (SELECT child_id FROM picked) \
             RETURNING child_id, status, result, created_at",
            self.skip_locked()
        )))
        .bind(parent_session)
        .bind(now_ms())
        .bind(owner)
        .bind(until)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut claimed = rows
            .iter()
            .map(|row| {
                let created: i64 = row.try_get("created_at")?;
                let child: String = row.try_get("child_id")?;
                Ok((created, delivery(row, parent_session, child)?))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        claimed.sort_by(|a, b| (a.0, &a.1.child_id).cmp(&(b.0, &b.1.child_id)));
        Ok(claimed.into_iter().map(|(_, d)| d).collect())
    }

    /// Gives back `owner`'s claims on `parent_session`'s undelivered results (its announcing
    /// turn failed): they can be claimed again at once.
    pub async fn release_deliveries(
        &self,
        parent_session: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE run_outbox SET claim_owner = '', claim_until = 0 WHERE parent_session = $1 AND claim_owner = $2 AND delivered_at = 0",
        )
        .bind(parent_session)
        .bind(owner)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Marks every result still waiting for `session` delivered, without a turn: the session is
    /// an ended run's, and a turn there would run for nobody (its results were for that run).
    /// The number settled.
    pub async fn settle_deliveries(&self, session: &str) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE run_outbox SET delivered_at = $2 WHERE parent_session = $1 AND delivered_at = 0",
        )
        .bind(session)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Takes `child`'s result for a caller that waited for it (`subagents wait`), marking it
    /// delivered; `None` when it is not there or was delivered (or is being announced) already.
    pub async fn take_delivery(
        &self,
        parent_session: &str,
        child: &str,
    ) -> Result<Option<Delivery>, StoreError> {
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE run_outbox SET delivered_at = $3 WHERE parent_session = $1 AND child_id = $2 AND delivered_at = 0 AND claim_until < $3 RETURNING status, result",
        )
        .bind(parent_session)
        .bind(child)
        .bind(now)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| delivery(&row, parent_session, child.to_string()))
            .transpose()
    }

    /// Parent sessions with results nobody is announcing (at most `limit`), each with the agent
    /// and user whose turn shows them.
    pub async fn undelivered_sessions(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT o.parent_session, r.parent_agent, r.user_id FROM run_outbox o JOIN agent_runs r ON r.id = o.child_id \
             WHERE o.delivered_at = 0 AND o.claim_until < $1 LIMIT $2",
        )
        .bind(now_ms())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("parent_session")?,
                    row.try_get("parent_agent")?,
                    row.try_get("user_id")?,
                ))
            })
            .collect()
    }

    /// The results waiting for `parent_session`, oldest first (at most `limit`): a turn of the
    /// session shows them to its model and marks them delivered when it is saved
    /// ([`Store::finish_turn_delivering`]).
    pub async fn pending_deliveries(
        &self,
        parent_session: &str,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT child_id, status, result FROM run_outbox WHERE parent_session = $1 AND delivered_at = 0 ORDER BY created_at, child_id LIMIT $2",
        )
        .bind(parent_session)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| delivery(row, parent_session, row.try_get("child_id")?))
            .collect()
    }
}

/// Ends the live run `id` inside a transaction and writes its outbox row (delivered at once when
/// `delivered`); the parent session, or `None` when the run had ended already.
#[allow(clippy::too_many_arguments)]
pub(super) async fn end_in(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    owner: Option<&str>,
    status: RunStatus,
    result: &str,
    usage: RunUsage,
    delivered: bool,
    now: i64,
) -> Result<Option<String>, StoreError> {
    let ended = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE agent_runs SET status = $2, result = $3, input_tokens = input_tokens + $4, output_tokens = output_tokens + $5, model_requests = model_requests + $8, owner = '', lease_until = 0, updated_at = $6, finished_at = $6 \
         WHERE id = $1 AND status IN {LIVE} AND ($7 = '' OR owner = $7) RETURNING parent_session"
    )))
    .bind(id)
    .bind(status.as_str())
    .bind(result)
    .bind(usage.input_tokens)
    .bind(usage.output_tokens)
    .bind(now)
    .bind(owner.unwrap_or_default())
    .bind(usage.model_requests)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = ended else {
        return Ok(None);
    };
    let parent_session: String = row.try_get("parent_session")?;
    sqlx::query(
        "INSERT INTO run_outbox (parent_session, child_id, status, result, created_at, delivered_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&parent_session)
    .bind(id)
    .bind(status.as_str())
    .bind(result)
    .bind(now)
    .bind(if delivered { now } else { 0 })
    .execute(&mut *conn)
    .await?;
    Ok(Some(parent_session))
}

/// An outbox row (its `status` and `result`) as a delivery of `child` to `parent_session`.
fn delivery(
    row: &sqlx::any::AnyRow,
    parent_session: &str,
    child: String,
) -> Result<Delivery, StoreError> {
    Ok(Delivery {
        parent_session: parent_session.to_string(),
        child_id: child,
        status: RunStatus::parse(&row.try_get::<String, _>("status")?)?,
        result: row.try_get("result")?,
    })
}

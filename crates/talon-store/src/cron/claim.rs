//! Which gateway runs a due job, and the record of each run.
//!
//! - **Claim** ([`Store::claim_due_cron_jobs`]): one statement picks due jobs whose lease is
//!   free or ran out and writes the claimant's id and lease into them. On PostgreSQL the rows
//!   are picked `FOR UPDATE SKIP LOCKED`, so two gateways claiming at once take different jobs
//!   and never wait on each other; SQLite's single `UPDATE … RETURNING` is atomic (one writer).
//! - **Renew** while the run goes; a gateway that stops renewing loses the job to whoever claims
//!   it after the lease, and its end is then refused ([`Store::finish_cron_job`] answers
//!   `false`), so a stalled gateway cannot record a second end.
//! - **Finish**: the history row, the next time (or the end of an `at` job) and the released
//!   lease, in one transaction under the job's lock.

use sqlx::Row;

use super::{COLUMNS, CronJob, ScheduleKind, job};
use crate::locked::Locked;
use crate::{Engine, Store, StoreError, now_ms};

/// The PostgreSQL channel job changes are announced on (the schedulers wake at once).
pub const CRON_CHANNEL: &str = "talon_cron";
/// History rows kept per job (the newest).
pub const HISTORY_KEEP: i64 = 100;
/// The longest result a history row keeps, in characters.
pub const RESULT_CHARS: usize = 4000;

/// How one run of a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CronRunStatus {
    Ok,
    Error,
    /// Not run: its time passed while no gateway was up and the job's policy is `skip`.
    Skipped,
    /// Its gateway died and the run was lost.
    Interrupted,
}

impl CronRunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Skipped => "skipped",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What [`Store::finish_cron_job`] records.
#[derive(Debug, Clone)]
pub struct CronOutcome<'a> {
    pub status: CronRunStatus,
    /// The answer or the error (capped at [`RESULT_CHARS`]).
    pub result: &'a str,
    /// The agent run; `''` when none ran.
    pub run_id: &'a str,
    pub started_at: i64,
}

/// One row of a job's history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CronRun {
    pub id: i64,
    pub job_id: String,
    pub started_at: i64,
    pub ended_at: i64,
    pub status: String,
    pub result: String,
    pub run_id: String,
}

/// Due: scheduled and enabled, or asked for.
const DUE: &str = "((enabled = 1 AND next_run_at > 0 AND next_run_at <= $1) OR run_requested > 0)";

fn cap(text: &str) -> String {
    if text.chars().count() <= RESULT_CHARS {
        text.to_string()
    } else {
        let cut: String = text.chars().take(RESULT_CHARS - 1).collect();
        format!("{cut}…")
    }
}

impl Store {
    /// Claims, for `owner` until `until`, at most `limit` due jobs whose lease is free or ran
    /// out, the earliest due first (see the module docs). A job claimed again after its
    /// gateway died keeps the `run_id` that gateway started.
    pub async fn claim_due_cron_jobs(
        &self,
        owner: &str,
        until: i64,
        limit: usize,
    ) -> Result<Vec<CronJob>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (\
             SELECT id FROM cron_jobs WHERE {DUE} AND lease_until < $1 \
             ORDER BY next_run_at, id LIMIT $4{}) \
             UPDATE cron_jobs SET lease_owner = $2, lease_until = $3, claimed_at = $1, \
             claim_due = CASE WHEN enabled = 1 AND next_run_at > 0 AND next_run_at <= $1 THEN next_run_at ELSE 0 END \
             WHERE id IN (SELECT id FROM picked) AND {DUE} AND lease_until < $1 \
             RETURNING {COLUMNS}",
            self.skip_locked()
        )))
        .bind(now_ms())
        .bind(owner)
        .bind(until)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut jobs = rows.iter().map(job).collect::<Result<Vec<_>, _>>()?;
        jobs.sort_by(|a, b| (a.claim_due, &a.id).cmp(&(b.claim_due, &b.id)));
        Ok(jobs)
    }

    /// Renews `owner`'s leases on the jobs it holds until `until`; how many it holds.
    pub async fn renew_cron_leases(&self, owner: &str, until: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE cron_jobs SET lease_until = $2 WHERE lease_owner = $1 AND lease_until > 0",
        )
        .bind(owner)
        .bind(until)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Records the agent run `run_id` started for `owner`'s claim on `job`; `false` when the
    /// claim is no longer `owner`'s.
    pub async fn set_cron_run(
        &self,
        job: &str,
        owner: &str,
        run_id: &str,
    ) -> Result<bool, StoreError> {
        let done =
            sqlx::query("UPDATE cron_jobs SET run_id = $3 WHERE id = $1 AND lease_owner = $2")
                .bind(job)
                .bind(owner)
                .bind(run_id)
                .execute(self.pool())
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the end of `owner`'s claim on `job` (see the module docs): a history row (the
    /// last [`HISTORY_KEEP`] kept), the next time of a scheduled run (an `at` job, or one that
    /// deletes itself after a run, ends: deleted or disabled), the lease released. A forced run
    /// leaves the schedule as it was; a job changed while it ran keeps the change's next time.
    /// `false`, with nothing written, when the claim is no longer `owner`'s (another gateway
    /// took it after the lease ran out) or the job was removed.
    pub async fn finish_cron_job(
        &self,
        job_id: &str,
        owner: &str,
        outcome: &CronOutcome<'_>,
    ) -> Result<bool, StoreError> {
        let mut tx = Locked::begin(self, &[format!("talon-cron:{job_id}")]).await?;
        let result = finish_in(&mut tx, job_id, owner, outcome).await;
        match result {
            Ok(true) => {
                tx.commit().await?;
                Ok(true)
            }
            Ok(false) => {
                tx.rollback().await;
                Ok(false)
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }

    /// The history of `user`'s job `job` (id or name), newest first, at most `limit`; `None`
    /// when the user has no such job.
    pub async fn cron_runs(
        &self,
        user: &str,
        job: &str,
        limit: i64,
    ) -> Result<Option<Vec<CronRun>>, StoreError> {
        let Some(found) = self.cron_job(user, job).await? else {
            return Ok(None);
        };
        let rows = sqlx::query(
            "SELECT id, job_id, started_at, ended_at, status, result, run_id FROM cron_runs \
             WHERE job_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(&found.id)
        .bind(limit.clamp(1, HISTORY_KEEP))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(CronRun {
                    id: r.try_get("id")?,
                    job_id: r.try_get("job_id")?,
                    started_at: r.try_get("started_at")?,
                    ended_at: r.try_get("ended_at")?,
                    status: r.try_get("status")?,
                    result: r.try_get("result")?,
                    run_id: r.try_get("run_id")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map(Some)
    }

    /// When a scheduler should look next (Unix ms): the earliest time a job free to claim is
    /// due, or was asked to run; `None` when no job is scheduled. Jobs held by a gateway are
    /// not counted (their lease ending is found by the scheduler's periodic look).
    pub async fn next_cron_due(&self) -> Result<Option<i64>, StoreError> {
        let now = now_ms();
        let row = sqlx::query(
            "SELECT (SELECT MIN(next_run_at) FROM cron_jobs WHERE enabled = 1 AND next_run_at > 0 AND lease_until < $1) AS due, \
             (SELECT MIN(run_requested) FROM cron_jobs WHERE run_requested > 0 AND lease_until < $1) AS asked",
        )
        .bind(now)
        .fetch_one(self.pool())
        .await?;
        let due: Option<i64> = row.try_get("due")?;
        let asked: Option<i64> = row.try_get("asked")?;
        Ok(match (due, asked) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// Tells the other processes on this database that jobs changed (PostgreSQL's `NOTIFY`; a
    /// no-op on SQLite, whose schedulers look every few seconds).
    pub(crate) async fn notify_cron(&self) {
        if self.engine() == Engine::Postgres
            && let Err(e) = sqlx::query(sqlx::AssertSqlSafe(format!("NOTIFY {CRON_CHANNEL}")))
                .execute(self.pool())
                .await
        {
            tracing::debug!(error = %e, "cannot NOTIFY job changes");
        }
    }

    /// Wakes `wake` whenever another process announces job changes (see [`Store::listen`]).
    pub fn notify_cron_changes(&self, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.listen(CRON_CHANNEL, wake);
    }
}

async fn finish_in(
    tx: &mut Locked,
    job_id: &str,
    owner: &str,
    outcome: &CronOutcome<'_>,
) -> Result<bool, StoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM cron_jobs WHERE id = $1 AND lease_owner = $2"
    )))
    .bind(job_id)
    .bind(owner)
    .fetch_optional(&mut *tx.conn)
    .await?;
    let Some(row) = row else {
        return Ok(false);
    };
    let found = job(&row)?;
    let now = now_ms();
    sqlx::query(
        "INSERT INTO cron_runs (job_id, started_at, ended_at, status, result, run_id) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(job_id)
    .bind(outcome.started_at)
    .bind(now)
    .bind(outcome.status.as_str())
    .bind(cap(outcome.result))
    .bind(outcome.run_id)
    .execute(&mut *tx.conn)
    .await?;
    sqlx::query(
        "DELETE FROM cron_runs WHERE job_id = $1 AND id NOT IN \
         (SELECT id FROM cron_runs WHERE job_id = $1 ORDER BY id DESC LIMIT $2)",
    )
    .bind(job_id)
    .bind(HISTORY_KEEP)
    .execute(&mut *tx.conn)
    .await?;
    let scheduled = found.claim_due > 0;
    // The claim was for the time the job then had; another time now means it was rescheduled
    // while it ran, and that time stands.
    let rescheduled = scheduled && found.next_run_at != found.claim_due;
    if scheduled && found.delete_after_run {
        sqlx::query("DELETE FROM cron_runs WHERE job_id = $1")
            .bind(job_id)
            .execute(&mut *tx.conn)
            .await?;
        sqlx::query("DELETE FROM cron_jobs WHERE id = $1")
            .bind(job_id)
            .execute(&mut *tx.conn)
            .await?;
        return Ok(true);
    }
    let (enabled, next) = if !scheduled || rescheduled || !found.enabled {
        (found.enabled, found.next_run_at)
    } else if found.schedule.kind == ScheduleKind::At {
        (false, 0)
    } else {
        (
            true,
            found.schedule.run_after(found.claim_due, now).unwrap_or(0),
        )
    };
    let error = match outcome.status {
        super::CronRunStatus::Ok | super::CronRunStatus::Skipped => String::new(),
        _ => cap(outcome.result),
    };
    sqlx::query(
        "UPDATE cron_jobs SET enabled = $3, next_run_at = $4, \
         run_requested = CASE WHEN run_requested <= claimed_at THEN 0 ELSE run_requested END, \
         last_status = $5, last_error = $6, last_run_at = $7, \
         lease_owner = '', lease_until = 0, claimed_at = 0, claim_due = 0, run_id = '' \
         WHERE id = $1 AND lease_owner = $2",
    )
    .bind(job_id)
    .bind(owner)
    .bind(i64::from(enabled))
    .bind(next)
    .bind(outcome.status.as_str())
    .bind(error)
    .bind(now)
    .execute(&mut *tx.conn)
    .await?;
    Ok(true)
}

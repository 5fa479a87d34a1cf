//! Scheduled jobs (GoClaw's `cron`: `talon cron`, the `cron` tool, `/v1/cron`) and their run
//! history.
//!
//! A job belongs to a user (`''`: calls naming none) and is seen and changed only by them: every
//! read and write here is scoped by the owner, so one user cannot list, change, run or read the
//! history of another's job, even knowing its id.
//!
//! Running jobs in a fleet ([`claim`]): a due job is taken by one statement that writes this
//! gateway's id and a lease into it, renewed while the run goes and released when its end is
//! recorded. A gateway that dies simply stops renewing; once the lease has run out any gateway
//! claims the job again and finds the run its predecessor started. There is no start-up sweep
//! (GoClaw's re-armed other instances' running jobs, so they ran twice).
//!
//! A job's schedule ([`schedule`]) is checked when it is written, and its next time computed
//! here, in the same statement, so a stored job always has a valid `next_run_at` (0: none, for a
//! disabled job or an `at` job that ran).

use sqlx::Row;

mod claim;
pub mod schedule;

pub use claim::{CRON_CHANNEL, CronOutcome, CronRun, CronRunStatus};
pub use schedule::{Schedule, ScheduleKind};

use crate::fields::invalid;
use crate::locked::Locked;
use crate::{Store, StoreError, now_ms};

/// Jobs one user may have at most.
pub const MAX_JOBS_PER_USER: i64 = 1000;
/// The longest message a job may carry.
pub const MAX_MESSAGE_CHARS: usize = 20_000;

/// What a job does when the gateways were down at its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    /// One run as soon as a gateway is up, then the next future time (never one run per
    /// missed time).
    RunOnce,
    /// No run: a `skipped` history row, then the next future time.
    Skip,
}

impl MissedPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RunOnce => "run_once",
            Self::Skip => "skip",
        }
    }

    /// The policy named `name`; the error names both.
    pub fn parse(name: &str) -> Result<Self, StoreError> {
        match name {
            "run_once" => Ok(Self::RunOnce),
            "skip" => Ok(Self::Skip),
            other => Err(invalid(
                "missed-run policy",
                format!(
                    "{other:?}: use run_once (one run after downtime) or skip (record it skipped)"
                ),
            )),
        }
    }
}

/// A job to create.
#[derive(Debug, Clone)]
pub struct NewCronJob<'a> {
    pub user: &'a str,
    pub agent: &'a str,
    /// Unique per user.
    pub name: &'a str,
    pub schedule: Schedule,
    /// What the agent's run is told.
    pub message: &'a str,
    /// Where the result goes; `''` for a session of the job's own.
    pub session_key: &'a str,
    pub delete_after_run: bool,
    pub enabled: bool,
    pub missed: MissedPolicy,
    /// A chat the result is sent to as well (checked by the caller against the channels).
    pub delivery: Option<CronDelivery>,
}

/// A chat of a configured channel that a job's result is sent to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CronDelivery {
    /// The channel's name (`[channels.<name>]`).
    pub channel: String,
    /// The chat, then `/` and a forum topic or thread when there is one.
    pub to: String,
    /// Made from a conversation of that chat, which may always be answered; otherwise the
    /// chat must be one the channel takes automated messages for, at each delivery.
    pub pinned: bool,
}

impl CronDelivery {
    /// The chat and the topic or thread of [`Self::to`].
    pub fn chat_and_thread(&self) -> (&str, Option<&str>) {
        match self.to.split_once('/') {
            Some((chat, thread)) => (chat, Some(thread)),
            None => (&self.to, None),
        }
    }
}

fn check_delivery(delivery: Option<&CronDelivery>) -> Result<(), StoreError> {
    let Some(d) = delivery else { return Ok(()) };
    let bad = |s: &str| {
        s.trim().is_empty() || s.trim() != s || s.len() > 160 || s.chars().any(char::is_control)
    };
    let (chat, thread) = d.chat_and_thread();
    if bad(&d.channel) || bad(chat) || thread.is_some_and(bad) {
        return Err(invalid(
            "job delivery",
            "name the channel and the chat (chat id, optionally /topic) the result goes to",
        ));
    }
    Ok(())
}

/// Changes to a job; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct CronJobPatch {
    pub name: Option<String>,
    pub schedule: Option<Schedule>,
    pub message: Option<String>,
    pub session_key: Option<String>,
    pub delete_after_run: Option<bool>,
    pub enabled: Option<bool>,
    pub missed: Option<MissedPolicy>,
    /// `Some(None)` stops delivering to a chat.
    pub delivery: Option<Option<CronDelivery>>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CronJob {
    pub id: String,
    pub user: String,
    pub agent: String,
    pub name: String,
    #[serde(flatten)]
    pub schedule: Schedule,
    pub message: String,
    /// `''`: a session of the job's own.
    pub session_key: String,
    pub delete_after_run: bool,
    pub enabled: bool,
    pub missed: MissedPolicy,
    /// The chat the result is sent to as well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<CronDelivery>,
    /// Unix ms; 0: none.
    pub next_run_at: i64,
    /// A run asked for now, whatever the schedule (Unix ms; 0: none).
    pub run_requested: i64,
    /// The gateway holding the job now, and until when.
    pub lease_owner: String,
    pub lease_until: i64,
    /// The scheduled time the claim held now is for (0: a forced run, or no claim).
    pub claim_due: i64,
    /// The agent run of the claim held now.
    pub run_id: String,
    pub last_status: String,
    pub last_error: String,
    pub last_run_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

pub(crate) const COLUMNS: &str = "id, user_id, agent_key, name, schedule_kind, cron_expression, interval_ms, run_at, timezone, payload, session_key, delete_after_run, enabled, missed_policy, next_run_at, run_requested, lease_owner, lease_until, claim_due, run_id, last_status, last_error, last_run_at, created_at, updated_at, deliver_channel, deliver_to, deliver_pinned";

pub(crate) fn job(row: &sqlx::any::AnyRow) -> Result<CronJob, StoreError> {
    Ok(CronJob {
        id: row.try_get("id")?,
        user: row.try_get("user_id")?,
        agent: row.try_get("agent_key")?,
        name: row.try_get("name")?,
        schedule: Schedule::stored(
            &row.try_get::<String, _>("schedule_kind")?,
            &row.try_get::<String, _>("cron_expression")?,
            row.try_get("interval_ms")?,
            row.try_get("run_at")?,
            &row.try_get::<String, _>("timezone")?,
        )?,
        message: row.try_get("payload")?,
        session_key: row.try_get("session_key")?,
        delete_after_run: row.try_get::<i64, _>("delete_after_run")? != 0,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        missed: MissedPolicy::parse(&row.try_get::<String, _>("missed_policy")?)?,
        delivery: {
            let channel: String = row.try_get("deliver_channel")?;
            (!channel.is_empty())
                .then(|| -> Result<CronDelivery, StoreError> {
                    Ok(CronDelivery {
                        channel,
                        to: row.try_get("deliver_to")?,
                        pinned: row.try_get::<i64, _>("deliver_pinned")? != 0,
                    })
                })
                .transpose()?
        },
        next_run_at: row.try_get("next_run_at")?,
        run_requested: row.try_get("run_requested")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_until: row.try_get("lease_until")?,
        claim_due: row.try_get("claim_due")?,
        run_id: row.try_get("run_id")?,
        last_status: row.try_get("last_status")?,
        last_error: row.try_get("last_error")?,
        last_run_at: row.try_get("last_run_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn check_name(name: &str) -> Result<(), StoreError> {
    let trimmed = name.trim();
    if trimmed.is_empty()
        || trimmed != name
        || name.chars().count() > 100
        || name.chars().any(char::is_control)
    {
        return Err(invalid(
            "job name",
            format!(
                "{name:?}: use 1-100 characters without control characters or surrounding spaces"
            ),
        ));
    }
    if name.starts_with("cron-") {
        return Err(invalid(
            "job name",
            format!("{name:?}: names starting with cron- are kept for job ids; choose another"),
        ));
    }
    Ok(())
}

fn check_message(message: &str) -> Result<(), StoreError> {
    if message.trim().is_empty()
        || message.chars().count() > MAX_MESSAGE_CHARS
        || message.contains('\0')
    {
        return Err(invalid(
            "job message",
            format!(
                "say what the agent should do when the job runs (1-{MAX_MESSAGE_CHARS} characters)"
            ),
        ));
    }
    Ok(())
}

fn check_session(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        Ok(())
    } else {
        crate::sessions::valid_session_key(key)
    }
}

/// The first time a job with `schedule` runs, written at `now`; 0 when disabled.
fn next_for(schedule: &Schedule, enabled: bool, now: i64) -> i64 {
    if enabled {
        schedule.first_run(now).unwrap_or(0)
    } else {
        0
    }
}

impl Store {
    /// Creates a job (its first time computed from now); refused when the name is taken or the
    /// user has [`MAX_JOBS_PER_USER`] jobs.
    pub async fn add_cron_job(&self, new: &NewCronJob<'_>) -> Result<CronJob, StoreError> {
        check_name(new.name)?;
        check_message(new.message)?;
        check_session(new.session_key)?;
        check_delivery(new.delivery.as_ref())?;
        if new.agent.is_empty() {
            return Err(invalid("job", "name the agent that runs it"));
        }
        let id = format!("cron-{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
        let now = now_ms();
        let s = &new.schedule;
        let mut tx = Locked::begin(self, &[format!("talon-cron-user:{}", new.user)]).await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) FROM cron_jobs WHERE user_id = $1")
            .bind(new.user)
            .fetch_one(&mut *tx.conn)
            .await?
            .try_get(0)?;
        let taken = sqlx::query("SELECT 1 FROM cron_jobs WHERE user_id = $1 AND name = $2")
            .bind(new.user)
            .bind(new.name)
            .fetch_optional(&mut *tx.conn)
            .await?
            .is_some();
        if count >= MAX_JOBS_PER_USER || taken {
            tx.rollback().await;
            return Err(if taken {
                invalid(
                    "job name",
                    format!(
                        "{:?} is taken: choose another name, or update that job",
                        new.name
                    ),
                )
            } else {
                invalid(
                    "job",
                    format!("{MAX_JOBS_PER_USER} jobs at most per user: remove one first"),
                )
            });
        }
        let inserted = sqlx::query(
            "INSERT INTO cron_jobs (id, user_id, agent_key, name, schedule_kind, cron_expression, interval_ms, run_at, timezone, payload, session_key, delete_after_run, enabled, missed_policy, next_run_at, created_at, updated_at, deliver_channel, deliver_to, deliver_pinned) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17, $18, $19)",
        )
        .bind(&id)
        .bind(new.user)
        .bind(new.agent)
        .bind(new.name)
        .bind(s.kind.as_str())
        .bind(&s.expression)
        .bind(s.interval_ms)
        .bind(s.run_at)
        .bind(&s.timezone)
        .bind(new.message)
        .bind(new.session_key)
        .bind(i64::from(new.delete_after_run))
        .bind(i64::from(new.enabled))
        .bind(new.missed.as_str())
        .bind(next_for(s, new.enabled, now))
        .bind(now)
        .bind(new.delivery.as_ref().map_or("", |d| d.channel.as_str()))
        .bind(new.delivery.as_ref().map_or("", |d| d.to.as_str()))
        .bind(i64::from(new.delivery.as_ref().is_some_and(|d| d.pinned)))
        .execute(&mut *tx.conn)
        .await;
        if let Err(e) = inserted {
            tx.rollback().await;
            return Err(e.into());
        }
        tx.commit().await?;
        self.notify_cron().await;
        self.cron_job(new.user, &id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "cron job",
                key: id,
            })
    }

    /// The job of `user` whose id or name is `job`.
    pub async fn cron_job(&self, user: &str, job: &str) -> Result<Option<CronJob>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM cron_jobs WHERE user_id = $1 AND (id = $2 OR name = $2)"
        )))
        .bind(user)
        .bind(job)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(self::job).transpose()
    }

    /// The jobs of `user`, by name.
    pub async fn cron_jobs(&self, user: &str) -> Result<Vec<CronJob>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM cron_jobs WHERE user_id = $1 ORDER BY name"
        )))
        .bind(user)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(job).collect()
    }

    /// Applies `patch` to `user`'s job `job` (id or name); the job as it is now. A new
    /// schedule, or enabling it, computes its next time from now; disabling clears it. A run
    /// going now is not touched: it records its end as usual.
    pub async fn update_cron_job(
        &self,
        user: &str,
        job: &str,
        patch: &CronJobPatch,
    ) -> Result<CronJob, StoreError> {
        let not_found = || StoreError::NotFound {
            what: "cron job",
            key: job.to_string(),
        };
        let current = self.cron_job(user, job).await?.ok_or_else(not_found)?;
        if let Some(name) = &patch.name {
            check_name(name)?;
        }
        if let Some(message) = &patch.message {
            check_message(message)?;
        }
        if let Some(key) = &patch.session_key {
            check_session(key)?;
        }
        if let Some(delivery) = &patch.delivery {
            check_delivery(delivery.as_ref())?;
        }
        let mut tx = Locked::begin(
            self,
            &[
                format!("talon-cron-user:{user}"),
                format!("talon-cron:{}", current.id),
            ],
        )
        .await?;
        let result = async {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM cron_jobs WHERE id = $1 AND user_id = $2"
            )))
            .bind(&current.id)
            .bind(user)
            .fetch_optional(&mut *tx.conn)
            .await?
            .ok_or_else(not_found)?;
            let mut job = self::job(&row)?;
            if let Some(name) = patch.name.as_ref().filter(|n| **n != job.name) {
                let taken = sqlx::query("SELECT 1 FROM cron_jobs WHERE user_id = $1 AND name = $2")
                    .bind(user)
                    .bind(name)
                    .fetch_optional(&mut *tx.conn)
                    .await?
                    .is_some();
                if taken {
                    return Err(invalid(
                        "job name",
                        format!("{name:?} is taken by another of your jobs: choose another"),
                    ));
                }
                job.name.clone_from(name);
            }
            let now = now_ms();
            let rescheduled = patch.schedule.is_some()
                || patch.enabled.is_some_and(|on| on != job.enabled);
            if let Some(schedule) = &patch.schedule {
                job.schedule = schedule.clone();
            }
            job.enabled = patch.enabled.unwrap_or(job.enabled);
            if rescheduled {
                job.next_run_at = next_for(&job.schedule, job.enabled, now);
            }
            if let Some(message) = &patch.message {
                job.message.clone_from(message);
            }
            if let Some(key) = &patch.session_key {
                job.session_key.clone_from(key);
            }
            job.delete_after_run = patch.delete_after_run.unwrap_or(job.delete_after_run);
            job.missed = patch.missed.unwrap_or(job.missed);
            if let Some(delivery) = &patch.delivery {
                job.delivery.clone_from(delivery);
            }
            let s = &job.schedule;
            sqlx::query(
                "UPDATE cron_jobs SET name = $3, schedule_kind = $4, cron_expression = $5, interval_ms = $6, run_at = $7, timezone = $8, \
                 payload = $9, session_key = $10, delete_after_run = $11, enabled = $12, missed_policy = $13, next_run_at = $14, updated_at = $15, \
                 deliver_channel = $16, deliver_to = $17, deliver_pinned = $18 WHERE id = $1 AND user_id = $2",
            )
            .bind(&job.id)
            .bind(user)
            .bind(&job.name)
            .bind(s.kind.as_str())
            .bind(&s.expression)
            .bind(s.interval_ms)
            .bind(s.run_at)
            .bind(&s.timezone)
            .bind(&job.message)
            .bind(&job.session_key)
            .bind(i64::from(job.delete_after_run))
            .bind(i64::from(job.enabled))
            .bind(job.missed.as_str())
            .bind(job.next_run_at)
            .bind(now)
            .bind(job.delivery.as_ref().map_or("", |d| d.channel.as_str()))
            .bind(job.delivery.as_ref().map_or("", |d| d.to.as_str()))
            .bind(i64::from(job.delivery.as_ref().is_some_and(|d| d.pinned)))
            .execute(&mut *tx.conn)
            .await?;
            job.updated_at = now;
            Ok(job)
        }
        .await;
        match result {
            Ok(job) => {
                tx.commit().await?;
                self.notify_cron().await;
                Ok(job)
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Removes `user`'s job `job` (id or name) and its history; whether it existed. A run going
    /// now finishes, but its end finds no job to record in.
    pub async fn remove_cron_job(&self, user: &str, job: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let id: Option<String> =
            sqlx::query("SELECT id FROM cron_jobs WHERE user_id = $1 AND (id = $2 OR name = $2)")
                .bind(user)
                .bind(job)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get("id"))
                .transpose()?;
        let Some(id) = id else {
            tx.rollback().await?;
            return Ok(false);
        };
        sqlx::query("DELETE FROM cron_runs WHERE job_id = $1")
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM cron_jobs WHERE id = $1")
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Asks for a run of `user`'s job `job` now: with `force` whatever the schedule (a disabled
    /// job too), otherwise only when it is due. The job as it is now, and whether a run was
    /// asked for (`false`: not due yet). The gateway's scheduler claims it like any due job.
    pub async fn request_cron_run(
        &self,
        user: &str,
        job: &str,
        force: bool,
    ) -> Result<(CronJob, bool), StoreError> {
        let found = self
            .cron_job(user, job)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "cron job",
                key: job.to_string(),
            })?;
        let now = now_ms();
        let due = found.enabled && found.next_run_at > 0 && found.next_run_at <= now;
        if !force && !due {
            return Ok((found, false));
        }
        if force {
            sqlx::query("UPDATE cron_jobs SET run_requested = $3 WHERE id = $1 AND user_id = $2")
                .bind(&found.id)
                .bind(user)
                .bind(now)
                .execute(self.pool())
                .await?;
        }
        self.notify_cron().await;
        let job = self.cron_job(user, &found.id).await?.unwrap_or(found);
        Ok((job, true))
    }

    /// How many jobs `user` has, enabled, and held by a gateway now.
    pub async fn cron_counts(&self, user: &str) -> Result<(i64, i64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(enabled), 0) AS BIGINT) AS on_, \
             CAST(COALESCE(SUM(CASE WHEN lease_until > $2 THEN 1 ELSE 0 END), 0) AS BIGINT) AS held \
             FROM cron_jobs WHERE user_id = $1",
        )
        .bind(user)
        .bind(now_ms())
        .fetch_one(self.pool())
        .await?;
        Ok((row.try_get("n")?, row.try_get("on_")?, row.try_get("held")?))
    }
}

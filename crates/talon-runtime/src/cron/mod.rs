//! Scheduled jobs at work: the scheduler of a gateway (`talon serve`) claims due jobs and runs
//! each as an agent run (origin `cron`), whose result is delivered to the session the job names
//! as every background run's is, and recorded in the job's history.
//!
//! - **One gateway per run.** Jobs are claimed with this process's owner id and a lease, renewed
//!   while the run goes ([`talon_store::Store::claim_due_cron_jobs`]). A gateway that dies
//!   stops renewing; another claims the job after the lease and, finding the run its
//!   predecessor started (which the run supervisor resumes), waits for that run instead of
//!   starting a second. Nothing happens "on start-up" (GoClaw's sweep ran jobs twice).
//! - **Idle costs nothing.** The scheduler sleeps until the earliest due time (one indexed
//!   query), at most [`POLL`], and wakes at once when a job changes here or, on PostgreSQL,
//!   anywhere (`NOTIFY talon_cron`). No job list is re-read on a timer.
//! - **Missed runs** (the gateways were down past a job's time by more than [`MISSED_AFTER`]):
//!   `run_once` runs it once now, `skip` records a `skipped` run; either way the next time is
//!   the first one after now, never one run per missed time.
//! - **Run limits**: a job's run counts in its tenant's pool of scheduled runs
//!   (`[subagents] max_concurrent_scheduled`), apart from the users' own runs, so people's
//!   background work and due jobs never starve each other; when the pool is full the claim is
//!   left to run out and the job is claimed again then, so a burst of due jobs waits for slots
//!   instead of failing.
//! - **What a job's run may use**: its agent's own tools one level down, so the subagent deny
//!   list applies (no `cron`, no `sessions_send`, no further runs at the maximum depth).

use std::sync::Arc;
use std::time::Duration;

use talon_store::{
    CronJob, CronOutcome, CronRunStatus, MissedPolicy, RunRecord, RunRefused, RunStatus,
};
use tokio_util::sync::CancellationToken;

use crate::agent_runs::TurnEngine;
use crate::cron::ops::CronError;
use crate::runner::Runner;
use crate::runs::{ChildOverrides, ChildSpec, Ending};

mod delivery;
pub mod ops;
pub mod request;
pub mod tool;

/// The longest the scheduler sleeps without looking (jobs another process added on SQLite,
/// a lease of a dead gateway running out).
pub const POLL: Duration = Duration::from_secs(5);

/// How late a run may start before it counts as missed (its policy applies), in ms.
pub const MISSED_AFTER: i64 = 60_000;

/// Jobs claimed in one statement at most (the rest in the next).
const BATCH: usize = 16;

/// The channel a job's run, and its session, are named with.
pub const CHANNEL: &str = "cron";

/// Stops the scheduler when dropped.
pub struct Scheduler {
    stop: CancellationToken,
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(talon_core::waiting::unix_ms(std::time::SystemTime::now())).unwrap_or(i64::MAX)
}

impl Runner {
    /// Starts the scheduler (see the module docs); it runs until the guard is dropped.
    pub fn schedule_jobs(&self) -> Scheduler {
        let stop = CancellationToken::new();
        let wake = Arc::clone(&self.runs.cron_wake);
        self.store().notify_cron_changes(Arc::clone(&wake));
        let runner = self.clone();
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                // Registered before looking, so a change made while looking is not missed.
                let woken = wake.notified();
                // Idle, this one indexed read is all a pass costs: the claim runs only when a
                // job is due.
                let mut due = runner.next_due().await;
                if due.is_some_and(|at| at <= now_ms()) {
                    runner.claim_and_start().await;
                    due = runner.next_due().await;
                }
                let wait = due.map_or(POLL, |at| {
                    let ms = u64::try_from(at.saturating_sub(now_ms())).unwrap_or(0);
                    // A floor, so a job that cannot be claimed never spins the loop.
                    Duration::from_millis(ms).clamp(Duration::from_millis(20), POLL)
                });
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                    () = woken => {}
                }
            }
        });
        Scheduler { stop }
    }

    /// When the next job is due (see [`talon_store::Store::next_cron_due`]); `None` when none
    /// is, or the store cannot say (the scheduler looks again after [`POLL`]).
    async fn next_due(&self) -> Option<i64> {
        match self.store().next_cron_due().await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read when the next job is due");
                None
            }
        }
    }

    /// Has the scheduler look at once (a job was added, changed or asked to run here).
    pub fn wake_scheduler(&self) {
        self.runs.cron_wake.notify_one();
    }

    /// Claims the due jobs and starts each in the background.
    async fn claim_and_start(&self) {
        loop {
            let claimed = self
                .store()
                .claim_due_cron_jobs(self.engine().instance(), self.lease_until(), BATCH)
                .await;
            let jobs = match claimed {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim due jobs");
                    return;
                }
            };
            let full = jobs.len() == BATCH;
            for job in jobs {
                let runner = self.clone();
                tokio::spawn(async move { runner.run_job(job).await });
            }
            if !full {
                return;
            }
        }
    }

    /// Runs one claimed job to its end and records it (see the module docs).
    async fn run_job(&self, job: CronJob) {
        let started = now_ms();
        // Claimed again after its gateway died: that gateway's run (named on the job, or, if
        // it died before naming it, found by the job it is for) is resumed by the run
        // supervisor or has ended; its end is this claim's.
        let started_before = match job.run_id.as_str() {
            "" => self.unrecorded_run_of(&job).await,
            id => Some(id.to_string()),
        };
        let (status, text, run_id) = if let Some(run_id) = started_before {
            let _ = self
                .store()
                .set_cron_run(&job.id, self.engine().instance(), &run_id)
                .await;
            let ending = self.await_run(&job, &run_id).await;
            (ending.0, ending.1, run_id)
        } else if skips(&job, started) {
            (
                CronRunStatus::Skipped,
                format!(
                    "missed: it was due {} s earlier, while no gateway ran, and its policy is skip",
                    (started - job.claim_due) / 1000
                ),
                String::new(),
            )
        } else {
            match self.start_job_run(&job).await {
                Err(Started::Full(why)) => {
                    // At a run limit: the claim is left to run out (no renewal, no end), and
                    // the job is claimed and tried again then, by whichever gateway is free.
                    tracing::info!(job = %job.id, reason = %why, "a due job waits for a free run slot");
                    return;
                }
                Ok(run) => {
                    let id = run.id.clone();
                    let _ = self
                        .store()
                        .set_cron_run(&job.id, self.engine().instance(), &id)
                        .await;
                    let ending = self.execute_renewing(&run).await;
                    (job_status(ending.status), ending.text, id)
                }
                Err(Started::Failed(e)) => (
                    CronRunStatus::Error,
                    format!("the run could not start: {e}"),
                    String::new(),
                ),
            }
        };
        let outcome = CronOutcome {
            status,
            result: &text,
            run_id: &run_id,
            started_at: started,
        };
        match self
            .store()
            .finish_cron_job(&job.id, self.engine().instance(), &outcome)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                job = %job.id,
                "the job was removed, or another gateway holds it now: its end is not recorded here"
            ),
            Err(e) => tracing::warn!(job = %job.id, error = %e, "cannot record a job's end"),
        }
        self.wake_scheduler();
        self.deliver(&job, status, &text).await;
    }

    /// A run started for `job` since its last recorded end (by a gateway that died before
    /// writing the run's id on the job), live or ended, if there is one: every run of a job
    /// ends in a history row, so a newer one belongs to the claim being taken over.
    async fn unrecorded_run_of(&self, job: &CronJob) -> Option<String> {
        let user = (!job.user.is_empty()).then_some(job.user.as_str());
        let recent = self.store().runs_of(user, 100).await.ok()?;
        recent
            .into_iter()
            .find(|run| {
                run.origin == "cron"
                    && run.created_at > job.last_run_at
                    && ChildOverrides::of(run)
                        .is_ok_and(|o| o.cron_job.as_deref() == Some(&*job.id))
            })
            .map(|run| run.id)
    }

    /// Runs `run` here, renewing this gateway's job leases while it goes.
    async fn execute_renewing(&self, run: &RunRecord) -> Ending {
        let execute = self.execute(run, CancellationToken::new(), false);
        tokio::pin!(execute);
        loop {
            tokio::select! {
                ending = &mut execute => return ending,
                () = tokio::time::sleep(self.engine().lease() / 3) => self.renew_job_leases().await,
            }
        }
    }

    /// Waits for the run `run_id` a dead gateway started for `job`, renewing the claim.
    async fn await_run(&self, job: &CronJob, run_id: &str) -> (CronRunStatus, String) {
        loop {
            match self.wait_run(run_id, self.engine().lease() / 3).await {
                Ok(run) if !run.status.is_live() => {
                    return (job_status(run.status), run.result);
                }
                Ok(_) => self.renew_job_leases().await,
                // The database is away: the run is not gone, look again.
                Err(e @ crate::runs::RunsError::Unavailable(_)) => {
                    tracing::warn!(job = %job.id, error = %e, "cannot see a job's run now; waiting");
                    tokio::time::sleep(self.engine().lease() / 3).await;
                }
                Err(e) => {
                    tracing::warn!(job = %job.id, error = %e, "the run of a job whose gateway stopped is gone");
                    return (
                        CronRunStatus::Interrupted,
                        "the gateway running it stopped and its run is gone".into(),
                    );
                }
            }
        }
    }

    async fn renew_job_leases(&self) {
        if let Err(e) = self
            .store()
            .renew_cron_leases(self.engine().instance(), self.lease_until())
            .await
        {
            tracing::warn!(error = %e, "cannot renew job leases");
        }
    }

    /// The session a job's results go to: the one it names, else one of its own.
    pub fn job_session(job: &CronJob) -> String {
        if job.session_key.is_empty() {
            let user = (!job.user.is_empty()).then_some(job.user.as_str());
            TurnEngine::session_key(&job.agent, CHANNEL, user, &job.id)
        } else {
            job.session_key.clone()
        }
    }

    /// Creates `job`'s agent run: its agent, its user, its message; a child of the session its
    /// results go to, with the agent's own tools one level down (never `cron`).
    async fn start_job_run(&self, job: &CronJob) -> Result<RunRecord, Started> {
        let user = (!job.user.is_empty()).then_some(job.user.as_str());
        let failed = |e: crate::agent_runs::RunError| Started::Failed(e.to_string());
        let mut ctx = self
            .engine()
            .context(Some(&job.agent), user, CHANNEL)
            .await
            .map_err(failed)?;
        ctx.session_key = Self::job_session(job);
        let tools: Vec<String> = self
            .engine()
            .own_tool_names(&job.agent, user, 1)
            .await
            .map_err(failed)?
            .into_iter()
            .filter(|t| t != "cron")
            .collect();
        let task = format!(
            "[Scheduled job {:?} ({}), {}]\n{}",
            job.name,
            job.id,
            job.schedule.describe(),
            job.message
        );
        let spec = ChildSpec {
            agent: &job.agent,
            task: &task,
            tools,
            origin: "cron",
            background: true,
            over_link: None,
            target_load: None,
            context_mode: "fresh",
            overrides: ChildOverrides {
                cron_job: Some(job.id.clone()),
                ..ChildOverrides::default()
            },
        };
        self.try_start_child(&ctx, &spec, None)
            .await
            .map_err(|refused| match refused {
                RunRefused::Children { .. }
                | RunRefused::Concurrent { .. }
                | RunRefused::PerUser { .. } => Started::Full(refused.to_string()),
                other => Started::Failed(other.to_string()),
            })
    }
}

/// Why a job's run did not start.
enum Started {
    /// A run limit is full now: tried again later.
    Full(String),
    /// It cannot start (its agent is gone, its tools cannot be read): recorded as an error.
    Failed(String),
}

/// Whether `job`, claimed at `now` for a scheduled time it missed by more than
/// [`MISSED_AFTER`], is skipped by its policy (a forced run never is).
fn skips(job: &CronJob, now: i64) -> bool {
    job.claim_due > 0
        && now.saturating_sub(job.claim_due) > MISSED_AFTER
        && job.missed == MissedPolicy::Skip
}

/// Keys Talon builds for stateless turns, or for another user, take no results (the announcing
/// turn would be refused there, and the result never arrive).
fn reserved_session(session: &str, user: &str) -> bool {
    match session.split(':').collect::<Vec<_>>().as_slice() {
        ["agent", _, _, "stateless", ..] => true,
        ["agent", _, _, "user", owner, _, ..] => *owner != talon_core::caller::key_part(user),
        _ => false,
    }
}

/// Refuses a job whose results would go to a session `agent` and `user` do not own: a
/// conversation of theirs that exists. One check for the `cron` tool, `/v1/cron` and `talon cron`
/// ([`ops`]); an unreachable database is [`CronError::Unavailable`], not a refusal.
pub(crate) async fn check_job_session(
    store: &talon_store::Store,
    session: &str,
    agent: &str,
    user: &str,
) -> Result<(), CronError> {
    if session.is_empty() {
        return Ok(());
    }
    let not_yours = || {
        CronError::Invalid(format!(
            "the job cannot deliver to session {session:?}: it is not a stored conversation of yours; name one, or leave session_key empty for a session of the job's own"
        ))
    };
    if reserved_session(session, user) {
        return Err(not_yours());
    }
    // Only a conversation that exists: a job naming a key nobody used yet would make its
    // user the owner at its first run, and the real chat (a group, a DM whose key is
    // predictable) would be refused as taken from then on.
    if store.session(session).await?.is_none() {
        return Err(not_yours());
    }
    let user = (!user.is_empty()).then_some(user);
    store
        .check_session_owner(session, agent, user)
        .await
        .map_err(|e| match CronError::from(e) {
            CronError::Invalid(reason) => CronError::Invalid(format!(
                "the job cannot deliver to session {session:?}: {reason}"
            )),
            e => e,
        })
}

/// A run's end as a job's history records it.
fn job_status(status: RunStatus) -> CronRunStatus {
    match status {
        RunStatus::Completed => CronRunStatus::Ok,
        RunStatus::Lost => CronRunStatus::Interrupted,
        _ => CronRunStatus::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use talon_store::{Schedule, ScheduleKind};

    fn job(missed: MissedPolicy, claim_due: i64) -> CronJob {
        CronJob {
            id: "cron-1".into(),
            user: String::new(),
            agent: "helper".into(),
            name: "j".into(),
            schedule: Schedule::parse(ScheduleKind::Every, "1h", "")
                .unwrap_or_else(|e| panic!("{e}")),
            message: "m".into(),
            session_key: String::new(),
            delete_after_run: false,
            enabled: true,
            missed,
            delivery: None,
            next_run_at: claim_due,
            run_requested: 0,
            lease_owner: "me".into(),
            lease_until: 0,
            claim_due,
            run_id: String::new(),
            last_status: String::new(),
            last_error: String::new(),
            last_run_at: 0,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn only_a_late_scheduled_run_of_a_skip_job_is_skipped() {
        let now = 10_000_000;
        assert!(skips(&job(MissedPolicy::Skip, now - MISSED_AFTER - 1), now));
        assert!(!skips(&job(MissedPolicy::Skip, now - 1000), now), "on time");
        assert!(
            !skips(&job(MissedPolicy::RunOnce, now - 3_600_000), now),
            "run_once runs it"
        );
        assert!(!skips(&job(MissedPolicy::Skip, 0), now), "a forced run");
    }

    #[test]
    fn a_job_without_a_session_has_one_of_its_own() {
        let mut j = job(MissedPolicy::RunOnce, 0);
        assert_eq!(Runner::job_session(&j), "agent:helper:cron:direct:cron-1");
        j.user = "alice".into();
        assert_eq!(
            Runner::job_session(&j),
            "agent:helper:cron:user:alice:cron-1"
        );
        j.session_key = "room".into();
        assert_eq!(Runner::job_session(&j), "room");
    }

    #[test]
    fn results_never_go_to_a_stateless_or_anothers_session() {
        assert!(reserved_session("agent:a:http:stateless:alice", "alice"));
        assert!(reserved_session("agent:a:cron:user:bob:cron-1", "alice"));
        assert!(!reserved_session("agent:a:cron:user:alice:cron-1", "alice"));
        assert!(!reserved_session("weather-room", "alice"));
    }
}

//! What a job is written from, the same for the `cron` tool, `/v1/cron` and `talon cron`: one
//! field per schedule kind (`at`, `every`, `cron`; exactly one when adding), and the errors
//! that say how to fix a request.

use serde::Deserialize;

use super::ops::CronError;
use talon_store::cron_schedule::local_time;
use talon_store::{
    CronDelivery, CronJob, CronJobPatch, CronRun, MissedPolicy, NewCronJob, Schedule, ScheduleKind,
};

/// A job's fields as a request gives them; `None`: not given (on update: unchanged).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFields {
    /// The agent that runs it (adding only; default: the caller's).
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub at: Option<String>,
    #[serde(default)]
    pub every: Option<String>,
    #[serde(default)]
    pub cron: Option<String>,
    #[serde(default)]
    pub timezone: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub session_key: Option<String>,
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    #[serde(default)]
    pub enabled: Option<bool>,
    /// `run_once` or `skip`.
    #[serde(default)]
    pub missed: Option<String>,
    /// A configured channel the result is sent to as well (with `to`); on update `""` stops
    /// sending.
    #[serde(default)]
    pub channel: Option<String>,
    /// The chat of `channel`, then `/` and a forum topic or thread when there is one.
    #[serde(default)]
    pub to: Option<String>,
}

fn invalid(reason: impl Into<String>) -> CronError {
    CronError::Invalid(reason.into())
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.trim().is_empty())
}

impl JobFields {
    /// The schedule the request gives, read in its time zone (or `zone`, the job's current
    /// one): `None` when it gives none.
    fn schedule(&self, zone: &str) -> Result<Option<Schedule>, CronError> {
        let kinds: Vec<(ScheduleKind, &str)> = [
            (ScheduleKind::At, given(&self.at)),
            (ScheduleKind::Every, given(&self.every)),
            (ScheduleKind::Cron, given(&self.cron)),
        ]
        .into_iter()
        .filter_map(|(kind, value)| value.map(|v| (kind, v)))
        .collect();
        let zone = given(&self.timezone).unwrap_or(zone);
        match kinds.as_slice() {
            [] => Ok(None),
            [(kind, value)] => Schedule::parse(*kind, value, zone)
                .map(Some)
                .map_err(|e| invalid(e.to_string())),
            _ => Err(invalid(
                "give one schedule: at (once), every (an interval) or cron (an expression), not several",
            )),
        }
    }

    /// The chat the request sends results to: `None` when it names none, `Some(None)` when it
    /// stops sending (`channel: ""`). Whether the caller may send there is checked apart
    /// (`Runner::check_job_delivery`); it comes back unpinned.
    fn delivery(&self) -> Result<Option<Option<CronDelivery>>, CronError> {
        match (&self.channel, given(&self.to)) {
            (None, None) => Ok(None),
            (Some(c), _) if c.trim().is_empty() => Ok(Some(None)),
            (Some(channel), Some(to)) => Ok(Some(Some(CronDelivery {
                channel: channel.trim().to_string(),
                to: to.trim().to_string(),
                pinned: false,
            }))),
            _ => Err(invalid(
                "to deliver results to a chat, give both channel (a configured channel's name) and to (the chat id, optionally /topic); channel \"\" stops delivering",
            )),
        }
    }

    fn missed(&self) -> Result<Option<MissedPolicy>, CronError> {
        given(&self.missed)
            .map(|m| MissedPolicy::parse(m).map_err(|e| invalid(e.to_string())))
            .transpose()
    }

    /// The job to create for `user`, run by `agent` unless the request names one.
    pub fn new_job<'a>(
        &'a self,
        user: &'a str,
        agent: &'a str,
    ) -> Result<NewCronJob<'a>, CronError> {
        let Some(name) = given(&self.name) else {
            return Err(invalid(
                "name the job (name), so it can be listed, changed and removed",
            ));
        };
        let Some(schedule) = self.schedule("UTC")? else {
            return Err(invalid(
                "say when it runs: at (once, e.g. 2026-12-01T09:00:00Z), every (e.g. 30m, 2h, 1d) or cron (e.g. \"0 9 * * MON-FRI\"), with timezone for local times",
            ));
        };
        let Some(message) = given(&self.message) else {
            return Err(invalid(
                "say what the agent should do when the job runs (message)",
            ));
        };
        Ok(NewCronJob {
            user,
            agent: given(&self.agent).unwrap_or(agent),
            name,
            schedule,
            message,
            session_key: self.session_key.as_deref().unwrap_or_default().trim(),
            delete_after_run: self.delete_after_run.unwrap_or(false),
            enabled: self.enabled.unwrap_or(true),
            missed: self.missed()?.unwrap_or(MissedPolicy::RunOnce),
            delivery: self.delivery()?.flatten(),
        })
    }

    /// The changes to `job` the request asks for; a time zone alone re-reads the job's
    /// schedule in it.
    pub fn patch(&self, job: &CronJob) -> Result<CronJobPatch, CronError> {
        if self.agent.is_some() {
            return Err(invalid(
                "a job's agent cannot change: remove it and add one for the other agent",
            ));
        }
        let mut schedule = self.schedule(&job.schedule.timezone)?;
        if schedule.is_none()
            && let Some(zone) = given(&self.timezone)
        {
            let tz =
                talon_store::cron_schedule::time_zone(zone).map_err(|e| invalid(e.to_string()))?;
            schedule = Some(Schedule {
                timezone: tz.iana_name().unwrap_or("UTC").to_string(),
                ..job.schedule.clone()
            });
        }
        Ok(CronJobPatch {
            name: given(&self.name).map(str::to_string),
            schedule,
            message: given(&self.message).map(str::to_string),
            session_key: self.session_key.as_ref().map(|k| k.trim().to_string()),
            delete_after_run: self.delete_after_run,
            enabled: self.enabled,
            missed: self.missed()?,
            delivery: self.delivery()?,
        })
    }
}

/// A job on one line, for people and models.
pub fn job_line(job: &CronJob) -> String {
    let tz = &job.schedule.timezone;
    let state = if !job.enabled {
        "disabled".to_string()
    } else if job.next_run_at == 0 {
        "done".to_string()
    } else {
        format!("next {}", local_time(job.next_run_at, tz))
    };
    let last = if job.last_run_at == 0 {
        String::new()
    } else {
        format!(
            ", last {} at {}",
            job.last_status,
            local_time(job.last_run_at, tz)
        )
    };
    let delivered = job.delivery.as_ref().map_or_else(String::new, |d| {
        format!(", results also to {} of channel {}", d.to, d.channel)
    });
    let running = if job.lease_owner.is_empty() {
        ""
    } else {
        ", running now"
    };
    format!(
        "{} {:?} ({}, agent {}): {}; {state}{last}{running}{delivered}",
        job.id,
        job.name,
        job.schedule.describe(),
        job.agent,
        one_line(&job.message, 80)
    )
}

/// A history row on one line (the result cut to `chars`).
pub fn run_line(run: &CronRun, timezone: &str, chars: usize) -> String {
    let run_id = if run.run_id.is_empty() {
        String::new()
    } else {
        format!(" {}", run.run_id)
    };
    format!(
        "{} {}{run_id} ({} s): {}",
        local_time(run.started_at, timezone),
        run.status,
        (run.ended_at - run.started_at).max(0) / 1000,
        one_line(&run.result, chars)
    )
}

fn one_line(text: &str, max: usize) -> String {
    crate::runs::one_line(text, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_needs_a_name_one_schedule_and_a_message() {
        let mut fields = JobFields::default();
        assert!(
            fields
                .new_job("", "a")
                .unwrap_err()
                .to_string()
                .contains("name the job")
        );
        fields.name = Some("news".into());
        assert!(
            fields
                .new_job("", "a")
                .unwrap_err()
                .to_string()
                .contains("say when it runs")
        );
        fields.every = Some("30m".into());
        fields.cron = Some("0 9 * * *".into());
        assert!(
            fields
                .new_job("", "a")
                .unwrap_err()
                .to_string()
                .contains("give one schedule")
        );
        fields.cron = None;
        assert!(
            fields
                .new_job("", "a")
                .unwrap_err()
                .to_string()
                .contains("message")
        );
        fields.message = Some("read the news".into());
        fields.missed = Some("later".into());
        assert!(
            fields
                .new_job("", "a")
                .unwrap_err()
                .to_string()
                .contains("run_once")
        );
        fields.missed = Some("skip".into());
        let job = fields.new_job("alice", "helper").unwrap();
        assert_eq!((job.agent, job.missed), ("helper", MissedPolicy::Skip));
        assert_eq!(job.schedule.interval_ms, 1_800_000);
        fields.timezone = Some("Nowhere/Land".into());
        fields.every = None;
        fields.cron = Some("0 9 * * *".into());
        let e = fields.new_job("alice", "helper").unwrap_err().to_string();
        assert!(e.contains("IANA"), "{e}");
    }
}

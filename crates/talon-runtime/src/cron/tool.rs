//! GoClaw's `cron` tool: status, list, add, update, remove, run (mode due | force) and runs,
//! over the calling user's jobs only. A job is run by the calling agent, as the calling user.
//! The tool is on the subagent deny list, so neither a subagent nor a job's own run (one level
//! down) can schedule more work.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::visible::visible;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::cron_schedule::local_time;

use super::ops::{self, Asker, CronError};
use super::request::{JobFields, job_line, run_line};
use crate::runner::Runner;

/// History rows `runs` shows by default.
const RUNS_DEFAULT: i64 = 10;

/// Input of [`Cron`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronInput {
    /// status, list, add, update, remove, run or runs.
    pub action: String,
    /// The job's id (cron-…) or name.
    #[serde(default)]
    pub id: Option<String>,
    /// add: a name unique among your jobs; update: a new name.
    #[serde(default)]
    pub name: Option<String>,
    /// Once at this time: "2026-12-01T09:00:00Z", or local "2026-12-01 09:00".
    #[serde(default)]
    pub at: Option<String>,
    /// At this interval: "30m", "2h", "1d" (at least 1m).
    #[serde(default)]
    pub every: Option<String>,
    /// A 5-field cron expression such as "0 9 * * MON-FRI".
    #[serde(default)]
    pub cron: Option<String>,
    /// IANA zone of cron and local at times (default UTC).
    #[serde(default)]
    pub timezone: Option<String>,
    /// What to do when it runs, with all you will need (the run starts without this
    /// conversation).
    #[serde(default)]
    pub message: Option<String>,
    /// Where results go: "current" (this conversation), a session key, or empty (the job's
    /// own session).
    #[serde(default)]
    pub session_key: Option<String>,
    /// Delete the job after its next run.
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    /// false pauses the job.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// After downtime: "run_once" (default) or "skip".
    #[serde(default)]
    pub missed: Option<String>,
    /// Also send results to chat `to` of this channel (from a chat: only that chat); "" stops.
    #[serde(default)]
    pub channel: Option<String>,
    /// The chat id for `channel` (then "/topic" if any).
    #[serde(default)]
    pub to: Option<String>,
    /// run: "force" (default) or "due" (only if due).
    #[serde(default)]
    pub mode: Option<String>,
    /// runs: how many (default 10, at most 100).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// GoClaw's `cron` tool.
pub struct Cron {
    runner: Runner,
}

impl Tool for Cron {
    type Input = CronInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "cron",
            "Schedule work for yourself. add: a job (name; one of at, every or cron; message) \
             run later as a background run of you, its result delivered to session_key. \
             status, list: your jobs. update, remove, run (now), runs (its history): job id.",
            SideEffect::Spawns,
        )
        .in_group("automation")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<CronInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let user = ctx.user.clone().unwrap_or_default();
        let done = match input.action.as_str() {
            "status" => self.status(&user).await,
            "list" => self.list(&user).await,
            "add" => self.add(ctx, &user, input).await,
            "update" => self.update(ctx, &user, input).await,
            "remove" => self.remove(&user, input).await,
            "run" => self.run(ctx, &user, input).await,
            "runs" => self.runs(&user, input).await,
            other => Err(format!(
                "action {} is not known; use status, list, add, update, remove, run or runs",
                visible(other)
            )),
        };
        match done {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e),
        }
    }
}

fn fields(ctx: &CallContext, input: &CronInput) -> JobFields {
    JobFields {
        agent: None,
        name: input.name.clone(),
        at: input.at.clone(),
        every: input.every.clone(),
        cron: input.cron.clone(),
        timezone: input.timezone.clone(),
        message: input.message.clone(),
        session_key: input.session_key.as_ref().map(|k| {
            if k.trim() == "current" {
                ctx.session_key.clone()
            } else {
                k.clone()
            }
        }),
        delete_after_run: input.delete_after_run,
        enabled: input.enabled,
        missed: input.missed.clone(),
        channel: input.channel.clone(),
        to: input.to.clone(),
    }
}

/// The channel and chat the calling conversation came from, if it came from one.
fn origin(ctx: &CallContext) -> Option<(&str, &str)> {
    crate::channels::tools::origin(ctx).map(|(channel, chat, _)| (channel, chat))
}

fn id(input: &CronInput) -> Result<&str, String> {
    input
        .id
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| {
            format!(
                "action {} needs id: the job's id (cron-…) or name; action list shows them",
                input.action
            )
        })
}

/// A refused operation in the model's words.
fn refused(e: CronError) -> String {
    match e {
        CronError::NotFound { id } => no_job(&id),
        e => e.to_string(),
    }
}

fn no_job(id: &str) -> String {
    format!(
        "you have no job {}; action list shows your jobs",
        visible(id)
    )
}

impl Cron {
    async fn status(&self, user: &str) -> Result<String, String> {
        let store = self.runner.store();
        let (jobs, enabled, running) = store.cron_counts(user).await.map_err(|e| e.to_string())?;
        let next = store
            .cron_jobs(user)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|j| j.enabled && j.next_run_at > 0)
            .min_by_key(|j| j.next_run_at);
        let next = next.map_or_else(
            || "no job is scheduled".to_string(),
            |j| {
                format!(
                    "next: {} {:?} at {}",
                    j.id,
                    j.name,
                    local_time(j.next_run_at, &j.schedule.timezone)
                )
            },
        );
        Ok(format!(
            "{jobs} job(s), {enabled} enabled, {running} running now; {next}"
        ))
    }

    async fn list(&self, user: &str) -> Result<String, String> {
        let jobs = self
            .runner
            .store()
            .cron_jobs(user)
            .await
            .map_err(|e| e.to_string())?;
        if jobs.is_empty() {
            return Ok("you have no jobs; action add schedules one".into());
        }
        Ok(jobs.iter().map(job_line).collect::<Vec<_>>().join("\n"))
    }

    async fn add(
        &self,
        ctx: &CallContext,
        user: &str,
        input: &CronInput,
    ) -> Result<String, String> {
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let job = ops::add(&self.asker(ctx, &agent), user, &fields(ctx, input))
            .await
            .map_err(refused)?;
        Ok(format!(
            "scheduled: {}\nresults go to session {}",
            job_line(&job),
            Runner::job_session(&job)
        ))
    }

    async fn update(
        &self,
        ctx: &CallContext,
        user: &str,
        input: &CronInput,
    ) -> Result<String, String> {
        let id = id(input)?;
        let job = ops::update(&self.asker(ctx, ""), user, id, &fields(ctx, input))
            .await
            .map_err(refused)?;
        Ok(format!("updated: {}", job_line(&job)))
    }

    fn asker<'a>(&'a self, ctx: &'a CallContext, agent: &'a str) -> Asker<'a> {
        Asker::Gateway {
            runner: &self.runner,
            agent,
            origin: origin(ctx),
        }
    }

    async fn remove(&self, user: &str, input: &CronInput) -> Result<String, String> {
        let id = id(input)?;
        match self.runner.store().remove_cron_job(user, id).await {
            Ok(true) => Ok(format!("removed job {}", visible(id))),
            Ok(false) => Err(no_job(id)),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn run(
        &self,
        ctx: &CallContext,
        user: &str,
        input: &CronInput,
    ) -> Result<String, String> {
        let id = id(input)?;
        let force = ops::force_mode(input.mode.as_deref()).map_err(refused)?;
        let (job, asked) = ops::run(&self.asker(ctx, ""), user, id, force)
            .await
            .map_err(refused)?;
        if !asked {
            return Ok(format!(
                "job {} is not due (next: {}); mode force runs it now",
                job.id,
                local_time(job.next_run_at, &job.schedule.timezone)
            ));
        }
        Ok(format!(
            "job {} starts now; its result goes to session {} (action runs shows it when it ends)",
            job.id,
            Runner::job_session(&job)
        ))
    }

    async fn runs(&self, user: &str, input: &CronInput) -> Result<String, String> {
        let id = id(input)?;
        let store = self.runner.store();
        let limit = input.limit.unwrap_or(RUNS_DEFAULT);
        let runs = store
            .cron_runs(user, id, limit)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| no_job(id))?;
        if runs.is_empty() {
            return Ok(format!("job {} has not run yet", visible(id)));
        }
        let zone = store
            .cron_job(user, id)
            .await
            .ok()
            .flatten()
            .map_or_else(|| "UTC".to_string(), |j| j.schedule.timezone);
        let lines: Vec<String> = runs.iter().map(|r| run_line(r, &zone, 300)).collect();
        // The results were written by models: the pipeline fences this output as untrusted.
        Ok(lines.join("\n"))
    }
}

impl Runner {
    /// Registers the `cron` tool on this runner.
    pub fn register_cron_tool(
        &self,
        registry: &Registry,
    ) -> Result<(), talon_core::registry::RegistryError> {
        registry.register(Cron {
            runner: self.clone(),
        })
    }
}

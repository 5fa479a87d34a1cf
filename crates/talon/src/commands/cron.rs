//! `talon cron list|add|update|remove|run|runs`: scheduled jobs in the store, managed directly
//! there, so it works whether or not a gateway runs. A running gateway's scheduler runs them:
//! on PostgreSQL it hears a change at once (`NOTIFY`), on SQLite within a few seconds; `run`
//! asks it for a run, it does not run the agent here. What models wrote (results) is printed
//! with control characters made visible.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use talon_core::visible::{visible, visible_lines};
use talon_runtime::cron::ops::{self, Asker};
use talon_runtime::cron::request::{JobFields, job_line, run_line};
use talon_store::CronJob;

use super::{fail, refused, usage_error};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// A user's jobs (default: of calls naming no user).
    List {
        /// The user whose jobs to list.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Schedule a job: a name, one of --at, --every or --cron, and a message.
    Add {
        /// The job's name (unique among the user's jobs).
        name: String,
        /// The agent that runs it (default: the default agent).
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        fields: FieldArgs,
        /// What the agent is told when the job runs.
        #[arg(long)]
        message: String,
    },
    /// Change a job: only the options given change.
    Update {
        /// The job's id (cron-…) or name.
        id: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: FieldArgs,
        /// A new message.
        #[arg(long)]
        message: Option<String>,
        /// Pause the job.
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Resume a paused job.
        #[arg(long)]
        enable: bool,
    },
    /// Remove a job with its history.
    Remove {
        /// The job's id (cron-…) or name.
        id: String,
        /// The user who owns it.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
    },
    /// Ask the gateway to run a job now.
    Run {
        /// The job's id (cron-…) or name.
        id: String,
        /// force: run now whatever the schedule; due: only if it is due.
        #[arg(long, default_value = "force", value_parser = ["force", "due"])]
        mode: String,
        /// The user who owns it.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
    },
    /// A job's recent runs, newest first.
    Runs {
        /// The job's id (cron-…) or name.
        id: String,
        /// How many at most.
        #[arg(long, default_value = "20")]
        limit: i64,
        /// The user who owns it.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The schedule and delivery options `add` and `update` share.
#[derive(Debug, Args)]
pub struct FieldArgs {
    /// The user who owns the job.
    #[arg(long, value_name = "ID")]
    user: Option<String>,
    /// Run once at this time: RFC 3339, or a local "2026-12-01 09:00" in --timezone.
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// Run at this interval: 30m, 2h, 1d, 1h30m (at least 1m), or milliseconds.
    #[arg(long, value_name = "INTERVAL")]
    every: Option<String>,
    /// Run on this cron expression: 5 fields, such as "0 9 * * MON-FRI".
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// The IANA time zone of --cron and local --at times (default UTC).
    #[arg(long, value_name = "ZONE")]
    timezone: Option<String>,
    /// The session each run's result is delivered to (empty: a session of the job's own).
    #[arg(long, value_name = "KEY")]
    session: Option<String>,
    /// Delete the job after its next scheduled run.
    #[arg(long)]
    delete_after_run: bool,
    /// After downtime past a run's time: run_once (one run, then the next time) or skip.
    #[arg(long, value_parser = ["run_once", "skip"])]
    missed: Option<String>,
    /// Also send each run's result to a chat of this configured channel (with --to); on
    /// update, "" stops sending. The chat must be in the channel's automated_chats.
    #[arg(long, value_name = "NAME")]
    channel: Option<String>,
    /// The chat for --channel: its id, then "/" and a forum topic or thread if any.
    #[arg(long, value_name = "CHAT")]
    to: Option<String>,
}

impl FieldArgs {
    fn fields(&self) -> JobFields {
        JobFields {
            at: self.at.clone(),
            every: self.every.clone(),
            cron: self.cron.clone(),
            timezone: self.timezone.clone(),
            session_key: self.session.clone(),
            delete_after_run: self.delete_after_run.then_some(true),
            missed: self.missed.clone(),
            channel: self.channel.clone(),
            to: self.to.clone(),
            ..JobFields::default()
        }
    }

    fn user(&self) -> String {
        self.user.clone().unwrap_or_default()
    }
}

fn no_job(id: &str) -> ExitCode {
    usage_error(format!(
        "no job {} of this user; `talon cron list [--user ID]` lists them",
        visible(id)
    ))
}

fn print_job(prefix: &str, job: &CronJob) -> ExitCode {
    println!(
        "{prefix}{}\nresults go to session {}",
        visible(&job_line(job)),
        visible(&talon_runtime::runner::Runner::job_session(job))
    );
    ExitCode::SUCCESS
}

pub async fn run(config: Config, data_dir: &Path, command: CronCommand) -> ExitCode {
    let store = match crate::store::open(&config, data_dir).await {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    let asker = Asker::Operator {
        store: &store,
        config: &config,
    };
    match command {
        CronCommand::List { user, json } => {
            match store.cron_jobs(&user.unwrap_or_default()).await {
                Ok(jobs) if json => {
                    println!("{}", serde_json::json!(jobs));
                    ExitCode::SUCCESS
                }
                Ok(jobs) => {
                    if jobs.is_empty() {
                        println!("no jobs");
                    }
                    for job in jobs {
                        println!("{}", visible(&job_line(&job)));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        CronCommand::Add {
            name,
            agent,
            fields,
            message,
        } => {
            let job_fields = JobFields {
                agent,
                name: Some(name),
                message: Some(message),
                ..fields.fields()
            };
            match ops::add(&asker, &fields.user(), &job_fields).await {
                Ok(job) => print_job("scheduled: ", &job),
                Err(e) => refused(e),
            }
        }
        CronCommand::Update {
            id,
            name,
            fields,
            message,
            disable,
            enable,
        } => {
            let job_fields = JobFields {
                name,
                message,
                enabled: if disable {
                    Some(false)
                } else {
                    enable.then_some(true)
                },
                ..fields.fields()
            };
            match ops::update(&asker, &fields.user(), &id, &job_fields).await {
                Ok(job) => print_job("updated: ", &job),
                Err(e) => refused(e),
            }
        }
        CronCommand::Remove { id, user } => {
            match store.remove_cron_job(&user.unwrap_or_default(), &id).await {
                Ok(true) => {
                    println!("removed job {}", visible(&id));
                    ExitCode::SUCCESS
                }
                Ok(false) => no_job(&id),
                Err(e) => fail(e),
            }
        }
        CronCommand::Run { id, mode, user } => {
            let user = user.unwrap_or_default();
            match ops::run(&asker, &user, &id, mode == "force").await {
                Ok((job, true)) => {
                    println!(
                        "job {} asked to run; a running gateway starts it (`talon cron runs {}` shows it when it ends)",
                        job.id, job.id
                    );
                    ExitCode::SUCCESS
                }
                Ok((job, false)) => {
                    println!(
                        "job {} is not due (next: {}); --mode force runs it now",
                        job.id,
                        talon_store::cron_schedule::local_time(
                            job.next_run_at,
                            &job.schedule.timezone
                        )
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => refused(e),
            }
        }
        CronCommand::Runs {
            id,
            limit,
            user,
            json,
        } => {
            let user = user.unwrap_or_default();
            let zone = match store.cron_job(&user, &id).await {
                Ok(Some(job)) => job.schedule.timezone,
                Ok(None) => return no_job(&id),
                Err(e) => return fail(e),
            };
            match store.cron_runs(&user, &id, limit).await {
                Ok(Some(runs)) if json => {
                    println!("{}", serde_json::json!(runs));
                    ExitCode::SUCCESS
                }
                Ok(Some(runs)) => {
                    if runs.is_empty() {
                        println!("no runs yet");
                    }
                    for run in runs {
                        println!("{}", visible_lines(&run_line(&run, &zone, 200), ""));
                    }
                    ExitCode::SUCCESS
                }
                Ok(None) => no_job(&id),
                Err(e) => fail(e),
            }
        }
    }
}

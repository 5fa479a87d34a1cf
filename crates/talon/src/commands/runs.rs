//! `talon runs list|show|cancel`: the agent runs in the store (subagents, delegations, team
//! members, scheduled jobs), read and cancelled directly in the store, so it works whether or
//! not a gateway runs; a cancel is a durable flag the running gateway acts on, and a run no
//! gateway holds is ended at once (the same operation `POST /v1/runs/{id}/cancel` calls).

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use talon_core::visible::{visible, visible_lines};

use super::{fail, usage_error};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// The runs of a user (default: of calls naming no user), newest first.
    List {
        /// The user whose runs to list.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// How many at most.
        #[arg(long, default_value = "50")]
        limit: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One run: its status, task, result and transcript.
    Show {
        /// The run's id (`run-…`).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a run and every run below it, on whichever gateway runs them.
    Cancel {
        /// The run's id (`run-…`).
        id: String,
    },
}

pub async fn run(config: Config, data_dir: &Path, command: RunsCommand) -> ExitCode {
    let store = match crate::store::open(&config, data_dir).await {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    match command {
        RunsCommand::List { user, limit, json } => {
            let user = user.as_deref().filter(|u| !u.is_empty());
            match store.runs_of(user, limit.clamp(1, 1000)).await {
                Ok(runs) if json => {
                    println!("{}", serde_json::json!(runs));
                    ExitCode::SUCCESS
                }
                Ok(runs) => {
                    if runs.is_empty() {
                        println!("no runs");
                    }
                    for run in runs {
                        let task: String = run.task.chars().take(60).collect();
                        println!(
                            "{}  {:<14} {} ({}, depth {})  {}",
                            visible(&run.id),
                            run.status.as_str(),
                            visible(&run.agent_key),
                            visible(&run.origin),
                            run.depth,
                            visible(&task)
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        RunsCommand::Show { id, json } => match store.run(&id).await {
            Ok(Some(run)) if json => {
                println!("{}", serde_json::json!(run));
                ExitCode::SUCCESS
            }
            Ok(Some(run)) => {
                println!(
                    "{} {} — agent {}, {} (depth {}), session {}",
                    visible(&run.id),
                    run.status.as_str(),
                    visible(&run.agent_key),
                    visible(&run.origin),
                    run.depth,
                    visible(&run.session_key)
                );
                println!(
                    "tokens: {} in, {} out{}",
                    run.input_tokens,
                    run.output_tokens,
                    if run.cancel_requested {
                        "; cancel requested"
                    } else {
                        ""
                    }
                );
                println!("task:\n{}", visible_lines(&run.task, "  │ "));
                if !run.result.is_empty() {
                    println!("result:\n{}", visible_lines(&run.result, "  │ "));
                }
                ExitCode::SUCCESS
            }
            Ok(None) => usage_error(format!("no run {id:?}; `talon runs list` lists them")),
            Err(e) => fail(e),
        },
        RunsCommand::Cancel { id } => match store.run(&id).await {
            Ok(Some(run)) if !run.status.is_live() => {
                usage_error(format!("run {id:?} has ended ({})", run.status.as_str()))
            }
            Ok(Some(_)) => match store.cancel_run_tree(&id).await {
                Ok(done) => {
                    println!(
                        "cancel requested for {} run(s); {} no gateway held ended now, the gateways running the rest stop them",
                        done.flagged, done.ended
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            },
            Ok(None) => usage_error(format!("no run {id:?}; `talon runs list` lists them")),
            Err(e) => fail(e),
        },
    }
}

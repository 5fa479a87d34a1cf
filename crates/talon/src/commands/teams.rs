//! `talon teams create|delete|add|remove|list|show|board`: agent teams in the store, managed
//! directly there (a gateway sees a change at its next call). What models wrote (tasks, their
//! results) is printed with control characters made visible.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use talon_core::visible::visible;
use talon_runtime::teams::ops;
use talon_store::{TaskFilter, TaskOrder, TeamRecord};

use super::{fail, refused, said};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum TeamsCommand {
    /// Create a team led by an agent.
    Create {
        /// The team's name.
        name: String,
        /// The agent that leads it (posts tasks, answers the user).
        #[arg(long)]
        lead: String,
        /// What the team is for.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Delete a team with its board and mailbox.
    Delete {
        /// The team.
        name: String,
    },
    /// Add an agent to a team (or change its role).
    Add {
        /// The team.
        name: String,
        /// The agent.
        agent: String,
        /// Its role on the team.
        #[arg(long, default_value = "")]
        role: String,
    },
    /// Remove an agent from a team (its unread messages stay).
    Remove {
        /// The team.
        name: String,
        /// The agent.
        agent: String,
    },
    /// List the teams.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One team: its lead and members.
    Show {
        /// The team.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A team's task board (every user's tasks).
    Board {
        /// The team.
        name: String,
        /// Every task, ended ones too (default: the active ones).
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A store error: the caller's (exit 2) when it says what was wrong with the input.
fn no_team(name: &str) -> ExitCode {
    refused(ops::no_team(name))
}

fn print_team(team: &TeamRecord) {
    println!("{}\tlead {}", team.name, team.lead);
    if !team.description.is_empty() {
        println!("  {}", visible(&team.description));
    }
    for member in &team.members {
        if member.role.is_empty() {
            println!("  - {}", member.agent);
        } else {
            println!("  - {}: {}", member.agent, visible(&member.role));
        }
    }
}

pub async fn run(config: Config, data_dir: &Path, command: TeamsCommand) -> ExitCode {
    let store = match crate::store::open(&config, data_dir).await {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    match command {
        TeamsCommand::Create {
            name,
            lead,
            description,
        } => said(
            ops::create(&store, &name, &lead, &description).await,
            |team| format!("created team {} led by {}", team.name, team.lead),
        ),
        TeamsCommand::Delete { name } => said(ops::delete(&store, &name).await, |()| {
            format!("deleted team {name}")
        }),
        TeamsCommand::Add { name, agent, role } => {
            said(ops::add_member(&store, &name, &agent, &role).await, |_| {
                format!("{agent} is on team {name}")
            })
        }
        TeamsCommand::Remove { name, agent } => {
            said(ops::remove_member(&store, &name, &agent).await, |()| {
                format!("{agent} left team {name}")
            })
        }
        TeamsCommand::List { json } => match store.teams().await {
            Ok(teams) if json => {
                println!("{}", serde_json::json!(teams));
                ExitCode::SUCCESS
            }
            Ok(teams) => {
                if teams.is_empty() {
                    println!("no teams; `talon teams create NAME --lead AGENT` makes one");
                }
                teams.iter().for_each(print_team);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        TeamsCommand::Show { name, json } => match store.team(&name).await {
            Ok(Some(team)) if json => {
                println!("{}", serde_json::json!(team));
                ExitCode::SUCCESS
            }
            Ok(Some(team)) => {
                print_team(&team);
                ExitCode::SUCCESS
            }
            Ok(None) => no_team(&name),
            Err(e) => fail(e),
        },
        TeamsCommand::Board { name, all, json } => {
            match store.team(&name).await {
                Ok(Some(_)) => {}
                Ok(None) => return no_team(&name),
                Err(e) => return fail(e),
            }
            let filter = if all {
                TaskFilter::All
            } else {
                TaskFilter::Active
            };
            match store
                .tasks(&name, None, filter, TaskOrder::Priority, 1000)
                .await
            {
                Ok(tasks) if json => {
                    println!("{}", serde_json::json!(tasks));
                    ExitCode::SUCCESS
                }
                Ok(tasks) => {
                    if tasks.is_empty() {
                        println!("no tasks on {name}'s board");
                    }
                    for task in tasks {
                        let after = if task.blocked_by.is_empty() {
                            String::new()
                        } else {
                            let ids: Vec<String> =
                                task.blocked_by.iter().map(|id| format!("#{id}")).collect();
                            format!(" after {}", ids.join(", "))
                        };
                        println!(
                            "#{}\t{}\tp{}\t{}{}{}",
                            task.id,
                            task.status.as_str(),
                            task.priority,
                            visible(&task.subject),
                            if task.owner.is_empty() {
                                String::new()
                            } else {
                                format!(" (owner {})", task.owner)
                            },
                            after
                        );
                        if !task.result.is_empty() {
                            println!("\t{}", visible(&task.result));
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

//! `team_tasks` and `team_message`, over the team in play ([`Runner::team_in_play`]).
//!
//! Who may do what is decided here, from the store's record of the team, never from what a
//! model says it is: the lead posts, cancels and fails tasks; a member claims, completes and
//! fails only its own; anyone on the team lists, reads and searches the board and uses the
//! mailbox. Task text and messages were written by models: they are returned fenced.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{NewTask, TaskFilter, TaskOrder, TaskRecord, TaskStatus, TeamRecord};

use crate::agent_runs::Runner;

/// Tasks a listing or search shows at most.
const LIST_LIMIT: i64 = 50;

/// Input of [`TeamTasks`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamTasksInput {
    /// list: the board (filter, order). get: task task_id. create (lead): post a task.
    /// claim (member): take task_id, or the pending task of highest priority. complete
    /// (member): finish your task task_id with result. fail: end task task_id as failed with
    /// reason (a member its own; the lead any). cancel (lead): withdraw task task_id. search:
    /// tasks matching query.
    pub action: String,
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
    /// get, claim, complete, fail, cancel: the task's id (a number, from list).
    #[serde(default)]
    pub task_id: Option<i64>,
    /// create: what is to be done, in a line.
    #[serde(default)]
    pub subject: Option<String>,
    /// create: everything the member needs to do it.
    #[serde(default)]
    pub description: Option<String>,
    /// create: higher is taken first (default 0).
    #[serde(default)]
    pub priority: Option<i64>,
    /// create: ids of tasks that must complete before this one can start.
    #[serde(default)]
    pub blocked_by: Option<Vec<i64>>,
    /// complete: the task's result.
    #[serde(default)]
    pub result: Option<String>,
    /// fail, cancel: why.
    #[serde(default)]
    pub reason: Option<String>,
    /// search: words to look for in subjects and descriptions.
    #[serde(default)]
    pub query: Option<String>,
    /// list: active (default: pending, blocked, in progress), completed or all.
    #[serde(default)]
    pub filter: Option<String>,
    /// list: priority (default) or newest.
    #[serde(default)]
    pub order: Option<String>,
}

/// GoClaw's `team_tasks`: the team's task board.
pub struct TeamTasks {
    runner: Runner,
}

impl Tool for TeamTasks {
    type Input = TeamTasksInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "team_tasks",
            "Your team's task board. The lead creates tasks (subject, description, priority, \
             blocked_by) and they are given to idle members by priority; each result comes back \
             to the lead. list, get and search show tasks; a member can claim, complete and fail \
             its own; the lead can fail or cancel any. A task waits while a prerequisite is \
             unfinished, and stays blocked if one fails.",
            SideEffect::Mutating,
        )
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TeamTasksInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let team = match self.runner.team_in_play(ctx, input.team.as_deref()).await {
            Ok(team) => team,
            Err(e) => return ToolOutput::error(e),
        };
        let agent = ctx.agent_key.clone().unwrap_or_default();
        // The board of the user this conversation is for: another user's tasks are not there.
        let user = ctx.user.as_deref().unwrap_or_default();
        let lead = team.lead == agent;
        let store = self.runner.store();
        let id = || {
            input
                .task_id
                .ok_or_else(|| format!("{} needs task_id (a number from list)", input.action))
        };
        let done = match input.action.as_str() {
            "list" => {
                let filter = match input.filter.as_deref().unwrap_or("active") {
                    "active" => TaskFilter::Active,
                    "completed" => TaskFilter::Completed,
                    "all" => TaskFilter::All,
                    other => return bad_choice("filter", other, "active, completed, all"),
                };
                let order = match input.order.as_deref().unwrap_or("priority") {
                    "priority" => TaskOrder::Priority,
                    "newest" => TaskOrder::Newest,
                    other => return bad_choice("order", other, "priority, newest"),
                };
                store
                    .tasks(&team.name, Some(user), filter, order, LIST_LIMIT)
                    .await
                    .map(|tasks| board(&team, &tasks))
            }
            "search" => {
                let query = input.query.as_deref().unwrap_or_default();
                store
                    .search_tasks(&team.name, user, query, LIST_LIMIT)
                    .await
                    .map(|tasks| board(&team, &tasks))
            }
            "get" => {
                let id = match id() {
                    Ok(id) => id,
                    Err(e) => return ToolOutput::error(e),
                };
                match store.task(&team.name, id).await {
                    Ok(Some(task)) if task.user_id == user => Ok(detail(&task)),
                    Ok(_) => {
                        return ToolOutput::error(format!(
                            "there is no task #{id} on {}'s board; list the board for the ids",
                            team.name
                        ));
                    }
                    Err(e) => Err(e),
                }
            }
            "create" => {
                if !lead {
                    return ToolOutput::error(format!(
                        "only {}'s lead ({}) posts tasks; tell the lead with team_message",
                        team.name, team.lead
                    ));
                }
                let new = NewTask {
                    team: &team.name,
                    subject: input.subject.as_deref().unwrap_or_default(),
                    description: input.description.as_deref().unwrap_or_default(),
                    priority: input.priority.unwrap_or(0),
                    blocked_by: input.blocked_by.as_deref().unwrap_or_default(),
                    created_by: &agent,
                    lead_session: &ctx.session_key,
                    user: ctx.user.as_deref().unwrap_or_default(),
                };
                match store.create_task(&new).await {
                    Ok(task) => {
                        self.runner.task_event(&task, &agent, "task_created");
                        let started = self.runner.dispatch_team(&team.name).await;
                        Ok(format!(
                            "Posted task #{} ({}){}; {started} member run(s) started.",
                            task.id,
                            task.status.as_str(),
                            if task.blocked_by.is_empty() {
                                String::new()
                            } else {
                                format!(", after {}", ids(&task.blocked_by))
                            }
                        ))
                    }
                    Err(e) => Err(e),
                }
            }
            "claim" => {
                if lead {
                    return ToolOutput::error(
                        "you lead this team: post tasks and let members claim them",
                    );
                }
                match store
                    .claim_task(
                        &team.name,
                        &agent,
                        input.task_id,
                        self.runner.lease_until(),
                        Some(user),
                    )
                    .await
                {
                    Ok(Some(task)) => {
                        self.runner.task_event(&task, &agent, "task_claimed");
                        if let Some(run) = ctx.run.run_id.as_deref() {
                            let _ = store.set_task_run(task.id, run).await;
                        }
                        Ok(format!("You claimed:\n{}", detail(&task)))
                    }
                    Ok(None) => Ok(match input.task_id {
                        Some(id) => format!(
                            "task #{id} is not pending: another member has it, it is blocked, or it ended"
                        ),
                        None => "no pending task to claim".to_string(),
                    }),
                    Err(e) => Err(e),
                }
            }
            "complete" => {
                let id = match id() {
                    Ok(id) => id,
                    Err(e) => return ToolOutput::error(e),
                };
                let result = input.result.as_deref().unwrap_or_default();
                if result.trim().is_empty() {
                    return ToolOutput::error("result is empty: give the task's result");
                }
                match store
                    .complete_task(&team.name, id, &agent, user, result)
                    .await
                {
                    Ok((task, unblocked)) => {
                        self.runner.task_event(&task, &agent, "task_completed");
                        if !unblocked.is_empty() {
                            self.runner.dispatch_team(&team.name).await;
                        }
                        Ok(format!(
                            "Completed task #{id}.{}",
                            if unblocked.is_empty() {
                                String::new()
                            } else {
                                format!(" Now unblocked: {}.", ids_of(&unblocked))
                            }
                        ))
                    }
                    Err(e) => Err(e),
                }
            }
            "fail" | "cancel" => {
                let id = match id() {
                    Ok(id) => id,
                    Err(e) => return ToolOutput::error(e),
                };
                let status = if input.action == "fail" {
                    TaskStatus::Failed
                } else if lead {
                    TaskStatus::Cancelled
                } else {
                    return ToolOutput::error(
                        "only the lead cancels tasks; fail your own with a reason",
                    );
                };
                let reason = input.reason.as_deref().unwrap_or_default();
                if reason.trim().is_empty() {
                    return ToolOutput::error(format!("{} needs a reason", input.action));
                }
                let owner = (!lead).then_some(agent.as_str());
                match store
                    .end_task(&team.name, id, status, owner, user, reason)
                    .await
                {
                    Ok((task, blocked)) => {
                        self.runner
                            .task_event(&task, &agent, super::ended(task.status));
                        if !lead {
                            self.runner.tell_lead_of_failure(&team.name, &task).await;
                        }
                        Ok(format!(
                            "Task #{id} {}.{}",
                            task.status.as_str(),
                            if blocked.is_empty() {
                                String::new()
                            } else {
                                format!(
                                    " It blocks {}: they wait until it is posted again.",
                                    ids_of(&blocked)
                                )
                            }
                        ))
                    }
                    Err(e) => Err(e),
                }
            }
            other => {
                return bad_choice(
                    "action",
                    other,
                    "list, get, create, claim, complete, fail, cancel, search",
                );
            }
        };
        match done {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// Input of [`TeamMessage`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamMessageInput {
    /// send: to one teammate. broadcast: to everyone else on the team. read: your unread
    /// messages (each is read once).
    pub action: String,
    /// The team, when you are on several.
    #[serde(default)]
    pub team: Option<String>,
    /// send: the teammate (the lead or a member).
    #[serde(default)]
    pub to: Option<String>,
    /// send, broadcast: the message.
    #[serde(default)]
    pub text: Option<String>,
}

/// GoClaw's `team_message`: the team's mailbox.
pub struct TeamMessage {
    runner: Runner,
}

impl Tool for TeamMessage {
    type Input = TeamMessageInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "team_message",
            "Your team's mailbox: send to a teammate, broadcast to everyone else, or read your \
             unread messages. A message to an idle member starts it working on it; messages are \
             kept until read.",
            SideEffect::Mutating,
        )
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TeamMessageInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let team = match self.runner.team_in_play(ctx, input.team.as_deref()).await {
            Ok(team) => team,
            Err(e) => return ToolOutput::error(e),
        };
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let user = ctx.user.as_deref().unwrap_or_default();
        let store = self.runner.store();
        let text = input.text.as_deref().unwrap_or_default();
        // The message says who it is from and in which role (the recipient's model reads it).
        let role = if team.lead == agent {
            "lead"
        } else {
            "teammate"
        };
        let body = format!("[Team message from {role} {agent}]: {text}");
        let done = match input.action.as_str() {
            "send" => {
                let Some(to) = input.to.as_deref().filter(|t| !t.is_empty()) else {
                    return ToolOutput::error("send needs to: the teammate's agent key");
                };
                if text.trim().is_empty() {
                    return ToolOutput::error("text is empty: write the message");
                }
                match store
                    .send_team_message(&team.name, &agent, to, user, &body)
                    .await
                {
                    Ok(_) => {
                        self.runner.message_event(ctx, &team.name, to);
                        let woke = self.runner.wake_member(ctx, &team, to).await;
                        Ok(format!(
                            "Sent to {to}.{}",
                            if woke {
                                " It was idle and is now working on it."
                            } else {
                                ""
                            }
                        ))
                    }
                    Err(e) => Err(e),
                }
            }
            "broadcast" => {
                if text.trim().is_empty() {
                    return ToolOutput::error("text is empty: write the message");
                }
                let sent = store
                    .broadcast_team_message(&team.name, &agent, user, &body)
                    .await;
                if sent.is_ok() {
                    self.runner.message_event(ctx, &team.name, "*");
                }
                sent.map(|n| format!("Sent to {n} teammate(s)."))
            }
            "read" => store
                .read_team_messages(&team.name, &agent, user, LIST_LIMIT)
                .await
                .map(|messages| {
                    if messages.is_empty() {
                        return "No unread messages.".to_string();
                    }
                    messages
                        .iter()
                        .map(|m| {
                            talon_core::untrusted::wrap(
                                "team_message",
                                &format!("message {} from {}", m.id, m.sender),
                                &m.body,
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                }),
            other => return bad_choice("action", other, "send, broadcast, read"),
        };
        match done {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

impl Runner {
    /// Registers `team_tasks` and `team_message` on this runner.
    pub fn register_team_tools(&self, registry: &Registry) -> Result<(), String> {
        registry
            .register(TeamTasks {
                runner: self.clone(),
            })
            .and_then(|()| {
                registry.register(TeamMessage {
                    runner: self.clone(),
                })
            })
            .map_err(|e| e.to_string())
    }

    /// Starts a run of `member` (a member of `team` with no live run for it) to read and act
    /// on its messages; whether one started. The lead is never woken this way: it reads its
    /// messages in its own conversation.
    async fn wake_member(&self, ctx: &CallContext, team: &TeamRecord, member: &str) -> bool {
        if !team.has_member(member)
            || self
                .busy_members(&team.name)
                .await
                .iter()
                .any(|m| m == member)
        {
            return false;
        }
        match self.start_mail_run(ctx, team, member).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(team = %team.name, member, error = %e, "cannot wake a member for its messages; they stay in its mailbox");
                false
            }
        }
    }
}

fn bad_choice(what: &str, given: &str, choices: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "{what} {} is not known; use one of: {choices}",
        talon_core::visible::visible(given)
    ))
}

fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ids_of(tasks: &[TaskRecord]) -> String {
    ids(&tasks.iter().map(|t| t.id).collect::<Vec<_>>())
}

/// One line a task on the board.
fn line(task: &TaskRecord) -> String {
    let mut line = format!(
        "#{} [{}] p{} {}",
        task.id,
        task.status.as_str(),
        task.priority,
        task.subject
    );
    if !task.owner.is_empty() {
        line.push_str(&format!(" (owner {})", task.owner));
    }
    if !task.blocked_by.is_empty() {
        line.push_str(&format!(" after {}", ids(&task.blocked_by)));
    }
    line
}

/// The board as the model sees it (fenced: models wrote the tasks).
fn board(team: &TeamRecord, tasks: &[TaskRecord]) -> String {
    if tasks.is_empty() {
        return format!("No tasks on {}'s board match.", team.name);
    }
    let lines = tasks.iter().map(line).collect::<Vec<_>>().join("\n");
    talon_core::untrusted::wrap("team_tasks", &format!("team {}", team.name), &lines)
}

/// One task whole (fenced).
fn detail(task: &TaskRecord) -> String {
    let mut text = line(task);
    if !task.description.is_empty() {
        text.push_str(&format!("\n{}", task.description));
    }
    if !task.result.is_empty() {
        text.push_str(&format!("\nResult: {}", task.result));
    }
    talon_core::untrusted::wrap("team_tasks", &format!("task #{}", task.id), &text)
}

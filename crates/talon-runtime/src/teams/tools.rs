//! GoClaw's `team_tasks` and `team_message`, over [`Board`] (the one implementation both
//! dialects share), and their registration with the Claude Code tools of
//! [`super::claude_code`].

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::registry::RegistryError;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{TaskFilter, TaskOrder, TeamRecord};

use super::board::Board;
use crate::runner::Runner;

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
        let board = match Board::open(&self.runner, call.ctx(), input.team.as_deref()).await {
            Ok(board) => board,
            Err(e) => return ToolOutput::own_error(e),
        };
        let id = || {
            input
                .task_id
                .ok_or_else(|| format!("{} needs task_id (a number from list)", input.action))
        };
        let text = |field: &Option<String>| field.as_deref().unwrap_or_default().to_string();
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
                board.list(filter, order).await
            }
            "search" => board.search(&text(&input.query)).await,
            "get" => match id() {
                Ok(id) => board.get(id).await,
                Err(e) => Err(e),
            },
            "create" => {
                board
                    .create(
                        &text(&input.subject),
                        &text(&input.description),
                        input.priority.unwrap_or(0),
                        input.blocked_by.as_deref().unwrap_or_default(),
                    )
                    .await
            }
            "claim" => board.claim(input.task_id).await,
            "complete" => match id() {
                Ok(id) => board.complete(id, &text(&input.result)).await,
                Err(e) => Err(e),
            },
            "fail" | "cancel" => match id() {
                Ok(id) => {
                    board
                        .end(id, input.action == "cancel", &text(&input.reason))
                        .await
                }
                Err(e) => Err(e),
            },
            other => {
                return bad_choice(
                    "action",
                    other,
                    "list, get, create, claim, complete, fail, cancel, search",
                );
            }
        };
        let others_wrote = matches!(input.action.as_str(), "list" | "search" | "get" | "claim");
        board_answer(done, others_wrote)
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
        let board = match Board::open(&self.runner, call.ctx(), input.team.as_deref()).await {
            Ok(board) => board,
            Err(e) => return ToolOutput::own_error(e),
        };
        let text = input.text.as_deref().unwrap_or_default();
        let done = match input.action.as_str() {
            "send" => {
                board
                    .send(input.to.as_deref().unwrap_or_default(), text)
                    .await
            }
            "broadcast" => board.broadcast(text).await,
            "read" => board.read().await,
            other => return bad_choice("action", other, "send, broadcast, read"),
        };
        board_answer(done, input.action == "read")
    }
}

impl Runner {
    /// Registers the team tools on this runner: GoClaw's `team_tasks` and `team_message`,
    /// Claude Code's `TaskCreate`, `TaskList`, `TaskGet`, `TaskUpdate` and `SendMessage`.
    pub fn register_team_tools(&self, registry: &Registry) -> Result<(), RegistryError> {
        registry.register(TeamTasks {
            runner: self.clone(),
        })?;
        registry.register(TeamMessage {
            runner: self.clone(),
        })?;
        super::claude_code::register(self, registry)
    }

    /// Starts a run of `member` (a member of `team` with no live run for it) to read and act
    /// on its messages; whether one started. The lead is never woken this way: it reads its
    /// messages in its own conversation.
    pub(crate) async fn wake_member(
        &self,
        ctx: &CallContext,
        team: &TeamRecord,
        member: &str,
    ) -> bool {
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

/// A board's answer as a tool result: refusals and confirmations in Talon's own words, and
/// only what teammates wrote (`others_wrote`: listings, a task's text, messages read) fenced.
pub(super) fn board_answer(done: Result<String, String>, others_wrote: bool) -> ToolOutput {
    match done {
        Ok(text) if others_wrote => ToolOutput::text(text),
        Ok(text) => ToolOutput::own(text),
        Err(e) => ToolOutput::own_error(e),
    }
}

pub(super) fn bad_choice(what: &str, given: &str, choices: &str) -> ToolOutput {
    ToolOutput::own_error(format!(
        "{what} {} is not known; use one of: {choices}",
        talon_core::visible::visible(given)
    ))
}

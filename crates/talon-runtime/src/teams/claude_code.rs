//! Claude Code's agent-team tools over the same board and mailbox as `team_tasks` and
//! `team_message` ([`Board`]): `TaskCreate`, `TaskList`, `TaskGet`, `TaskUpdate` and
//! `SendMessage`. A model on an Anthropic provider is offered these instead of GoClaw's
//! (`ToolSpec::same_as`).
//!
//! What Claude Code lets models negotiate, Talon's server decides: `TaskUpdate` cannot give a
//! task an owner (the dispatcher does) or put it back to pending (a lapsed claim does), and
//! `SendMessage`'s shutdown requests are answered that a member stops when its task ends.
//! `TeamCreate` and `TeamDelete` are not offered: teams are an operator's configuration
//! (`talon teams`, `/v1/teams`), never a model's.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::registry::RegistryError;
use talon_core::{Authorized, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{TaskFilter, TaskOrder};

use super::board::Board;
use super::tools::{bad_choice, board_answer};
use crate::runner::Runner;

/// A task id as Claude Code sends it: a string ("3") or a number.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TaskId {
    Number(i64),
    Text(String),
}

impl TaskId {
    fn parse(&self) -> Result<i64, String> {
        match self {
            Self::Number(n) => Ok(*n),
            Self::Text(s) => s.trim().trim_start_matches('#').parse().map_err(|_| {
                format!(
                    "taskId {} is not a task id; TaskList shows them",
                    talon_core::visible::visible(s)
                )
            }),
        }
    }
}

/// Runs `work` on the board of the call's team (`team`: the one it names), as a tool result
/// (see [`board_answer`]; `others_wrote`: the answer holds teammates' text).
async fn on_board<F>(
    runner: &Runner,
    call: &Authorized<impl Sized>,
    team: Option<&str>,
    others_wrote: bool,
    work: F,
) -> ToolOutput
where
    F: AsyncFnOnce(&Board<'_>) -> Result<String, String>,
{
    match Board::open(runner, call.ctx(), team).await {
        Ok(board) => board_answer(work(&board).await, others_wrote),
        Err(e) => ToolOutput::own_error(e),
    }
}

/// Input of [`TaskCreate`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskCreateInput {
    /// A brief title for the task.
    pub subject: String,
    /// What needs to be done, with everything the teammate needs.
    pub description: String,
    /// Present continuous form shown while it is worked on (accepted, not shown).
    #[serde(default, rename = "activeForm")]
    pub active_form: Option<String>,
    /// Ids of tasks that must complete before this one can start.
    #[serde(default, rename = "blockedBy")]
    pub blocked_by: Vec<i64>,
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
}

/// Claude Code's `TaskCreate`: the lead posts a task on the team's board.
pub struct TaskCreate {
    runner: Runner,
}

impl Tool for TaskCreate {
    type Input = TaskCreateInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskCreate",
            "Create a task in your team's shared task list (you must lead the team). Idle \
             teammates are given tasks as they come, a task with blockedBy once those completed \
             (it is given their results); each result is sent back to you.",
            SideEffect::Mutating,
        )
        .same_as("team_tasks")
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TaskCreateInput>) -> ToolOutput {
        let input = call.input();
        on_board(
            &self.runner,
            &call,
            input.team.as_deref(),
            false,
            async |board| {
                board
                    .create(&input.subject, &input.description, 0, &input.blocked_by)
                    .await
            },
        )
        .await
    }
}

/// Input of [`TaskList`].
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct TaskListInput {
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
}

/// Claude Code's `TaskList`: the team's tasks.
pub struct TaskList {
    runner: Runner,
}

impl Tool for TaskList {
    type Input = TaskListInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskList",
            "List the tasks in your team's shared task list: id, status, owner, and what \
             blocks each.",
            SideEffect::ReadOnly,
        )
        .same_as("team_tasks")
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TaskListInput>) -> ToolOutput {
        let team = call.input().team.as_deref();
        on_board(&self.runner, &call, team, true, async |board| {
            board.list(TaskFilter::All, TaskOrder::Priority).await
        })
        .await
    }
}

/// Input of [`TaskGet`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskGetInput {
    /// The task's id.
    #[serde(rename = "taskId")]
    pub task_id: TaskId,
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
}

/// Claude Code's `TaskGet`: one task whole.
pub struct TaskGet {
    runner: Runner,
}

impl Tool for TaskGet {
    type Input = TaskGetInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskGet",
            "Get one task of your team's shared task list: its description, status, owner and \
             result.",
            SideEffect::ReadOnly,
        )
        .same_as("team_tasks")
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TaskGetInput>) -> ToolOutput {
        let id = match call.input().task_id.parse() {
            Ok(id) => id,
            Err(e) => return ToolOutput::own_error(e),
        };
        let team = call.input().team.as_deref();
        on_board(&self.runner, &call, team, true, async |board| {
            board.get(id).await
        })
        .await
    }
}

/// Input of [`TaskUpdate`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskUpdateInput {
    /// The task's id.
    #[serde(rename = "taskId")]
    pub task_id: TaskId,
    /// in_progress: take the task (a teammate). completed: finish your task (give its result).
    /// failed: give up your task (give the reason as result). deleted: withdraw it (the lead).
    #[serde(default)]
    pub status: Option<String>,
    /// completed: the task's result (otherwise your final answer is). failed: why.
    #[serde(default)]
    pub result: Option<String>,
    /// Not settable: the server gives tasks to teammates.
    #[serde(default)]
    pub owner: Option<String>,
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
}

/// Claude Code's `TaskUpdate`: take, finish or withdraw a task.
pub struct TaskUpdate {
    runner: Runner,
}

impl Tool for TaskUpdate {
    type Input = TaskUpdateInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskUpdate",
            "Update a task in your team's shared task list: status in_progress takes it, \
             completed finishes it with its result, failed gives it up with the reason, \
             deleted withdraws it (lead only). Owners are assigned by the server.",
            SideEffect::Mutating,
        )
        .same_as("team_tasks")
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<TaskUpdateInput>) -> ToolOutput {
        let input = call.input();
        let id = match input.task_id.parse() {
            Ok(id) => id,
            Err(e) => return ToolOutput::own_error(e),
        };
        if input.owner.is_some() {
            return ToolOutput::own_error(
                "owner cannot be set: idle teammates are given tasks by the server",
            );
        }
        let team = input.team.as_deref();
        let result = input.result.clone().unwrap_or_default();
        match input.status.as_deref() {
            Some("in_progress") => {
                on_board(&self.runner, &call, team, true, async |board| {
                    board.claim(Some(id)).await
                })
                .await
            }
            Some("completed") => {
                let result = if result.trim().is_empty() {
                    "completed (no result given)".to_string()
                } else {
                    result
                };
                on_board(&self.runner, &call, team, false, async |board| {
                    board.complete(id, &result).await
                })
                .await
            }
            Some("failed") => {
                on_board(&self.runner, &call, team, false, async |board| {
                    board.end(id, false, &result).await
                })
                .await
            }
            Some("deleted") => {
                on_board(&self.runner, &call, team, false, async |board| {
                    board.end(id, true, "withdrawn by the lead").await
                })
                .await
            }
            Some("pending") => ToolOutput::own_error(
                "a task goes back to pending by itself when its teammate stops; to give up \
                 yours, say why with SendMessage to the lead",
            ),
            Some(other) => bad_choice("status", other, "in_progress, completed, failed, deleted"),
            None => ToolOutput::own_error(
                "say the new status: in_progress, completed, failed or deleted",
            ),
        }
    }
}

/// Input of [`SendMessage`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendMessageInput {
    /// message (to one teammate), broadcast (to everyone else), shutdown_request,
    /// shutdown_response.
    #[serde(rename = "type")]
    pub kind: String,
    /// message: the teammate's name.
    #[serde(default)]
    pub recipient: Option<String>,
    /// The message.
    #[serde(default)]
    pub content: Option<String>,
    /// A few words previewing it (accepted, not shown).
    #[serde(default)]
    pub summary: Option<String>,
    /// The team, when you are on several (the conversation keeps it afterwards).
    #[serde(default)]
    pub team: Option<String>,
}

/// Claude Code's `SendMessage`: the team's mailbox.
pub struct SendMessage {
    runner: Runner,
}

impl Tool for SendMessage {
    type Input = SendMessageInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "SendMessage",
            "Send a message to a teammate (type message, recipient) or to everyone else on \
             your team (type broadcast). An idle teammate starts working on it; messages are \
             kept until read.",
            SideEffect::Mutating,
        )
        .same_as("team_message")
        .in_group("teams")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<SendMessageInput>) -> ToolOutput {
        let input = call.input();
        let team = input.team.as_deref();
        let content = input.content.clone().unwrap_or_default();
        match input.kind.as_str() {
            "message" => {
                let to = input.recipient.clone().unwrap_or_default();
                on_board(&self.runner, &call, team, false, async |board| {
                    board.send(&to, &content).await
                })
                .await
            }
            "broadcast" => {
                on_board(&self.runner, &call, team, false, async |board| {
                    board.broadcast(&content).await
                })
                .await
            }
            "shutdown_request" | "shutdown_response" => ToolOutput::own_error(
                "teammates are not shut down by message: each stops when its task ends, and \
                 the server gives a stopped teammate's task to another",
            ),
            other => bad_choice("type", other, "message, broadcast"),
        }
    }
}

/// Registers Claude Code's team tools on `runner`.
pub(super) fn register(runner: &Runner, registry: &Registry) -> Result<(), RegistryError> {
    let runner = || runner.clone();
    registry
        .register(TaskCreate { runner: runner() })
        .and_then(|()| registry.register(TaskList { runner: runner() }))
        .and_then(|()| registry.register(TaskGet { runner: runner() }))
        .and_then(|()| registry.register(TaskUpdate { runner: runner() }))
        .and_then(|()| registry.register(SendMessage { runner: runner() }))
}

//! `TaskStop` (Claude Code dialect): stop a background `Bash` command and everything it started.
//! `shell_id` (the older Claude Code name) is accepted for `task_id`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::Shell;

use crate::runtime::background::{owner, task_id};

/// Input of [`TaskStop`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStopInput {
    /// The ID of the background task to stop.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Older name for task_id.
    #[serde(default)]
    pub shell_id: Option<String>,
}

/// The `TaskStop` tool.
#[derive(Debug, Clone)]
pub struct TaskStop {
    pub shell: Arc<Shell>,
}

impl Tool for TaskStop {
    type Input = TaskStopInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskStop",
            "Stops a running background task (a Bash command started with run_in_background) and every \
             process it started. Takes the task_id the Bash call returned.",
            SideEffect::Blocking,
        )
        .same_as("process")
        .in_group("claude_code")
        .in_group("runtime")
    }

    async fn execute(&self, call: Authorized<TaskStopInput>) -> ToolOutput {
        let input = call.input();
        let id = or_error!(task_id([&input.task_id, &input.shell_id]));
        or_error!(self.shell.background().stop(&owner(call.ctx()), id).await);
        ToolOutput::text(format!("Task {id} stopped successfully."))
    }
}

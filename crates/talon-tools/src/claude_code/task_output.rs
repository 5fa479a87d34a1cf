//! `TaskOutput` (Claude Code dialect): the output of a background `Bash` command, waiting for it
//! to finish by default. `bash_id` and `shell_id` (older Claude Code names) are accepted for
//! `task_id`. Each read returns the output since the previous one.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::Shell;

use crate::runtime::background::{owner, read_body, task_id};

/// Default wait (ms).
pub const DEFAULT_WAIT_MS: u64 = 30_000;
/// Longest wait (ms).
pub const MAX_WAIT_MS: u64 = 600_000;

/// Input of [`TaskOutput`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskOutputInput {
    /// The task ID to get output from.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Older name for task_id.
    #[serde(default)]
    pub bash_id: Option<String>,
    /// Older name for task_id.
    #[serde(default)]
    pub shell_id: Option<String>,
    /// Whether to wait for completion (default true).
    #[serde(default)]
    pub block: Option<bool>,
    /// Max wait time in ms (default 30000, max 600000).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// The `TaskOutput` tool.
#[derive(Debug, Clone)]
pub struct TaskOutput {
    pub shell: Arc<Shell>,
}

impl Tool for TaskOutput {
    type Input = TaskOutputInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TaskOutput",
            "Retrieves output from a running or completed background task (a Bash command started with \
             run_in_background). By default waits for the task to finish (block: true) up to timeout \
             milliseconds (default 30000, max 600000); block: false returns what is there now. Each call \
             returns the output produced since the previous call.",
            SideEffect::ReadOnly,
        )
        .same_as("process")
        .in_group("claude_code")
        .in_group("runtime")
    }

    async fn execute(&self, call: Authorized<TaskOutputInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let id = or_error!(task_id([&input.task_id, &input.bash_id, &input.shell_id]));
        let ms = input.timeout.unwrap_or(DEFAULT_WAIT_MS);
        if ms > MAX_WAIT_MS {
            return ToolOutput::error(format!(
                "timeout must be at most {MAX_WAIT_MS} milliseconds, got {ms}"
            ));
        }
        let wait = input
            .block
            .unwrap_or(true)
            .then(|| Duration::from_millis(ms));
        let read = or_error!(self.shell.background().read(&owner(ctx), id, wait).await);
        ToolOutput::text(format!(
            "Task {} (status: {}):\n{}",
            read.info.id,
            read.info.status.describe(),
            read_body(&read, ctx.workspace.as_deref())
        ))
    }
}

//! `process` (seed 000's runtime group): manage the background commands this session started
//! with `exec` (`background: true`): list them, read their output (waiting for the end or
//! not), write to their standard input, kill them. Another session's commands are invisible.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::Shell;

use super::background::{elapsed, list_text, owner, read_body, shown_log};

/// Longest wait an `output` call may ask for (seconds).
pub const MAX_WAIT_SECS: u64 = 600;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The session's background processes.
    List,
    /// New output since the last read.
    Output,
    /// Send text to standard input.
    Write,
    /// Stop the process and everything it started.
    Kill,
}

/// Input of [`Process`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessInput {
    /// list, output, write or kill.
    pub action: Action,
    /// The process id that exec returned (not needed for list).
    #[serde(default)]
    pub id: Option<String>,
    /// For output: wait up to this many seconds for the process to finish (default 0: return at once; max 600).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// For write: the text to send to standard input (include "\n" to end a line).
    #[serde(default)]
    pub data: Option<String>,
    /// For write: close standard input after writing (end of file).
    #[serde(default)]
    pub eof: Option<bool>,
}

/// The `process` tool.
#[derive(Debug, Clone)]
pub struct Process {
    pub shell: Arc<Shell>,
}

impl Tool for Process {
    type Input = ProcessInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "process",
            "Manage the background processes this session started with exec (background: true). \
             action \"list\" shows them; \"output\" returns the output since the last read (timeout: seconds \
             to wait for the process to finish, default 0); \"write\" sends data to its standard input \
             (eof: true closes it); \"kill\" stops it and everything it started.",
            SideEffect::Mutating,
        )
        .in_group("runtime")
    }

    async fn execute(&self, call: Authorized<ProcessInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let background = self.shell.background();
        let owner = &owner(ctx);
        let id = || {
            input
                .id
                .as_deref()
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .ok_or("id is required for this action: pass the id exec returned, or use action \"list\" to see them")
        };
        match input.action {
            Action::List => ToolOutput::text(list_text(&background.list(owner))),
            Action::Output => {
                let id = or_error!(id());
                let secs = input.timeout.unwrap_or(0);
                if secs > MAX_WAIT_SECS {
                    return ToolOutput::error(format!(
                        "timeout must be at most {MAX_WAIT_SECS} seconds, got {secs}"
                    ));
                }
                let wait = (secs > 0).then(|| Duration::from_secs(secs));
                let read = or_error!(background.read(owner, id, wait).await);
                let info = &read.info;
                ToolOutput::text(format!(
                    "Process {} ({}, {}): {}\n{}",
                    info.id,
                    info.status.describe(),
                    elapsed(info.elapsed),
                    info.command.trim(),
                    read_body(&read, ctx.workspace.as_deref())
                ))
            }
            Action::Write => {
                let id = or_error!(id());
                let data = input.data.as_deref().unwrap_or("");
                let eof = input.eof.unwrap_or(false);
                if data.is_empty() && !eof {
                    return ToolOutput::error(
                        "write needs data (the text to send) or eof: true (to close standard input)",
                    );
                }
                let info = or_error!(background.write(owner, id, data.as_bytes(), eof).await);
                let closed = if eof { " and closed its input" } else { "" };
                ToolOutput::text(format!(
                    "Wrote {} bytes to process {}{closed}.",
                    data.len(),
                    info.id
                ))
            }
            Action::Kill => {
                let id = or_error!(id());
                let info = or_error!(background.stop(owner, id).await);
                ToolOutput::text(format!(
                    "Process {} {} after {}. Its output log: {}",
                    info.id,
                    info.status.describe(),
                    elapsed(info.elapsed),
                    shown_log(&info, ctx.workspace.as_deref())
                ))
            }
        }
    }
}

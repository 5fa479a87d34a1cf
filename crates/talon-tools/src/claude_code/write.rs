//! `Write` (Claude Code dialect): create a file, or replace one the session has read.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{FsError, Jail, WriteMode};

use super::{fs_message, snippet};
use crate::fs::read_state::ReadState;
use crate::fs::text::LineEnding;
use crate::fs::workspace::FsConfig;
use crate::fs::{open_existing, read_all};

/// Input of [`Write`].
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// The absolute path to the file to write (must be absolute, not relative).
    pub file_path: String,
    /// The content to write to the file.
    pub content: String,
}

/// The `Write` tool.
#[derive(Debug, Clone)]
pub struct Write {
    pub fs: Arc<FsConfig>,
    pub state: Arc<ReadState>,
}

pub const NOT_READ: &str = "File has not been read yet. Read it first before writing to it.";
pub const MODIFIED: &str = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.";

impl Tool for Write {
    type Input = WriteInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Write",
            "Writes a file to the workspace, overwriting it if it exists. An existing file must have been read \
             with the Read tool first. Prefer Edit for changes to existing files. Missing directories are created; \
             the write is atomic and keeps the file's permissions and line endings.",
            SideEffect::Mutating,
        )
        .same_as("write_file")
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<WriteInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let files = self.fs.files(ctx);
        if let Some(routed) = files.write_routed(&input.file_path, &input.content).await {
            return match routed {
                Ok(message) => ToolOutput::text(message),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        super::off_thread(self, jail, &ctx.session_key, input, on_disk).await
    }
}

/// The disk half of `Write`: blocking I/O, run off the async threads.
fn on_disk(this: &Write, jail: &Jail, session: &str, input: &WriteInput) -> ToolOutput {
    let root = jail.root().to_path_buf();
    let located = match jail.locate(&input.file_path) {
        Ok(l) => l,
        Err(e) => return ToolOutput::error(fs_message(&e, &root)),
    };
    let mut ending = LineEnding::Lf;
    let mut existed = false;
    match open_existing(jail, &input.file_path) {
        Ok((_, mut opened)) => {
            if opened.is_dir() {
                return ToolOutput::error(format!(
                    "{} is a directory, not a file.",
                    input.file_path
                ));
            }
            let current = match read_all(&mut opened) {
                Ok(b) => b,
                Err(e) => {
                    return ToolOutput::error(format!("cannot read {}: {e}", input.file_path));
                }
            };
            let freshness =
                this.state
                    .check(session, &opened.real_abs, opened.mtime_ns(), &current);
            if let Some(refusal) = super::stale(freshness) {
                return refusal;
            }
            ending = LineEnding::detect(&String::from_utf8_lossy(&current));
            existed = true;
        }
        Err(FsError::NotFound { .. }) => {}
        Err(e) => return ToolOutput::error(fs_message(&e, &root)),
    }
    let content = if existed {
        ending.apply(&input.content)
    } else {
        input.content.clone()
    };
    match jail.write(&located, content.as_bytes(), WriteMode::CreateParents) {
        Ok(report) => {
            if let Ok((_, opened)) = open_existing(jail, &input.file_path) {
                this.state.record(
                    session,
                    &opened.real_abs,
                    opened.mtime_ns(),
                    Some(content.as_bytes()),
                );
            }
            if report.created {
                ToolOutput::text(format!(
                    "File created successfully at: {}",
                    report.real_abs.display()
                ))
            } else {
                ToolOutput::text(format!(
                    "The file {} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                    report.real_abs.display(),
                    snippet(&input.content, 1)
                ))
            }
        }
        Err(e) => ToolOutput::error(fs_message(&e, &root)),
    }
}

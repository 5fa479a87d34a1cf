//! `Edit` (Claude Code dialect): exact string replacement with Claude Code's validation order and
//! messages, read-before-edit and modified-since-read checks.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{FsError, Jail, WriteMode};

use super::{DENIED, fs_message, snippet};
use crate::fs::edit::{LoadError, load};
use crate::fs::edit_core::{EditError, first_difference, line_of, replace};
use crate::fs::read_state::ReadState;
use crate::fs::workspace::FsConfig;

/// Input of [`Edit`].
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    /// The absolute path to the file to modify.
    pub file_path: String,
    /// The text to replace.
    pub old_string: String,
    /// The text to replace it with (must be different from old_string).
    pub new_string: String,
    /// Replace all occurrences of old_string (default false).
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// The `Edit` tool.
#[derive(Debug, Clone)]
pub struct Edit {
    pub fs: Arc<FsConfig>,
    pub state: Arc<ReadState>,
}

impl Tool for Edit {
    type Input = EditInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Edit",
            "Performs exact string replacements in files. The file must have been read with Read first. \
             old_string must match the file exactly, indentation included (without Read's line-number prefix), \
             and be unique unless replace_all is true. An empty old_string creates a new file.",
            SideEffect::Mutating,
        )
        .same_as("edit")
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<EditInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        // 1. Nothing to do.
        if input.old_string == input.new_string {
            return ToolOutput::error(
                "No changes to make: old_string and new_string are exactly the same.",
            );
        }
        let (old, new, all) = (
            input.old_string.clone(),
            input.new_string.clone(),
            input.replace_all == Some(true),
        );
        let shown_old = input.old_string.clone();
        let files = self.fs.files(ctx);
        let routed = files.edit_routed(&input.file_path, move |current| {
            replace(current, &old, &new, all).map(|(text, _)| text).map_err(|e| match e {
                EditError::Identical => "No changes to make: old_string and new_string are exactly the same.".to_string(),
                EditError::NotFound => format!("String to replace not found in file.\nString: {shown_old}"),
                EditError::Ambiguous(n) => format!(
                    "Found {n} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: {shown_old}"
                ),
            })
        })
        .await;
        if let Some(result) = routed {
            return match result {
                Ok(message) => ToolOutput::text(message),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        super::off_thread(self, jail, &ctx.session_key, input, on_disk).await
    }
}

/// The disk half of `Edit`: blocking I/O, run off the async threads.
fn on_disk(this: &Edit, jail: &Jail, session: &str, input: &EditInput) -> ToolOutput {
    let root = jail.root().to_path_buf();
    let located = match jail.locate(&input.file_path) {
        Ok(l) => l,
        Err(e) => return ToolOutput::error(fs_message(&e, &root)),
    };
    // 2. Denied paths.
    if jail.is_denied(located.rel()) {
        return ToolOutput::error(DENIED);
    }
    let file = match load(jail, &input.file_path) {
        Ok(f) => f,
        // 3./4. An empty old_string on a missing file creates it.
        Err(LoadError::Fs(FsError::NotFound { .. })) if input.old_string.is_empty() => {
            return match jail.write(
                &located,
                input.new_string.as_bytes(),
                WriteMode::CreateParents,
            ) {
                Ok(report) => ToolOutput::text(format!(
                    "File created successfully at: {}",
                    report.real_abs.display()
                )),
                Err(e) => ToolOutput::error(fs_message(&e, &root)),
            };
        }
        Err(LoadError::Fs(e)) => return ToolOutput::error(fs_message(&e, &root)),
        Err(LoadError::Other(message)) => return ToolOutput::error(message),
    };
    if input.old_string.is_empty() && !file.text.is_empty() {
        return ToolOutput::error("Cannot create new file - file already exists.");
    }
    // 5. Notebooks have their own tool.
    if crate::fs::extension(&file.real_abs) == "ipynb" {
        return ToolOutput::error(
            "File is a Jupyter Notebook. Use the NotebookEdit to edit this file.",
        );
    }
    // 6./7. Read first; unchanged since.
    let freshness = this
        .state
        .check(session, &file.real_abs, file.mtime_ns, &file.raw);
    if let Some(refusal) = super::stale(freshness) {
        return refusal;
    }
    let old = input.old_string.replace("\r\n", "\n");
    let new = input.new_string.replace("\r\n", "\n");
    let (edited, _) = match replace(&file.text, &old, &new, input.replace_all == Some(true)) {
        Ok(v) => v,
        Err(EditError::Identical) => {
            return ToolOutput::error(
                "No changes to make: old_string and new_string are exactly the same.",
            );
        }
        // 8.
        Err(EditError::NotFound) => {
            return ToolOutput::error(format!(
                "String to replace not found in file.\nString: {}",
                input.old_string
            ));
        }
        // 9.
        Err(EditError::Ambiguous(n)) => {
            return ToolOutput::error(format!(
                "Found {n} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: {}",
                input.old_string
            ));
        }
    };
    let bytes = file.ending.apply(&edited);
    match jail.write(&file.located, bytes.as_bytes(), WriteMode::ParentMustExist) {
        Ok(report) => {
            if let Ok((_, opened)) = crate::fs::open_existing(jail, &input.file_path) {
                this.state.record(
                    session,
                    &opened.real_abs,
                    opened.mtime_ns(),
                    Some(bytes.as_bytes()),
                );
            }
            let line = line_of(&edited, first_difference(&file.text, &edited));
            ToolOutput::text(format!(
                "The file {} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{}",
                report.real_abs.display(),
                snippet(&edited, line)
            ))
        }
        Err(e) => ToolOutput::error(fs_message(&e, &root)),
    }
}

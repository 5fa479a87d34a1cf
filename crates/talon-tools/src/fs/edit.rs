//! `edit` (GoClaw dialect, alias `edit_file`): replace an exact string in a file.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{Jail, Located, WriteMode};

use super::edit_core::{EditError, replace};
use super::text::{LineEnding, decode};
use super::workspace::FsConfig;
use super::{MAX_EDIT_BYTES, open_existing, read_all};

/// Input of [`Edit`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    /// File path, relative to the workspace or absolute inside it.
    pub path: String,
    /// The exact text to replace (include enough context to make it unique).
    pub old_string: String,
    /// The replacement text.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// The `edit` tool.
#[derive(Debug, Clone)]
pub struct Edit {
    pub fs: Arc<FsConfig>,
}

/// A file's text, ready to edit: LF line endings, and the ending to restore.
pub struct Editable {
    pub located: Located,
    pub text: String,
    pub ending: LineEnding,
    pub raw: Vec<u8>,
    pub mtime_ns: i128,
    pub real_abs: std::path::PathBuf,
}

/// Loads a file for editing; errors are `FsError` text or a refusal for non-text files.
pub fn load(jail: &Jail, path: &str) -> Result<Editable, LoadError> {
    let (located, mut opened) = open_existing(jail, path).map_err(LoadError::Fs)?;
    let shown = jail.display(&located);
    if opened.is_dir() {
        return Err(LoadError::Other(format!(
            "{} is a directory, not a file",
            shown.display()
        )));
    }
    if opened.stat.st_size.max(0) as u64 > MAX_EDIT_BYTES {
        return Err(LoadError::Other(format!(
            "{} is larger than {} MiB; edit it with exec tools (sed, patch) instead",
            shown.display(),
            MAX_EDIT_BYTES >> 20
        )));
    }
    let raw = read_all(&mut opened)
        .map_err(|e| LoadError::Other(format!("cannot read {}: {e}", shown.display())))?;
    let decoded = decode(&raw);
    if decoded.lossy || super::text::is_binary(&raw) {
        return Err(LoadError::Other(format!(
            "{} is not UTF-8 text, so it cannot be edited by string replacement",
            shown.display()
        )));
    }
    let ending = LineEnding::detect(&decoded.text);
    Ok(Editable {
        located,
        text: decoded.text.replace("\r\n", "\n"),
        ending,
        raw,
        mtime_ns: opened.mtime_ns(),
        real_abs: opened.real_abs,
    })
}

/// Why a file could not be loaded for editing.
pub enum LoadError {
    Fs(talon_fs::FsError),
    Other(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Fs(e) => write!(f, "{e}"),
            LoadError::Other(s) => f.write_str(s),
        }
    }
}

impl Tool for Edit {
    type Input = EditInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "edit",
            "Replace an exact string in a file. old_string must match the file exactly (whitespace and \
             indentation included) and occur once, unless replace_all is true. Line endings (LF/CRLF) and the \
             file's permissions are kept.",
            SideEffect::Mutating,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<EditInput>) -> ToolOutput {
        let input = call.input();
        let (old, new, all) = (
            input.old_string.clone(),
            input.new_string.clone(),
            input.replace_all == Some(true),
        );
        let path = input.path.clone();
        let files = self.fs.files(call.ctx());
        let routed = files.edit_routed(&input.path, move |current| {
            replace(current, &old, &new, all).map(|(text, _)| text).map_err(|e| match e {
                EditError::Identical => "old_string and new_string are identical; there is nothing to change".to_string(),
                EditError::NotFound => format!("old_string not found in {path}; read it and copy the exact text"),
                EditError::Ambiguous(n) => format!("old_string found {n} times in {path}; set replace_all=true or include more context"),
            })
        })
        .await;
        if let Some(result) = routed {
            return match result {
                Ok(message) => ToolOutput::silent(message),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        let (path, old, new, all) = (
            input.path.clone(),
            input.old_string.clone(),
            input.new_string.clone(),
            input.replace_all == Some(true),
        );
        super::blocking(move || edit_disk(&jail, &path, &old, &new, all))
            .await
            .unwrap_or_else(|| ToolOutput::error(super::SHUTTING_DOWN))
    }
}

/// The disk half of `edit`: blocking I/O, run off the async threads.
fn edit_disk(jail: &Jail, path: &str, old_string: &str, new_string: &str, all: bool) -> ToolOutput {
    let file = or_error!(load(jail, path));
    let shown = jail.display(&file.located);
    let old = old_string.replace("\r\n", "\n");
    let new = new_string.replace("\r\n", "\n");
    let (edited, count) = match replace(&file.text, &old, &new, all) {
        Ok(v) => v,
        Err(EditError::Identical) => {
            return ToolOutput::error(
                "old_string and new_string are identical; there is nothing to change",
            );
        }
        Err(EditError::NotFound) => {
            return ToolOutput::error(format!(
                "old_string not found in {}; read the file and copy the exact text, including whitespace and indentation",
                shown.display()
            ));
        }
        Err(EditError::Ambiguous(n)) => {
            return ToolOutput::error(format!(
                "old_string found {n} times in {}; set replace_all=true, or include more surrounding lines so it matches once",
                shown.display()
            ));
        }
    };
    let bytes = file.ending.apply(&edited);
    match jail.write(&file.located, bytes.as_bytes(), WriteMode::ParentMustExist) {
        Ok(report) => ToolOutput::silent(format!(
            "Edited {}: replaced {count} occurrence{}",
            report.real_abs.display(),
            if count == 1 { "" } else { "s" }
        )),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

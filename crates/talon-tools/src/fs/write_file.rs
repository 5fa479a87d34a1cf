//! `write_file` (GoClaw dialect): create or replace a file atomically, or append to it.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{Jail, WriteMode};

use super::workspace::FsConfig;
use super::{MAX_EDIT_BYTES, open_existing, read_all};

/// Input of [`WriteFile`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileInput {
    /// File path, relative to the workspace or absolute inside it. Missing directories are created.
    pub path: String,
    /// The full content to write.
    pub content: String,
    /// Append to the end of the file instead of replacing it.
    #[serde(default)]
    pub append: Option<bool>,
}

/// The `write_file` tool.
#[derive(Debug, Clone)]
pub struct WriteFile {
    pub fs: Arc<FsConfig>,
}

impl Tool for WriteFile {
    type Input = WriteFileInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "write_file",
            "Create or overwrite a file in the workspace with the given content (set append=true to add to the \
             end instead). Missing directories are created. The write is atomic: readers never see half a file.",
            SideEffect::Mutating,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<WriteFileInput>) -> ToolOutput {
        let input = call.input();
        let files = self.fs.files(call.ctx());
        let routed = if input.append == Some(true) {
            let tail = input.content.clone();
            files
                .edit_routed(&input.path, move |current| Ok(format!("{current}{tail}")))
                .await
        } else {
            files.write_routed(&input.path, &input.content).await
        };
        if let Some(result) = routed {
            return match result {
                Ok(message) => ToolOutput::silent(message),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        let (path, content, append) = (
            input.path.clone(),
            input.content.clone(),
            input.append == Some(true),
        );
        super::blocking(move || write_disk(&jail, &path, &content, append))
            .await
            .unwrap_or_else(|| ToolOutput::error(super::SHUTTING_DOWN))
    }
}

/// The disk half of `write_file`: blocking I/O (the read for an append, the write and its
/// `fsync`), run off the async threads.
fn write_disk(jail: &Jail, path: &str, content: &str, append: bool) -> ToolOutput {
    let located = or_error!(jail.locate(path));
    let mut data = Vec::new();
    if append {
        match open_existing(jail, path) {
            Ok((_, mut opened)) if !opened.is_dir() => {
                if opened.stat.st_size.max(0) as u64 > MAX_EDIT_BYTES {
                    return ToolOutput::error(format!(
                        "{} is larger than {} MiB; append to it with exec (>>) instead",
                        jail.display(&located).display(),
                        MAX_EDIT_BYTES >> 20
                    ));
                }
                match read_all(&mut opened) {
                    Ok(existing) => data = existing,
                    Err(e) => {
                        return ToolOutput::error(format!(
                            "cannot read {}: {e}",
                            jail.display(&located).display()
                        ));
                    }
                }
            }
            Ok(_) => {
                return ToolOutput::error(format!(
                    "{} is a directory",
                    jail.display(&located).display()
                ));
            }
            Err(talon_fs::FsError::NotFound { .. }) => {}
            Err(e) => return ToolOutput::error(e.to_string()),
        }
    }
    data.extend_from_slice(content.as_bytes());
    match jail.write(&located, &data, WriteMode::CreateParents) {
        Ok(report) => ToolOutput::silent(format!(
            "{} {} bytes to {}",
            if append {
                "Appended"
            } else if report.created {
                "Created file with"
            } else {
                "Wrote"
            },
            content.len(),
            report.real_abs.display()
        )),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

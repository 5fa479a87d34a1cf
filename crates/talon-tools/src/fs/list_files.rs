//! `list_files` (GoClaw dialect): a directory's entries, optionally recursive, capped. Denied
//! entries are not listed at all; the store's documents (context files, `memory/`) are listed
//! where the workspace shows them ([`super::files::View::list`]).

use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::EntryKind;

use super::files::View;
use super::workspace::FsConfig;

/// Default entry cap (GoClaw had none; a huge tree must not flood the context).
pub const DEFAULT_LIMIT: usize = 1000;
/// Default recursion depth when `recursive` is set.
pub const DEFAULT_DEPTH: usize = 3;

/// Input of [`ListFiles`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFilesInput {
    /// Directory to list, relative to the workspace or absolute inside it (default ".").
    #[serde(default)]
    pub path: Option<String>,
    /// Also list subdirectories' contents.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// How many directory levels to descend when recursive (default 3).
    #[serde(default)]
    pub depth: Option<usize>,
    /// Maximum entries to list (default 1000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The `list_files` tool.
#[derive(Debug, Clone)]
pub struct ListFiles {
    pub fs: Arc<FsConfig>,
}

struct Walk<'a> {
    view: &'a View,
    out: Vec<String>,
    limit: usize,
    omitted: usize,
}

impl Walk<'_> {
    fn dir(&mut self, rel: &Path, indent: usize, depth_left: usize) -> Result<(), String> {
        let entries = self
            .view
            .list(&rel.to_string_lossy())
            .map_err(|e| e.to_string())?;
        for entry in entries {
            if self.out.len() >= self.limit {
                self.omitted += 1;
                continue;
            }
            let pad = "  ".repeat(indent);
            match entry.kind {
                EntryKind::Dir => {
                    self.out.push(format!("{pad}[DIR]  {}/", entry.name));
                    if depth_left > 0 {
                        // A subdirectory that cannot be listed is reported in place, not fatal.
                        if let Err(e) = self.dir(&rel.join(&entry.name), indent + 1, depth_left - 1)
                        {
                            self.out.push(format!("{pad}  (cannot list: {e})"));
                        }
                    }
                }
                EntryKind::File => self
                    .out
                    .push(format!("{pad}[FILE] {} ({} bytes)", entry.name, entry.size)),
                EntryKind::Symlink => self.out.push(format!("{pad}[LINK] {}", entry.name)),
                EntryKind::Other => self.out.push(format!("{pad}[OTHER] {}", entry.name)),
            }
        }
        Ok(())
    }
}

impl Tool for ListFiles {
    type Input = ListFilesInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "list_files",
            "List a directory in the workspace (default: its root). Set recursive=true to include \
             subdirectories down to depth levels. Use glob to find files by name pattern.",
            SideEffect::None,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<ListFilesInput>) -> ToolOutput {
        let input = call.input();
        let path = input.path.clone().unwrap_or_else(|| ".".into());
        let view = or_error!(self.fs.files(call.ctx()).view(Some(&path)).await);
        let shown = or_error!(view.shown(&path));
        let depth = if input.recursive == Some(true) {
            input.depth.unwrap_or(DEFAULT_DEPTH)
        } else {
            0
        };
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        // Listing directories is blocking I/O: off the async threads.
        let listed = or_error!(
            super::blocking(move || {
                let mut walk = Walk {
                    view: &view,
                    out: Vec::new(),
                    limit,
                    omitted: 0,
                };
                walk.dir(Path::new(&path), 0, depth)
                    .map(|()| (walk.out, walk.omitted))
            })
            .await
            .ok_or(super::SHUTTING_DOWN)
        );
        let (out, omitted) = match listed {
            Ok(listed) => listed,
            Err(e) => return ToolOutput::error(e),
        };
        if out.is_empty() {
            return ToolOutput::silent(format!("{} is empty", shown.display()));
        }
        let mut text = out.join("\n");
        if omitted > 0 {
            text.push_str(&format!(
                "\n... {omitted} more entries not shown (limit={limit}); list a subdirectory or raise limit"
            ));
        }
        ToolOutput::silent(text)
    }
}

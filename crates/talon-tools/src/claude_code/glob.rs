//! `Glob` (Claude Code dialect): absolute paths by modification time, at most 100.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::fs::find::WalkOptions;
use crate::fs::workspace::FsConfig;

/// Claude Code's cap.
pub const LIMIT: usize = 100;
pub const TRUNCATED: &str =
    "(Results are truncated. Consider using a more specific path or pattern.)";

/// Input of [`GlobTool`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// The glob pattern to match files against.
    pub pattern: String,
    /// The directory to search in. If not specified, the current working directory will be used. Omit this field to use the default directory; do not enter "undefined" or "null".
    #[serde(default)]
    pub path: Option<String>,
}

/// The `Glob` tool.
#[derive(Debug, Clone)]
pub struct GlobTool {
    pub fs: Arc<FsConfig>,
}

impl Tool for GlobTool {
    type Input = GlobInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Glob",
            "Fast file pattern matching that works with any codebase size. Supports glob patterns like \
             \"**/*.js\" or \"src/**/*.ts\". Returns matching file paths sorted by modification time.",
            SideEffect::None,
        )
        .same_as("glob")
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<GlobInput>) -> ToolOutput {
        let input = call.input();
        let path = input
            .path
            .as_deref()
            .filter(|p| !p.is_empty() && *p != "undefined" && *p != "null");
        let view = or_error!(self.fs.files(call.ctx()).view(path).await);
        let shown = path.unwrap_or(".");
        let base = match view.target(shown) {
            Ok(target) if target.is_dir => target.abs,
            Ok(_) => return ToolOutput::error(format!("Path is not a directory: {shown}")),
            Err(talon_fs::FsError::NotFound { .. }) => {
                return ToolOutput::error(format!("Directory does not exist: {shown}"));
            }
            Err(e) => return ToolOutput::error(super::fs_message(&e, view.root())),
        };
        let options = WalkOptions {
            base,
            hidden: true,
            gitignore: false,
            skip_vcs: false,
            globs: vec![input.pattern.clone()],
            need_mtime: true,
            types: Vec::new(),
        };
        // Walking the tree is blocking I/O: off the async threads, the view with it.
        let found = or_error!(
            crate::fs::blocking(move || view.find(&options))
                .await
                .ok_or(crate::fs::SHUTTING_DOWN)
        );
        let mut found = or_error!(found);
        if found.is_empty() {
            return ToolOutput::text("No files found");
        }
        // rg --sort=modified: oldest first, ties by path.
        found.sort_by(|a, b| a.mtime.cmp(&b.mtime).then_with(|| a.path.cmp(&b.path)));
        let truncated = found.len() > LIMIT;
        let mut lines: Vec<String> = found
            .iter()
            .take(LIMIT)
            .map(|f| f.path.display().to_string())
            .collect();
        if truncated {
            lines.push(TRUNCATED.to_string());
        }
        ToolOutput::text(lines.join("\n"))
    }
}

//! `glob` (GoClaw dialect; GoClaw documented but never built it): files by name pattern.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::find::{WalkOptions, relative_to};
use super::workspace::FsConfig;

/// Paths listed by default before the output says how many more there are.
pub const DEFAULT_LIMIT: usize = 1000;

/// Input of [`GlobTool`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// Glob pattern, e.g. "**/*.rs" or "src/**/*.{ts,tsx}". A pattern without "/" matches file names at any depth.
    pub pattern: String,
    /// Directory to search (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
    /// Maximum paths to list (default 1000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The `glob` tool.
#[derive(Debug, Clone)]
pub struct GlobTool {
    pub fs: Arc<FsConfig>,
}

impl Tool for GlobTool {
    type Input = GlobInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "glob",
            "Find files by glob pattern (supports ** and {a,b}). Returns workspace-relative paths, sorted. \
             Hidden files are included; version-control directories are skipped.",
            SideEffect::None,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<GlobInput>) -> ToolOutput {
        let input = call.input();
        let view = or_error!(self.fs.files(call.ctx()).view(input.path.as_deref()).await);
        let target = or_error!(view.target(input.path.as_deref().unwrap_or(".")));
        if !target.is_dir {
            return ToolOutput::error(format!("{} is not a directory", target.abs.display()));
        }
        let options = WalkOptions {
            base: target.abs,
            hidden: true,
            gitignore: false,
            skip_vcs: true,
            globs: vec![input.pattern.clone()],
            need_mtime: false,
            types: Vec::new(),
        };
        // Walking the tree is blocking I/O: off the async threads, the view with it.
        let (view, found) = or_error!(
            view.find_off_thread(options)
                .await
                .ok_or(super::SHUTTING_DOWN)
        );
        let mut found = or_error!(found);
        if found.is_empty() {
            return ToolOutput::silent(format!("No files match {:?}", input.pattern));
        }
        super::find::sort_by_path(&mut found);
        let total = found.len();
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        let mut text: Vec<String> = found
            .iter()
            .take(limit)
            .map(|f| relative_to(&f.path, view.root()).display().to_string())
            .collect();
        if total > limit {
            text.push(format!(
                "... {} more files not shown; use a more specific pattern or path",
                total - limit
            ));
        }
        ToolOutput::silent(text.join("\n"))
    }
}

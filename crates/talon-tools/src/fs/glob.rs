//! `glob` (GoClaw dialect; GoClaw documented but never built it): files by name pattern.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::find::{WalkOptions, base_dir, find_files, relative_to};
use super::workspace::FsConfig;

/// Paths listed before the output says how many more there are.
pub const LIMIT: usize = 1000;

/// Input of [`GlobTool`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// Glob pattern, e.g. "**/*.rs" or "src/**/*.{ts,tsx}". A pattern without "/" matches file names at any depth.
    pub pattern: String,
    /// Directory to search (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
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
        let jail = match self.fs.jail(call.ctx()) {
            Ok(j) => j,
            Err(e) => return ToolOutput::error(e),
        };
        let (base, is_dir) = match base_dir(&jail, input.path.as_deref()) {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        if !is_dir {
            return ToolOutput::error(format!("{} is not a directory", base.display()));
        }
        let options = WalkOptions {
            base,
            hidden: true,
            gitignore: false,
            skip_vcs: true,
            globs: vec![input.pattern.clone()],
            types: Vec::new(),
        };
        let mut found = match find_files(&jail, &options) {
            Ok(f) => f,
            Err(e) => return ToolOutput::error(e),
        };
        if found.is_empty() {
            return ToolOutput::silent(format!("No files match {:?}", input.pattern));
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let total = found.len();
        let mut text: Vec<String> = found
            .iter()
            .take(LIMIT)
            .map(|f| relative_to(&f.path, jail.root()).display().to_string())
            .collect();
        if total > LIMIT {
            text.push(format!(
                "... {} more files not shown; use a more specific pattern or path",
                total - LIMIT
            ));
        }
        ToolOutput::silent(text.join("\n"))
    }
}

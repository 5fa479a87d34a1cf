//! `search` (GoClaw dialect; GoClaw documented but never built it): regex search over file
//! contents.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::find::{GrepOptions, GrepReport, WalkOptions, relative_to, split_globs};
use super::workspace::FsConfig;

/// Default cap on output lines (content) or files.
pub const DEFAULT_LIMIT: usize = 100;

/// Output modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines as path:line: text (default).
    #[default]
    Content,
    /// Only the paths of files with a match.
    FilesWithMatches,
    /// Match counts per file.
    Count,
}

/// Input of [`Search`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Regular expression (Rust/ripgrep syntax) to search for.
    pub pattern: String,
    /// File or directory to search (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. "*.rs" or "src/**/*.ts".
    #[serde(default)]
    pub glob: Option<String>,
    /// Only search files of this type, e.g. "rust", "py", "js".
    #[serde(rename = "type", default)]
    pub file_type: Option<String>,
    /// Case-insensitive matching.
    #[serde(default)]
    pub ignore_case: Option<bool>,
    /// Lines of context before and after each match.
    #[serde(default)]
    pub context: Option<usize>,
    /// content (default), files_with_matches or count.
    #[serde(default)]
    pub output_mode: Option<OutputMode>,
    /// Maximum lines (content) or files (other modes) to return (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The `search` tool.
#[derive(Debug, Clone)]
pub struct Search {
    pub fs: Arc<FsConfig>,
}

impl Tool for Search {
    type Input = SearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "search",
            "Search file contents in the workspace with a regular expression (ripgrep syntax). Respects \
             .gitignore, skips binary files. Narrow with glob or type; output_mode content (default) shows \
             path:line: text, files_with_matches lists files, count counts matches per file.",
            SideEffect::None,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<SearchInput>) -> ToolOutput {
        let input = call.input();
        let view = or_error!(self.fs.files(call.ctx()).view(input.path.as_deref()).await);
        let target = or_error!(view.target(input.path.as_deref().unwrap_or(".")));
        let mode = input.output_mode.unwrap_or_default();
        // Walking and reading files is blocking I/O: off the async threads, the view with it.
        let (view, files) = if target.is_dir {
            let options = WalkOptions {
                base: target.abs.clone(),
                hidden: false,
                gitignore: true,
                skip_vcs: true,
                globs: input.glob.as_deref().map(split_globs).unwrap_or_default(),
                need_mtime: false,
                types: input.file_type.iter().cloned().collect(),
            };
            let (view, found) = or_error!(
                view.find_off_thread(options)
                    .await
                    .ok_or(super::SHUTTING_DOWN)
            );
            (view, or_error!(found))
        } else {
            let files = vec![target.as_found()];
            (view, files)
        };
        let context = input.context.unwrap_or(0);
        let options = GrepOptions {
            pattern: input.pattern.clone(),
            case_insensitive: input.ignore_case == Some(true),
            multiline: false,
            before: if mode == OutputMode::Content {
                context
            } else {
                0
            },
            after: if mode == OutputMode::Content {
                context
            } else {
                0
            },
            first_match_only: mode == OutputMode::FilesWithMatches,
            max_columns: 500,
        };
        let (view, report) = or_error!(
            super::blocking(move || {
                let report = view.grep(files, &options);
                (view, report)
            })
            .await
            .ok_or(super::SHUTTING_DOWN)
        );
        let GrepReport {
            matches: mut results,
            skipped,
        } = or_error!(report);
        if results.is_empty() {
            return skipped.annotate(ToolOutput::silent(format!(
                "No matches for {:?}",
                input.pattern
            )));
        }
        results.sort_by(|a, b| a.path.cmp(&b.path));
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        let mut out: Vec<String> = Vec::new();
        let mut omitted = 0usize;
        for file in &results {
            let rel = relative_to(&file.path, view.root()).display().to_string();
            match mode {
                OutputMode::FilesWithMatches => out.push(rel),
                OutputMode::Count => out.push(format!("{rel}:{}", file.matched_lines)),
                OutputMode::Content => {
                    for line in &file.lines {
                        let sep = if line.context { '-' } else { ':' };
                        out.push(format!("{rel}{sep}{}{sep} {}", line.number, line.text));
                    }
                }
            }
        }
        if out.len() > limit {
            omitted = out.len() - limit;
            out.truncate(limit);
        }
        let mut text = out.join("\n");
        if omitted > 0 {
            text.push_str(&format!("\n... {omitted} more results not shown (limit={limit}); narrow the pattern, path or glob"));
        }
        skipped.annotate(ToolOutput::silent(text))
    }
}

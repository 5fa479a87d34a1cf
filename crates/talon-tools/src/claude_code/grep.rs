//! `Grep` (Claude Code dialect): ripgrep semantics and Claude Code's parameters (`-A -B -C -i
//! -n`, `head_limit`, `offset`, `multiline`) and output formats.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::fs::find::{GrepOptions, GrepReport, WalkOptions, split_globs};
use crate::fs::workspace::FsConfig;

/// Claude Code's default `head_limit`.
pub const DEFAULT_HEAD_LIMIT: usize = 250;
/// Claude Code's result cap in characters.
pub const MAX_RESULT_CHARS: usize = 20_000;

/// Output modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    Content,
    #[default]
    FilesWithMatches,
    Count,
}

/// Input of [`GrepTool`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// The regular expression pattern to search for in file contents.
    pub pattern: String,
    /// File or directory to search in. Defaults to the current working directory.
    #[serde(default)]
    pub path: Option<String>,
    /// Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}").
    #[serde(default)]
    pub glob: Option<String>,
    /// "content" shows matching lines, "files_with_matches" shows file paths (default), "count" shows match counts.
    #[serde(default)]
    pub output_mode: Option<OutputMode>,
    /// Number of lines to show before each match (content mode).
    #[serde(rename = "-B", default)]
    pub before: Option<usize>,
    /// Number of lines to show after each match (content mode).
    #[serde(rename = "-A", default)]
    pub after: Option<usize>,
    /// Number of lines to show before and after each match (content mode).
    #[serde(rename = "-C", default)]
    pub context_short: Option<usize>,
    /// Alias for -C.
    #[serde(default)]
    pub context: Option<usize>,
    /// Show line numbers in output (content mode). Defaults to true.
    #[serde(rename = "-n", default)]
    pub line_numbers: Option<bool>,
    /// Case insensitive search.
    #[serde(rename = "-i", default)]
    pub case_insensitive: Option<bool>,
    /// File type to search (rg --type), e.g. js, py, rust, go.
    #[serde(rename = "type", default)]
    pub file_type: Option<String>,
    /// Limit output to the first N lines/entries. Defaults to 250; pass 0 for unlimited.
    #[serde(default)]
    pub head_limit: Option<usize>,
    /// Skip the first N lines/entries before applying head_limit.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Enable multiline mode where . matches newlines and patterns can span lines.
    #[serde(default)]
    pub multiline: Option<bool>,
}

/// The `Grep` tool.
#[derive(Debug, Clone)]
pub struct GrepTool {
    pub fs: Arc<FsConfig>,
}

fn cap(mut text: String) -> String {
    if text.len() > MAX_RESULT_CHARS {
        let mut cut = MAX_RESULT_CHARS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let cut = text[..cut].rfind('\n').unwrap_or(cut);
        let rest = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("\n[Output truncated: {rest} more characters. Narrow the search with path, glob or head_limit.]"));
    }
    text
}

impl Tool for GrepTool {
    type Input = GrepInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Grep",
            "A powerful search tool built on ripgrep. Supports full regex syntax (e.g. \"log.*Error\"). Filter \
             files with glob or type. Output modes: \"content\" shows matching lines, \"files_with_matches\" \
             shows only file paths (default), \"count\" shows match counts. Use multiline for patterns that \
             span lines.",
            SideEffect::None,
        )
        .same_as("search")
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<GrepInput>) -> ToolOutput {
        let input = call.input();
        let view = or_error!(self.fs.files(call.ctx()).view(input.path.as_deref()).await);
        let shown = input.path.as_deref().unwrap_or(".");
        let target = match view.target(shown) {
            Ok(t) => t,
            Err(e) => return ToolOutput::error(super::fs_message(&e, view.root())),
        };
        let mode = input.output_mode.unwrap_or_default();
        // Walking and reading files is blocking I/O: off the async threads, the view with it.
        let (view, files) = if target.is_dir {
            let options = WalkOptions {
                base: target.abs.clone(),
                hidden: true,
                gitignore: true,
                skip_vcs: true,
                globs: input.glob.as_deref().map(split_globs).unwrap_or_default(),
                need_mtime: false,
                types: input.file_type.iter().cloned().collect(),
            };
            let (view, found) = or_error!(
                view.find_off_thread(options)
                    .await
                    .ok_or(crate::fs::SHUTTING_DOWN)
            );
            (view, or_error!(found))
        } else {
            let files = vec![target.as_found()];
            (view, files)
        };
        // -C (or context) wins over -A/-B, as in Claude Code.
        let around = input.context_short.or(input.context);
        let content = mode == OutputMode::Content;
        let options = GrepOptions {
            pattern: input.pattern.clone(),
            case_insensitive: input.case_insensitive == Some(true),
            multiline: input.multiline == Some(true),
            before: if content {
                around.or(input.before).unwrap_or(0)
            } else {
                0
            },
            after: if content {
                around.or(input.after).unwrap_or(0)
            } else {
                0
            },
            first_match_only: mode == OutputMode::FilesWithMatches,
            max_columns: 500,
        };
        let report = or_error!(
            crate::fs::blocking(move || view.grep(files, &options))
                .await
                .ok_or(crate::fs::SHUTTING_DOWN)
        );
        let GrepReport {
            matches: mut results,
            skipped,
        } = or_error!(report);
        let offset = input.offset.unwrap_or(0);
        let limit = match input.head_limit {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => DEFAULT_HEAD_LIMIT,
        };
        let paginated = input.head_limit.is_some() || input.offset.is_some();
        let page = |items: Vec<String>| -> (Vec<String>, bool) {
            let total = items.len();
            let page: Vec<String> = items.into_iter().skip(offset).take(limit).collect();
            let cut = offset > 0 || offset.saturating_add(page.len()) < total;
            (page, cut)
        };
        let text = match mode {
            OutputMode::FilesWithMatches => {
                if results.is_empty() {
                    return skipped.annotate(ToolOutput::text("No files found"));
                }
                // Newest first, ties by path; only matched files on disk are stat'ed (the
                // store's documents have no disk file to ask).
                for r in results.iter_mut().filter(|r| !r.routed) {
                    r.mtime = crate::fs::find::mtime_of(&r.path);
                }
                results.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
                let (paths, _) = page(
                    results
                        .iter()
                        .map(|r| r.path.display().to_string())
                        .collect(),
                );
                format!(
                    "Found {} file{}\n{}",
                    paths.len(),
                    if paths.len() == 1 { "" } else { "s" },
                    paths.join("\n")
                )
            }
            OutputMode::Content => {
                if results.is_empty() {
                    return skipped.annotate(ToolOutput::text("No matches found"));
                }
                results.sort_by(|a, b| a.path.cmp(&b.path));
                let numbers = input.line_numbers != Some(false);
                let mut lines = Vec::new();
                for file in &results {
                    let path = file.path.display();
                    for line in &file.lines {
                        let sep = if line.context { '-' } else { ':' };
                        if numbers {
                            lines.push(format!("{path}{sep}{}{sep}{}", line.number, line.text));
                        } else {
                            lines.push(format!("{path}{sep}{}", line.text));
                        }
                    }
                }
                let (lines, cut) = page(lines);
                let mut text = lines.join("\n");
                if paginated && cut {
                    text.push_str(&format!(
                        "\n\n[Showing results with pagination = limit: {limit}, offset: {offset}]"
                    ));
                }
                text
            }
            OutputMode::Count => {
                if results.is_empty() {
                    return skipped.annotate(ToolOutput::text("No matches found"));
                }
                results.sort_by(|a, b| a.path.cmp(&b.path));
                let total: u64 = results.iter().map(|r| r.matched_lines).sum();
                let files = results.len();
                let (lines, _) = page(
                    results
                        .iter()
                        .map(|r| format!("{}:{}", r.path.display(), r.matched_lines))
                        .collect(),
                );
                format!(
                    "{}\n\nFound {total} total occurrence{} across {files} file{}.",
                    lines.join("\n"),
                    if total == 1 { "" } else { "s" },
                    if files == 1 { "" } else { "s" }
                )
            }
        };
        skipped.annotate(ToolOutput::text(cap(text)))
    }
}

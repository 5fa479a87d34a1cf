//! The Claude Code dialect: Claude Code's tool names, parameters, limits and messages (models are
//! trained on them), over the same implementations as the GoClaw dialect.

pub mod ask_user_question;
pub mod bash;
pub mod config;
pub mod edit;
pub mod exit_plan_mode;
pub mod glob;
pub mod grep;
pub mod notebook_edit;
pub mod read;
pub mod task_output;
pub mod task_stop;
pub mod todo_write;
pub mod web_fetch;
pub mod web_search;
pub mod write;

use talon_fs::FsError;

/// Claude Code's message for a path under a deny prefix.
pub const DENIED: &str = "File is in a directory that is denied by your permission settings.";

/// Claude Code's wording for common file errors; other errors keep Talon's message.
pub fn fs_message(e: &FsError, root: &std::path::Path) -> String {
    match e {
        FsError::NotFound { .. } => format!(
            "File does not exist. Current working directory: {}",
            root.display()
        ),
        FsError::Denied { .. } => DENIED.to_string(),
        other => other.to_string(),
    }
}

/// `cat -n` style snippet of `text` around 1-based `line` (4 lines either side).
pub fn snippet(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let first = line.saturating_sub(4).max(1);
    let last = (line + 4).min(lines.len());
    let mut out = String::new();
    for n in first..=last {
        crate::fs::text::numbered(n, lines.get(n - 1).copied().unwrap_or_default(), &mut out);
    }
    out
}

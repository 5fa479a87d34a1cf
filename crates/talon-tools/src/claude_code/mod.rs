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
pub mod skill;
pub mod task_output;
pub mod task_stop;
pub mod todo_write;
pub mod web_fetch;
pub mod web_search;
pub mod write;

use std::sync::Arc;

use talon_core::ToolOutput;
use talon_fs::{FsError, Jail};

use crate::fs::read_state::Freshness;

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

/// Runs `disk`, the blocking half of a file tool, off the async threads (see
/// [`crate::fs::blocking`]) with owned copies of the tool, the session key and the input.
pub(crate) async fn off_thread<T, I>(
    tool: &T,
    jail: Arc<Jail>,
    session: &str,
    input: &I,
    disk: fn(&T, &Jail, &str, &I) -> ToolOutput,
) -> ToolOutput
where
    T: Clone + Send + 'static,
    I: Clone + Send + 'static,
{
    let (tool, input, session) = (tool.clone(), input.clone(), session.to_owned());
    crate::fs::blocking(move || disk(&tool, &jail, &session, &input))
        .await
        .unwrap_or_else(|| ToolOutput::error(crate::fs::SHUTTING_DOWN))
}

/// Claude Code's refusal to change a file the session has not read, or that changed since.
pub(crate) fn stale(freshness: Freshness) -> Option<ToolOutput> {
    match freshness {
        Freshness::NotRead => Some(ToolOutput::error(write::NOT_READ)),
        Freshness::Modified => Some(ToolOutput::error(write::MODIFIED)),
        Freshness::Fresh => None,
    }
}

//! `memory_get`: a memory document, or a range of its lines.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

/// Input of [`MemoryGet`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGetInput {
    /// Document path, e.g. "MEMORY.md" or "memory/2026-11-22.md".
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default)]
    pub start_line: Option<usize>,
    /// Number of lines to return (default: to the end).
    #[serde(default)]
    pub lines: Option<usize>,
}

/// The `memory_get` tool.
#[derive(Debug, Clone)]
pub struct MemoryGet {
    pub store: Store,
}

impl Tool for MemoryGet {
    type Input = MemoryGetInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_get",
            "Read a memory document (MEMORY.md or memory/*.md), optionally a range of lines. Use \
             memory_search first to find where something is remembered.",
            SideEffect::ReadOnly,
        )
        .in_group("memory")
    }

    async fn execute(&self, call: Authorized<MemoryGetInput>) -> ToolOutput {
        let input = call.input();
        let (agent, user) = super::scope(call.ctx());
        let doc = match self.store.memory(&agent, &user, &input.path).await {
            Ok(Some(doc)) => doc,
            Ok(None) => {
                let known = self
                    .store
                    .memory_paths(&agent, &user)
                    .await
                    .unwrap_or_default();
                return ToolOutput::error(format!(
                    "memory document {:?} does not exist. Existing documents: {}",
                    input.path,
                    if known.is_empty() {
                        "(none)".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            Err(e) => return ToolOutput::error(format!("memory is unavailable: {e}")),
        };
        let lines: Vec<&str> = doc.content.lines().collect();
        let start = input.start_line.unwrap_or(1).max(1);
        if start > lines.len().max(1) {
            return ToolOutput::error(format!(
                "start_line {start} is past the end of {}: it has {} lines",
                input.path,
                lines.len()
            ));
        }
        let count = input.lines.unwrap_or(usize::MAX);
        let mut out = String::new();
        for (i, line) in lines.iter().enumerate().skip(start - 1).take(count) {
            crate::fs::text::numbered(i + 1, line, &mut out);
        }
        if out.is_empty() {
            out = format!("({} is empty)", input.path);
        }
        ToolOutput::text(out)
    }
}

//! `memory_search`: full-text search over memory documents, best matches first.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{Store, StoreError};

/// Default and maximum number of hits.
pub const DEFAULT_LIMIT: i64 = 5;
pub const MAX_LIMIT: i64 = 50;

/// Input of [`MemorySearch`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchInput {
    /// A few distinctive words to look for (at most 32 different words, 1024 bytes).
    pub query: String,
    /// Maximum results (default 5, at most 50).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// The `memory_search` tool.
#[derive(Debug, Clone)]
pub struct MemorySearch {
    pub store: Store,
}

impl Tool for MemorySearch {
    type Input = MemorySearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_search",
            "Search your memory documents (MEMORY.md, memory/*.md) by words. Returns the best matching \
             passages with their paths and line ranges; read more with memory_get.",
            SideEffect::ReadOnly,
        )
        .in_group("memory")
    }

    async fn execute(&self, call: Authorized<MemorySearchInput>) -> ToolOutput {
        let input = call.input();
        if input.query.trim().is_empty() {
            return ToolOutput::error("query is empty: give the words to look for");
        }
        let (agent, user) = super::scope(call.ctx());
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        match self
            .store
            .search_memory(&agent, &user, &input.query, limit)
            .await
        {
            Ok(hits) if hits.is_empty() => {
                ToolOutput::text(format!("No memory matches {:?}.", input.query))
            }
            Ok(hits) => ToolOutput::text(
                hits.iter()
                    .map(|h| {
                        format!(
                            "{}:{}-{} (score {:.2})\n{}",
                            h.path, h.start_line, h.end_line, h.score, h.content
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
            // The store bounds the query and the search's time; its message says how to fix it.
            Err(e @ (StoreError::Invalid { .. } | StoreError::TimedOut { .. })) => {
                ToolOutput::error(e.to_string())
            }
            Err(e) => ToolOutput::error(format!("memory is unavailable: {e}")),
        }
    }
}

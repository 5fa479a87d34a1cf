//! `memory_search`: hybrid search over memory documents (words and meaning, see
//! [`super::hybrid`]), best matches first, each with its score and the matched chunk.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{Store, StoreError};

use super::hybrid::{Found, Mode};

/// Default and maximum number of hits.
pub const DEFAULT_LIMIT: i64 = 5;
pub const MAX_LIMIT: i64 = 50;

/// Input of [`MemorySearch`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchInput {
    /// What to look for, in the words of the memory or your own: a question or a few words
    /// (at most 32 different words, 1024 bytes).
    pub query: String,
    /// Maximum results (default 5, at most 50).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// The `memory_search` tool.
#[derive(Debug, Clone)]
pub struct MemorySearch {
    pub store: Store,
    /// The embedding model; `None`: full-text search only.
    pub embedder: Option<Arc<dyn talon_embed::Embedder>>,
}

impl Tool for MemorySearch {
    type Input = MemorySearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_search",
            "Search your memory documents (MEMORY.md, memory/*.md) by words and by meaning. Returns \
             the best matching passages with their paths, line ranges and scores; read more with \
             memory_get.",
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
        let limit = usize::try_from(limit).unwrap_or(5);
        match super::hybrid::search(
            &self.store,
            self.embedder.as_deref(),
            &agent,
            &user,
            &input.query,
            limit,
        )
        .await
        {
            Ok((found, mode)) => ToolOutput::text(render(&input.query, &found, &mode)),
            // The store bounds the query and the search's time; its message says how to fix it.
            Err(e @ (StoreError::Invalid { .. } | StoreError::TimedOut { .. })) => {
                ToolOutput::error(e.to_string())
            }
            Err(e) => ToolOutput::error(format!("memory is unavailable: {e}")),
        }
    }
}

/// A score with four significant figures (full-text scores of a small memory are tiny).
fn score(value: f64) -> String {
    if value == 0.0 || value.abs() >= 0.001 {
        format!("{value:.4}")
    } else {
        format!("{value:.3e}")
    }
}

/// The result as the model reads it: how it was ranked, then each hit with its evidence.
fn render(query: &str, found: &[Found], mode: &Mode) -> String {
    let how = match mode {
        Mode::Hybrid { model } => format!(
            "Hybrid search (words and meaning, embedding model {model}; scores fuse both ranks)"
        ),
        Mode::FullText { why } => {
            format!(
                "Full-text search only ({why}): only passages sharing words with the query are found"
            )
        }
    };
    if found.is_empty() {
        return format!("{how}.\nNo memory matches {query:?}.");
    }
    let hits: Vec<String> = found
        .iter()
        .map(|f| {
            let mut why = Vec::new();
            if let Some(rank) = f.words_rank {
                why.push(format!("words #{rank}"));
            }
            if let Some(similarity) = f.similarity {
                why.push(format!("meaning {similarity:.2}"));
            }
            let whose = if f.hit.user.is_empty() { "" } else { ", yours" };
            format!(
                "{}:{}-{} (score {}: {}{whose})\n{}",
                f.hit.path,
                f.hit.start_line,
                f.hit.end_line,
                score(f.score),
                why.join(", "),
                f.hit.content
            )
        })
        .collect();
    format!("{how}:\n\n{}", hits.join("\n\n"))
}

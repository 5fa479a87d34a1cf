//! `knowledge_graph_search`: GoClaw's search over the knowledge graph extracted from memory
//! documents. Entities whose name or alias contains the query, then what they relate to up to
//! `depth` hops away (optionally along one relation only); each entity and relation cites the
//! documents it came from (read them with memory_get).

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{MAX_HOPS, Store};

/// Input of [`KnowledgeGraphSearch`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeGraphSearchInput {
    /// A name (or part of one) of a person, project, organisation, place or thing.
    pub query: String,
    /// Follow only this relation (e.g. "works_on").
    #[serde(default)]
    pub relation: Option<String>,
    /// How many hops of relations to follow (0-3, default 1).
    #[serde(default)]
    pub depth: Option<usize>,
    /// At most this many entities (default 20, at most 100).
    #[serde(default, rename = "maxResults", alias = "limit")]
    pub max_results: Option<usize>,
}

/// The `knowledge_graph_search` tool.
#[derive(Debug, Clone)]
pub struct KnowledgeGraphSearch {
    pub store: Store,
}

impl Tool for KnowledgeGraphSearch {
    type Input = KnowledgeGraphSearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "knowledge_graph_search",
            "Search the knowledge graph built from your memory documents: entities (people, \
             projects, organisations, …) by name or alias, and what they relate to, up to depth \
             hops away. Each result cites the memory documents it came from.",
            SideEffect::ReadOnly,
        )
        .in_group("knowledge")
    }

    async fn execute(&self, call: Authorized<KnowledgeGraphSearchInput>) -> ToolOutput {
        let input = call.input();
        let query = input.query.trim();
        if query.is_empty() || query.chars().count() > 200 {
            return ToolOutput::error("query must be a name or part of one (1-200 characters)");
        }
        let depth = input.depth.unwrap_or(1);
        if depth > MAX_HOPS {
            return ToolOutput::error(format!("depth is at most {MAX_HOPS}"));
        }
        let limit = input.max_results.unwrap_or(20).clamp(1, 100);
        let (agent, user) = crate::memory::scope(call.ctx());
        let hits = match self
            .store
            .search_graph(
                &agent,
                &user,
                query,
                input.relation.as_deref(),
                depth,
                limit,
            )
            .await
        {
            Ok(hits) => hits,
            Err(e) => return ToolOutput::error(format!("the knowledge graph is unavailable: {e}")),
        };
        if hits.entities.is_empty() {
            return ToolOutput::text(format!(
                "No entity in the knowledge graph matches {query:?}. memory_search looks through the documents themselves."
            ));
        }
        let mut out = String::new();
        for e in &hits.entities {
            let kind = if e.kind.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.kind)
            };
            let hops = match e.hops {
                0 => String::new(),
                1 => ", 1 hop away".into(),
                n => format!(", {n} hops away"),
            };
            out.push_str(&format!("- {}{kind}{hops}", e.name));
            if !e.aliases.is_empty() {
                out.push_str(&format!(" [also: {}]", e.aliases.join(", ")));
            }
            if !e.description.is_empty() {
                out.push_str(&format!(": {}", e.description));
            }
            out.push_str(&format!(" (from {})\n", e.documents.join(", ")));
        }
        if !hits.relations.is_empty() {
            out.push_str("\nRelations:\n");
            for r in &hits.relations {
                out.push_str(&format!(
                    "- {} {} {} (from {})\n",
                    r.source,
                    r.relation,
                    r.target,
                    r.documents.join(", ")
                ));
            }
        }
        ToolOutput::text(out.trim_end().to_string())
    }
}

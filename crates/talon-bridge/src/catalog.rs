//! Every bridged tool, and which of them are registered: all of them while there are few, only
//! the activated ones above the search threshold ("search mode", as GoClaw does above 40).
//!
//! In search mode the model finds tools with `mcp_tool_search` (BM25, [`talon_embed::bm25`], over names and
//! descriptions, fused with their meaning when an embedding model is configured); the tools it finds are activated, so they are offered from the next turn on,
//! and a call by name activates a tool too (the pipeline's deferred activator). Activation is
//! per bridge (per process), and survives re-listing and reconnection. The search finds only
//! tools the caller may call (the grants check of a call, `access::Permits`): a grant-only
//! server's names, descriptions and schemas are not shown to a caller without a grant.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use talon_core::{Authorized, Registry, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::access::{Access, Permits};
use crate::tool::Bridged;

/// GoClaw's `mcpToolInlineMaxCount`: above this many bridged tools, search mode.
pub const DEFAULT_SEARCH_THRESHOLD: usize = 40;
/// The search tool's name.
pub const SEARCH_TOOL: &str = "mcp_tool_search";

/// The bridged tools of every server, and what is registered.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    /// Per server, its tools under their bridged names.
    pub tools: BTreeMap<String, Vec<Bridged>>,
    /// Names activated in search mode.
    pub activated: BTreeSet<String>,
    /// Per server, the names registered now.
    pub registered: BTreeMap<String, Vec<String>>,
    /// Whether the search tool is registered.
    pub searching: bool,
}

impl Catalog {
    fn total(&self) -> usize {
        self.tools.values().map(Vec::len).sum()
    }

    /// Makes the registry match the catalog: `changed` is the server whose tools were just
    /// re-listed (or removed), so its tools are replaced; the others only gain or lose tools
    /// as search mode starts or ends. Returns the tools that could not be registered.
    pub fn apply(
        &mut self,
        registry: &Registry,
        threshold: usize,
        changed: Option<&str>,
        search_tool: impl FnOnce() -> SearchTool,
    ) -> Vec<String> {
        let search = self.total() > threshold;
        let mut failures = Vec::new();
        if let Some(server) = changed {
            for old in self.registered.remove(server).unwrap_or_default() {
                registry.unregister(&old);
            }
        }
        for (server, tools) in &self.tools {
            let registered = self.registered.entry(server.clone()).or_default();
            let wanted: Vec<&Bridged> = tools
                .iter()
                .filter(|t| !search || self.activated.contains(&t.name))
                .collect();
            registered.retain(|name| {
                let keep = wanted.iter().any(|t| &t.name == name);
                if !keep {
                    registry.unregister(name);
                }
                keep
            });
            for tool in wanted {
                if registered.contains(&tool.name) {
                    continue;
                }
                match registry.register(tool.clone()) {
                    Ok(()) => registered.push(tool.name.clone()),
                    Err(e) => {
                        failures.push(format!("MCP server {server:?}: tool {}: {e}", tool.name))
                    }
                }
            }
            registry.register_group(&format!("mcp:{server}"), registered.clone());
        }
        self.registered
            .retain(|server, _| self.tools.contains_key(server));
        registry.register_group("mcp", self.registered.values().flatten().cloned());
        if search != self.searching {
            if search {
                let _ = registry.register(search_tool());
            } else {
                registry.unregister(SEARCH_TOOL);
            }
            self.searching = search;
        }
        failures
    }
}

/// Input of `mcp_tool_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// What the tool should do, in a few words (for example "create a github issue").
    pub query: String,
    /// How many tools to return (1-20, default 5).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Activates a found tool: registers it and rebuilds the groups.
pub type Activate = Arc<dyn Fn(&[String]) + Send + Sync>;

/// `mcp_tool_search`.
#[derive(Clone)]
pub struct SearchTool {
    pub(crate) catalog: Weak<Mutex<Catalog>>,
    pub(crate) activate: Activate,
    /// The bridge's grants: a caller finds only the tools it may call (`access::Permits`).
    pub(crate) access: Option<Arc<dyn Access>>,
    /// Ranks by meaning too; `None`: by words only.
    pub(crate) embedder: Option<talon_embed::CachedEmbedder>,
}

impl std::fmt::Debug for SearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SearchTool")
    }
}

impl Tool for SearchTool {
    type Input = SearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            SEARCH_TOOL,
            "Finds tools of the connected MCP servers that are not listed yet (there are too many \
             to list them all). Describe what you need; the tools found are returned with their \
             parameters and can be called at once by name.",
            SideEffect::ReadOnly,
        )
        .in_group("mcp")
        .with_untrusted_output()
        .reaching_mcp_servers()
    }

    async fn execute(&self, call: Authorized<SearchInput>) -> ToolOutput {
        let input = call.input();
        let limit = input.limit.unwrap_or(5).clamp(1, 20);
        let Some(catalog) = self.catalog.upgrade() else {
            return ToolOutput::error("the MCP bridge has shut down");
        };
        let all: Vec<Bridged> = catalog
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tools
            .values()
            .flatten()
            .cloned()
            .collect();
        // Tools the caller may not call are not found either: not their names, descriptions
        // or schemas. That is a grant (Permits) and the policy for their server.
        let reachable = all
            .iter()
            .filter(|t| call.mcp_server_allowed(t.link.name()))
            .collect();
        let visible = Permits::new(self.access.clone(), call.ctx())
            .visible(reachable)
            .await;
        let documents: Vec<(&str, String)> = visible
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    format!("{} {} {}", t.name, t.listed.name, t.listed.description),
                )
            })
            .collect();
        let words: Vec<(String, f64)> =
            talon_embed::bm25(&input.query, &documents, documents.len())
                .into_iter()
                .map(|(name, score)| (name.to_string(), score))
                .collect();
        let candidates: Vec<(String, String)> = documents
            .iter()
            .map(|(name, text)| (name.to_string(), text.clone()))
            .collect();
        let near = talon_embed::nearest_if(
            self.embedder
                .as_ref()
                .map(|e| e as &dyn talon_embed::Embedder),
            "mcp_tool_search",
            &input.query,
            &candidates,
        )
        .await;
        let found: Vec<serde_json::Value> = talon_embed::fuse(&words, &near)
            .into_iter()
            .take(limit)
            .filter_map(|f| visible.iter().find(|t| t.name == f.key))
            .map(|t| {
                json!({"name": t.name, "server": t.link.name(),
                    "description": t.listed.description, "input_schema": t.listed.input_schema})
            })
            .collect();
        if found.is_empty() {
            return ToolOutput::text(format!(
                "No MCP tool matches {:?}. Try other words (what the tool acts on, or its service's name).",
                input.query
            ));
        }
        let names: Vec<String> = found
            .iter()
            .filter_map(|f| f["name"].as_str().map(str::to_string))
            .collect();
        (self.activate)(&names);
        let text = serde_json::to_string_pretty(&found).unwrap_or_default();
        ToolOutput::text(format!(
            "{} tool(s) found and activated; call them by name.\n{}",
            found.len(),
            text
        ))
        .with_origin("tool search")
    }
}

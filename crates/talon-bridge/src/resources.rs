//! Claude Code's `ListMcpResources` and `ReadMcpResource` over the bridged servers.
//!
//! Both declare their `server` argument ([`ToolSpec::naming_mcp_server`]), so the pipeline
//! refuses a call naming a server the caller's policy denies (`group:mcp:<server>`), as it
//! refuses that server's own tools; a listing of every server skips the denied ones (and
//! does not name them) by the rule the pipeline hands over
//! ([`Authorized::mcp_server_allowed`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::Dialect;
use crate::link::Link;

/// The connected servers by name, shared with the resource tools.
pub type Links = Arc<Mutex<BTreeMap<String, Arc<Link>>>>;

/// The connected servers the call may reach (by its policy), by name.
fn reachable<I>(links: &Links, call: &Authorized<I>) -> BTreeMap<String, Arc<Link>> {
    links
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(name, _)| call.mcp_server_allowed(name))
        .map(|(name, link)| (name.clone(), Arc::clone(link)))
        .collect()
}

fn link<I>(links: &Links, call: &Authorized<I>, server: &str) -> Result<Arc<Link>, String> {
    let mut all = reachable(links, call);
    all.remove(server).ok_or_else(|| {
        let known: Vec<&String> = all.keys().collect();
        format!("no MCP server named {server:?}; connected servers: {known:?}")
    })
}

/// The dialect's own group (`claude_code` for Claude Code's names).
fn dialect_group(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::ClaudeCode => "claude_code",
        Dialect::GoClaw => "mcp",
    }
}

/// Input of [`ListMcpResources`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Only this server's resources.
    #[serde(default)]
    pub server: Option<String>,
}

/// `ListMcpResources` (Claude Code) or `mcp_list_resources` (GoClaw dialect).
#[derive(Debug, Clone)]
pub struct ListMcpResources {
    name: &'static str,
    dialect: Dialect,
    links: Links,
}

impl ListMcpResources {
    pub fn new(dialect: Dialect, links: Links) -> Self {
        let name = match dialect {
            Dialect::ClaudeCode => "ListMcpResources",
            Dialect::GoClaw => "mcp_list_resources",
        };
        Self {
            name,
            dialect,
            links,
        }
    }
}

impl Tool for ListMcpResources {
    type Input = ListInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            self.name,
            "Lists the resources of the connected MCP servers (each with its server, URI, name and \
             MIME type). Optionally only one server's.",
            SideEffect::ReadOnly,
        )
        .in_group("mcp")
        .in_group(dialect_group(self.dialect))
        .with_untrusted_output()
        .naming_mcp_server("server")
    }

    async fn execute(&self, call: Authorized<ListInput>) -> ToolOutput {
        let targets: Vec<Arc<Link>> = match &call.input().server {
            Some(name) => match link(&self.links, &call, name) {
                Ok(l) => vec![l],
                Err(e) => return ToolOutput::error(e),
            },
            None => reachable(&self.links, &call).into_values().collect(),
        };
        let mut out: Vec<Value> = Vec::new();
        let mut problems = Vec::new();
        for l in targets {
            if let Err(e) = l.authorize(call.ctx(), None).await {
                problems.push(e);
                continue;
            }
            let listed = match l.server() {
                Ok(server) => server
                    .resources(l.config.call_timeout)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match listed {
                Ok(resources) => out.extend(resources.into_iter().map(|mut r| {
                    r["server"] = Value::String(l.name().to_string());
                    r
                })),
                Err(e) => problems.push(e),
            }
        }
        let mut text = serde_json::to_string_pretty(&out).unwrap_or_default();
        if !problems.is_empty() {
            text.push_str(&format!("\n\nNot listed: {}", problems.join("; ")));
        }
        ToolOutput::text(text).with_origin("resources")
    }
}

/// Input of [`ReadMcpResource`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The MCP server name.
    pub server: String,
    /// The resource URI to read.
    pub uri: String,
}

/// `ReadMcpResource` (Claude Code) or `mcp_read_resource` (GoClaw dialect).
#[derive(Debug, Clone)]
pub struct ReadMcpResource {
    name: &'static str,
    dialect: Dialect,
    links: Links,
}

impl ReadMcpResource {
    pub fn new(dialect: Dialect, links: Links) -> Self {
        let name = match dialect {
            Dialect::ClaudeCode => "ReadMcpResource",
            Dialect::GoClaw => "mcp_read_resource",
        };
        Self {
            name,
            dialect,
            links,
        }
    }
}

impl Tool for ReadMcpResource {
    type Input = ReadInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            self.name,
            "Reads a resource from an MCP server, given the server's name and the resource's URI.",
            SideEffect::ReadOnly,
        )
        .in_group("mcp")
        .in_group(dialect_group(self.dialect))
        .with_untrusted_output()
        .naming_mcp_server("server")
    }

    async fn execute(&self, call: Authorized<ReadInput>) -> ToolOutput {
        let input = call.input();
        let l = match link(&self.links, &call, &input.server) {
            Ok(l) => l,
            Err(e) => return ToolOutput::error(e),
        };
        if let Err(e) = l.authorize(call.ctx(), None).await {
            return ToolOutput::error(e);
        }
        let server = match l.server() {
            Ok(s) => s,
            Err(e) => return ToolOutput::error(e),
        };
        match server
            .read_resource(&input.uri, l.config.call_timeout)
            .await
        {
            Ok(result) => {
                // Same shape as a tool result's embedded resources.
                let content: Vec<Value> = result
                    .get("contents")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| serde_json::json!({"type": "resource", "resource": c}))
                    .collect();
                let as_call = serde_json::json!({"content": content});
                crate::tool::convert(l.name(), &input.uri, &as_call, l.config.max_output_chars)
            }
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

//! Tool definitions in the three wire formats: OpenAI function tools, Anthropic tools, MCP tools.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::tool::{SideEffect, ToolSpec};

/// Which API the definitions are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// `{"type":"function","function":{"name","description","parameters"}}`
    #[serde(rename = "openai")]
    OpenAi,
    /// `{"name","description","input_schema"}`
    Anthropic,
    /// `{"name","description","inputSchema","annotations":{…}}`
    Mcp,
}

/// MCP tool annotation hints, derived from the risk class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpHints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// The hints for a tool: read-only classes are idempotent and not destructive; mutating, network
/// and spawning tools may destroy; network and spawning tools reach an open world.
pub fn mcp_hints(spec: &ToolSpec) -> McpHints {
    let read_only = spec.side_effect.is_read_only();
    McpHints {
        read_only,
        destructive: matches!(
            spec.side_effect,
            SideEffect::Mutating | SideEffect::Network | SideEffect::Spawns
        ),
        idempotent: read_only,
        open_world: matches!(spec.side_effect, SideEffect::Network | SideEffect::Spawns),
    }
}

/// MCP tool annotations as JSON.
pub fn mcp_annotations(spec: &ToolSpec) -> Value {
    let h = mcp_hints(spec);
    json!({
        "readOnlyHint": h.read_only,
        "destructiveHint": h.destructive,
        "idempotentHint": h.idempotent,
        "openWorldHint": h.open_world,
    })
}

/// One tool's definition in `format`.
pub fn definition(format: WireFormat, spec: &ToolSpec, schema: &Value) -> Value {
    match format {
        WireFormat::OpenAi => json!({
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": schema,
            }
        }),
        WireFormat::Anthropic => json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": schema,
        }),
        WireFormat::Mcp => json!({
            "name": spec.name,
            "description": spec.description,
            "inputSchema": schema,
            "annotations": mcp_annotations(spec),
        }),
    }
}

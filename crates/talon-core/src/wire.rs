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

/// MCP tool annotations derived from the risk class.
pub fn mcp_annotations(spec: &ToolSpec) -> Value {
    let read_only = spec.side_effect.is_read_only();
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": matches!(spec.side_effect, SideEffect::Mutating | SideEffect::Network | SideEffect::Spawns),
        "idempotentHint": read_only,
        "openWorldHint": matches!(spec.side_effect, SideEffect::Network | SideEffect::Spawns),
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

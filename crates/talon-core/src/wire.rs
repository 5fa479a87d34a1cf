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

/// One tool's definition in `format`. MCP gets the schema as declared; the model providers'
/// formats get it without `$schema`, which not every provider accepts.
pub fn definition(format: WireFormat, spec: &ToolSpec, schema: &Value) -> Value {
    let undeclared;
    let schema = match schema.get("$schema") {
        Some(_) if format != WireFormat::Mcp => {
            let mut copy = schema.clone();
            if let Value::Object(map) = &mut copy {
                map.remove("$schema");
            }
            undeclared = copy;
            &undeclared
        }
        _ => schema,
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::SideEffect;

    #[test]
    fn only_mcp_sees_a_declared_dialect() {
        let spec = ToolSpec::new("t", "d", SideEffect::None);
        let schema =
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"});
        let mcp = definition(WireFormat::Mcp, &spec, &schema);
        assert_eq!(mcp["inputSchema"], schema);
        let openai = definition(WireFormat::OpenAi, &spec, &schema);
        assert!(openai["function"]["parameters"].get("$schema").is_none());
        let anthropic = definition(WireFormat::Anthropic, &spec, &schema);
        assert!(anthropic["input_schema"].get("$schema").is_none());
        assert_eq!(anthropic["input_schema"]["type"], "object");
    }
}

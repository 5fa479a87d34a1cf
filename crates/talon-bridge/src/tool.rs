//! A server's tool as a Talon tool: its own schema, a risk from its annotations, and results
//! converted (text capped, images kept, embedded resources inlined); the spec declares
//! `untrusted_output`, so the pipeline fences the text as untrusted, naming `server/tool`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use talon_core::{Authorized, Media, Risk, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::link::Link;
use crate::server::ListedTool;

/// Claude Code's default cap on an MCP result: 25,000 tokens, counted here as 4 characters each.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 100_000;

/// The risk of a listed tool: read-only → low, destructive → critical, neither → high.
pub fn risk(tool: &ListedTool) -> Risk {
    if tool.read_only {
        Risk::Low
    } else if tool.destructive {
        Risk::Critical
    } else {
        Risk::High
    }
}

/// One bridged tool.
#[derive(Debug, Clone)]
pub struct Bridged {
    pub link: Arc<Link>,
    /// The name Talon offers it under.
    pub name: String,
    pub listed: ListedTool,
    pub timeout: Duration,
    pub max_output_chars: usize,
}

impl Tool for Bridged {
    type Input = Value;

    fn spec(&self) -> ToolSpec {
        let side_effect = if self.listed.read_only {
            SideEffect::ReadOnly
        } else {
            SideEffect::Network
        };
        ToolSpec::new(
            self.name.clone(),
            self.listed.description.clone(),
            side_effect,
        )
        .with_risk(risk(&self.listed))
        .reporting_progress()
        .in_group("mcp")
        .in_group(format!("mcp:{}", self.link.name()))
        .with_untrusted_output()
    }

    fn input_schema(&self) -> Value {
        self.listed.input_schema.clone()
    }

    async fn execute(&self, call: Authorized<Value>) -> ToolOutput {
        if let Err(message) = self
            .link
            .authorize(call.ctx(), Some(&self.listed.name))
            .await
        {
            return ToolOutput::error(message);
        }
        let server = match self.link.server() {
            Ok(server) => server,
            Err(message) => return ToolOutput::error(message),
        };
        match server
            .call(
                &self.listed.name,
                call.input().clone(),
                self.timeout,
                call.ctx().progress.clone(),
                call.ctx().client.clone(),
            )
            .await
        {
            Ok(result) => convert(
                self.link.name(),
                &self.listed.name,
                &result,
                self.max_output_chars,
            ),
            Err(e) => {
                if !server.is_alive() {
                    self.link.lost();
                }
                ToolOutput::error(e.to_string())
            }
        }
    }
}

/// A `tools/call` result as a Talon result.
pub fn convert(server: &str, tool: &str, result: &Value, max_chars: usize) -> ToolOutput {
    let mut text = String::new();
    let mut media = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => push(&mut text, field("text")),
            "image" | "audio" => {
                match base64::engine::general_purpose::STANDARD.decode(field("data")) {
                    Ok(data) => media.push(Media {
                        mime_type: field("mimeType").to_string(),
                        data,
                        name: None,
                        prompt: None,
                    }),
                    Err(_) => push(
                        &mut text,
                        "(an attachment whose data is not valid base64 was dropped)",
                    ),
                }
            }
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or_default();
                let uri = resource
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match resource.get("text").and_then(Value::as_str) {
                    Some(t) => push(&mut text, &format!("[resource {uri}]\n{t}")),
                    None => push(&mut text, &format!("[resource {uri}: binary, not shown]")),
                }
            }
            "resource_link" => push(&mut text, &format!("[resource link {}]", field("uri"))),
            other => push(&mut text, &format!("(content of type {other:?} not shown)")),
        }
    }
    if text.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        text = serde_json::to_string_pretty(structured).unwrap_or_default();
    }
    let total = text.chars().count();
    if total > max_chars {
        let cut: String = text.chars().take(max_chars).collect();
        text = format!("{cut}\n[output cut at {max_chars} of {total} characters]");
    }
    let mut output = if result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    }
    .with_origin(format!("{server}/{tool}"));
    for m in media {
        output = output.with_media(m);
    }
    output
}

fn push(text: &mut String, part: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(part);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(read_only: bool, destructive: bool) -> ListedTool {
        ListedTool {
            name: "t".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            read_only,
            destructive,
        }
    }

    #[test]
    fn risk_follows_annotations() {
        assert_eq!(risk(&listed(true, false)), Risk::Low);
        assert_eq!(risk(&listed(false, true)), Risk::Critical);
        assert_eq!(risk(&listed(false, false)), Risk::High);
    }

    #[test]
    fn results_keep_images_inline_resources_and_are_capped_and_fenced() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}}
        ]});
        let out = convert("srv", "t", &result, 1000);
        assert!(!out.is_error);
        assert!(
            out.for_llm
                .contains("hello\n[resource file:///a.txt]\ninside")
        );
        // The pipeline fences it (the spec declares untrusted output), naming this origin.
        assert_eq!(out.origin.as_deref(), Some("srv/t"));
        assert_eq!(out.media.len(), 1);
        assert_eq!(out.media[0].mime_type, "image/png");
        let long = json!({"content": [{"type": "text", "text": "x".repeat(50)}], "isError": true});
        let out = convert("srv", "t", &long, 10);
        assert!(out.is_error && out.for_llm.contains("[output cut at 10 of 50 characters]"));
    }
}

//! A server's tool as a Talon tool: its own schema, a risk from its annotations, and results
//! converted (text capped, images kept, embedded resources inlined); the spec declares
//! `untrusted_output`, so the pipeline fences the text as untrusted, naming `server/tool`.
//!
//! [`convert`] is the one place an MCP result becomes Talon output, so it bounds what a server
//! can make Talon keep: an image or audio clip is stored with the session and sent to the
//! provider, so each is capped at [`MAX_ATTACHMENT_BYTES`] decoded, a result at
//! [`MAX_RESULT_ATTACHMENT_BYTES`] and [`MAX_ATTACHMENTS`]; whatever is over is replaced by a
//! note saying what was dropped and why (the base64 is never decoded when its length alone says
//! it is too big).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use talon_core::{Authorized, Media, Risk, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::link::Link;
use crate::server::ListedTool;

/// Claude Code's default cap on an MCP result: 25,000 tokens, counted here as 4 characters each.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 100_000;

/// The largest image or audio clip kept from a result, decoded.
pub const MAX_ATTACHMENT_BYTES: usize = 5 * 1024 * 1024;
/// The most image and audio bytes kept from one result, decoded.
pub const MAX_RESULT_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
/// The most images and audio clips kept from one result.
pub const MAX_ATTACHMENTS: usize = 20;

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
            kind @ ("image" | "audio") => {
                match attachment(kind, field("mimeType"), field("data"), &media) {
                    Ok(m) => media.push(m),
                    Err(note) => push(&mut text, &note),
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

/// An image or audio item as media, or the note that replaces it: at most
/// [`MAX_ATTACHMENTS`] per result, each at most [`MAX_ATTACHMENT_BYTES`] and all together at
/// most [`MAX_RESULT_ATTACHMENT_BYTES`], with a MIME type that is one.
fn attachment(kind: &str, mime: &str, data: &str, kept: &[Media]) -> Result<Media, String> {
    let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
    let dropped = |why: String| format!("(an {kind} attachment was dropped: {why})");
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    let valid_mime = mime.len() <= 127
        && mime
            .split_once('/')
            .is_some_and(|(t, sub)| token(t) && token(sub));
    if !valid_mime {
        let shown: String = mime.chars().take(60).collect();
        return Err(dropped(format!("its MIME type {shown:?} is not valid")));
    }
    if kept.len() >= MAX_ATTACHMENTS {
        return Err(dropped(format!(
            "{mime}; a result keeps at most {MAX_ATTACHMENTS} images and audio clips"
        )));
    }
    let used: usize = kept.iter().map(|m| m.data.len()).sum();
    let too_big = |size: usize| {
        if size > MAX_ATTACHMENT_BYTES {
            Some(format!(
                "{mime} of {:.1} MiB; Talon keeps at most {:.0} MiB per attachment, so ask the tool for a smaller one",
                mib(size),
                mib(MAX_ATTACHMENT_BYTES)
            ))
        } else if used + size > MAX_RESULT_ATTACHMENT_BYTES {
            Some(format!(
                "{mime} of {:.1} MiB; Talon keeps at most {:.0} MiB of attachments per result",
                mib(size),
                mib(MAX_RESULT_ATTACHMENT_BYTES)
            ))
        } else {
            None
        }
    };
    // Base64 holds 3 bytes in 4 characters: a length that is too big is refused undecoded.
    if let Some(why) = too_big((data.len() / 4).saturating_mul(3).saturating_sub(2)) {
        return Err(dropped(why));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| dropped(format!("{mime} whose data is not valid base64")))?;
    if let Some(why) = too_big(bytes.len()) {
        return Err(dropped(why));
    }
    Ok(Media {
        mime_type: mime.to_string(),
        data: bytes,
        name: None,
        prompt: None,
    })
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

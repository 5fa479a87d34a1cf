//! Anthropic Messages.
//!
//! Streamed `tool_use` blocks carry their input as `input_json_delta` fragments, joined and
//! parsed at `content_block_stop` (empty means `{}`). Tool results go back as `tool_result`
//! blocks with `is_error` and images. The stream ends at `message_stop`; an `error` event ends it
//! with that error.

use std::collections::HashMap;

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use sse_stream::Sse;

use super::http::{Endpoint, Flow, FormatParser};
use super::{
    ChatRequest, EventSink, Provider, ProviderError, ProviderKind, RetryPolicy, StopReason,
    StreamEvent, Usage,
};
use crate::message::{Image, Message, ToolCallRequest, with_earlier_images_omitted};

/// The API version Talon speaks.
pub const API_VERSION: &str = "2023-06-01";

/// A Messages provider.
#[derive(Debug, Clone)]
pub struct Anthropic {
    endpoint: Endpoint,
}

impl Anthropic {
    /// `base_url` is the API host (`https://api.anthropic.com`); requests go to `/v1/messages`.
    pub fn new(
        name: &str,
        base_url: &str,
        api_key: Option<&str>,
        policy: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        let base = base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        Ok(Self {
            endpoint: Endpoint::new(
                name,
                url,
                headers,
                http::HeaderName::from_static("x-api-key"),
                "",
                api_key,
                policy,
            )?,
        })
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        &self.endpoint.provider
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        sink: EventSink<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let body = request_body(request);
            self.endpoint
                .stream(request.model, &body, Blocks::default, sink)
                .await
        })
    }
}

/// The request body for `request`, streamed.
pub fn request_body(request: &ChatRequest<'_>) -> Value {
    let messages: Vec<Value> = with_earlier_images_omitted(request.messages)
        .iter()
        .map(message)
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(
                |t| json!({"name": t.name, "description": t.description, "input_schema": t.schema}),
            )
            .collect();
    }
    let sampling = request.sampling;
    for (key, value) in [
        ("temperature", sampling.temperature.map(Value::from)),
        ("top_p", sampling.top_p.map(Value::from)),
        ("top_k", sampling.top_k.map(Value::from)),
        (
            "stop_sequences",
            (!sampling.stop.is_empty()).then(|| json!(sampling.stop)),
        ),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    body
}

fn image_block(image: &Image) -> Value {
    json!({"type": "image",
           "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}})
}

fn message(message: &Message) -> Value {
    match message {
        Message::User { text, images } if images.is_empty() => {
            json!({"role": "user", "content": text})
        }
        Message::User { text, images } => {
            // Images first, as Anthropic recommends.
            let mut content: Vec<Value> = images.iter().map(image_block).collect();
            content.push(json!({"type": "text", "text": text}));
            json!({"role": "user", "content": content})
        }
        Message::Assistant { text, tool_calls } => {
            let mut content = Vec::new();
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for call in tool_calls {
                // The input must be an object; arguments the model mangled are echoed as such.
                let input = match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"_unparsed_arguments": call.arguments}),
                };
                content.push(
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
                );
            }
            json!({"role": "assistant", "content": content})
        }
        Message::ToolResults { results } => {
            let content: Vec<Value> = results
                .iter()
                .map(|r| {
                    let mut parts = vec![json!({"type": "text", "text": r.content})];
                    parts.extend(r.images.iter().map(image_block));
                    json!({"type": "tool_result", "tool_use_id": r.call_id, "content": parts, "is_error": r.is_error})
                })
                .collect();
            json!({"role": "user", "content": content})
        }
    }
}

/// A `tool_use` block being assembled.
#[derive(Debug, Default)]
struct ToolBlock {
    id: String,
    name: String,
    json: String,
}

/// Joins a Messages stream.
#[derive(Debug, Default)]
pub struct Blocks {
    tools: HashMap<u64, ToolBlock>,
    usage: Usage,
    stop: Option<StopReason>,
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

impl Blocks {
    fn finish_tool(&mut self, index: u64, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        let Some(block) = self.tools.remove(&index) else {
            return Ok(());
        };
        let arguments = if block.json.trim().is_empty() {
            "{}".to_string()
        } else {
            block.json
        };
        sink(StreamEvent::ToolCall(ToolCallRequest {
            id: block.id,
            name: block.name,
            arguments,
        }));
        Ok(())
    }

    fn usage(&mut self, usage: &Value) {
        if let Some(n) = usage.get("input_tokens").and_then(Value::as_u64) {
            self.usage.input_tokens = n;
        }
        if let Some(n) = usage.get("output_tokens").and_then(Value::as_u64) {
            self.usage.output_tokens = n;
        }
    }

    fn done(&mut self, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        let stop = self
            .stop
            .take()
            .ok_or("the message ended without a stop reason")?;
        let mut open: Vec<u64> = self.tools.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.finish_tool(index, sink)?;
        }
        sink(StreamEvent::Usage(self.usage));
        sink(StreamEvent::Finished(stop));
        Ok(())
    }
}

impl FormatParser for Blocks {
    fn event(&mut self, event: &Sse, sink: &mut dyn FnMut(StreamEvent)) -> Result<Flow, String> {
        let Some(data) = event.data.as_deref().filter(|d| !d.trim().is_empty()) else {
            return Ok(Flow::Continue);
        };
        let v: Value = serde_json::from_str(data)
            .map_err(|e| format!("an event is not JSON ({e}): {data}"))?;
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                if let Some(usage) = v.pointer("/message/usage") {
                    self.usage(usage);
                }
            }
            "content_block_start" => {
                let block = v.get("content_block").cloned().unwrap_or_default();
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let text = |k: &str| {
                            block
                                .get(k)
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string()
                        };
                        let tool = ToolBlock {
                            id: text("id"),
                            name: text("name"),
                            json: String::new(),
                        };
                        sink(StreamEvent::ToolCallStarted {
                            id: tool.id.clone(),
                            name: tool.name.clone(),
                        });
                        self.tools.insert(index, tool);
                    }
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str)
                            && !t.is_empty()
                        {
                            sink(StreamEvent::TextDelta(t.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or_default();
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = delta.get("text").and_then(Value::as_str) {
                            sink(StreamEvent::TextDelta(t.to_string()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let (Some(tool), Some(part)) = (
                            self.tools.get_mut(&index),
                            delta.get("partial_json").and_then(Value::as_str),
                        ) {
                            tool.json.push_str(part);
                        }
                    }
                    // Thinking and signatures are not passed on.
                    _ => {}
                }
            }
            "content_block_stop" => self.finish_tool(index, sink)?,
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(usage) = v.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => {
                self.done(sink)?;
                return Ok(Flow::Done);
            }
            "error" => {
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no details given");
                return Err(format!("{kind}: {message}"));
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn end(&mut self, _sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        Err("the stream ended before message_stop".into())
    }

    fn whole(&mut self, body: Value, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        for block in body
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        sink(StreamEvent::TextDelta(t.to_string()));
                    }
                }
                Some("tool_use") => {
                    let text = |k: &str| {
                        block
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    sink(StreamEvent::ToolCall(ToolCallRequest {
                        id: text("id"),
                        name: text("name"),
                        arguments: block.get("input").cloned().unwrap_or(json!({})).to_string(),
                    }));
                }
                _ => {}
            }
        }
        if let Some(usage) = body.get("usage") {
            self.usage(usage);
        }
        self.stop = Some(stop_reason(
            body.get("stop_reason")
                .and_then(Value::as_str)
                .unwrap_or("end_turn"),
        ));
        self.done(sink)
    }
}

#[cfg(test)]
mod tests;

//! OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, LM Studio).
//!
//! Streamed tool calls arrive as fragments in `choices[0].delta.tool_calls[]`. They are joined by
//! `index`; servers that omit or repeat the index (Ollama sends 0 for every call, Gemini's
//! compatibility layer none) are handled by keying on the call id as well: a new id always opens
//! a new call. Every call gets a `role: tool` reply, and echoed arguments are JSON strings, as the
//! API requires.

use futures::future::BoxFuture;
use http::HeaderMap;
use serde_json::{Value, json};
use sse_stream::Sse;

use super::http::{Endpoint, Flow, FormatParser};
use super::{
    ChatRequest, EventSink, Provider, ProviderError, ProviderKind, RetryPolicy, StopReason,
    StreamEvent, Usage,
};
use crate::message::{Image, Message, ToolCallRequest, with_earlier_images_omitted};

/// A Chat Completions provider.
#[derive(Debug, Clone)]
pub struct OpenAi {
    endpoint: Endpoint,
}

impl OpenAi {
    /// `base_url` is the API root (`https://api.openai.com/v1`, `http://localhost:11434/v1`);
    /// `api_key` is sent as a bearer token when given.
    pub fn new(
        name: &str,
        base_url: &str,
        api_key: Option<&str>,
        policy: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        Ok(Self {
            endpoint: Endpoint::new(
                name,
                url,
                HeaderMap::new(),
                http::header::AUTHORIZATION,
                "Bearer ",
                api_key,
                policy,
            )?,
        })
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        &self.endpoint.provider
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Openai
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        sink: EventSink<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let body = request_body(request);
            self.endpoint
                .stream(request.model, &body, Accumulator::default, sink)
                .await
        })
    }
}

/// The request body for `request`, streamed with usage.
pub fn request_body(request: &ChatRequest<'_>) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in with_earlier_images_omitted(request.messages).iter() {
        push_message(&mut messages, message);
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.schema}})
            })
            .collect();
    }
    let sampling = request.sampling;
    for (key, value) in [
        ("temperature", sampling.temperature.map(Value::from)),
        ("top_p", sampling.top_p.map(Value::from)),
        ("seed", sampling.seed.map(Value::from)),
        ("response_format", sampling.response_format.clone()),
        (
            "stop",
            (!sampling.stop.is_empty()).then(|| json!(sampling.stop)),
        ),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    body
}

/// An image as a content part (a `data:` URL).
fn image_part(image: &Image) -> Value {
    json!({"type": "image_url",
           "image_url": {"url": format!("data:{};base64,{}", image.mime_type, image.data)}})
}

fn push_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text, images } if images.is_empty() => {
            out.push(json!({"role": "user", "content": text}));
        }
        Message::User { text, images } => {
            let mut parts = vec![json!({"type": "text", "text": text})];
            parts.extend(images.iter().map(image_part));
            out.push(json!({"role": "user", "content": parts}));
        }
        Message::Assistant { text, tool_calls } => {
            let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !tool_calls.is_empty() {
                m["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
            }
            out.push(m);
        }
        Message::ToolResults { results } => {
            // Tool messages carry text only; images follow in one user message.
            let mut images = Vec::new();
            for r in results {
                let content = if r.is_error {
                    format!("Error: {}", r.content)
                } else {
                    r.content.clone()
                };
                out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": content}));
                images.extend(r.images.iter().map(image_part));
            }
            if !images.is_empty() {
                let mut parts = vec![
                    json!({"type": "text", "text": "Images returned by the tool calls above:"}),
                ];
                parts.extend(images);
                out.push(json!({"role": "user", "content": parts}));
            }
        }
    }
}

/// One tool call being assembled.
#[derive(Debug, Default)]
struct Slot {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Joins a Chat Completions stream.
#[derive(Debug, Default)]
pub struct Accumulator {
    slots: Vec<Slot>,
    finish: Option<StopReason>,
    usage: Option<Usage>,
    sent_calls: bool,
}

impl Accumulator {
    /// The slot a fragment belongs to: a new id opens a new call; otherwise the index decides;
    /// a fragment with neither continues the last call.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            if let Some(i) = self.slots.iter().position(|s| s.id == id) {
                return i;
            }
            // The index's slot, if it has no id yet (id sent after the first fragment).
            if let Some(i) = self
                .slots
                .iter()
                .position(|s| s.index.is_some() && s.index == index && s.id.is_empty())
            {
                self.slots[i].id = id.to_string();
                return i;
            }
            self.slots.push(Slot {
                index,
                id: id.to_string(),
                ..Slot::default()
            });
            return self.slots.len() - 1;
        }
        if let Some(index) = index
            && let Some(i) = self.slots.iter().rposition(|s| s.index == Some(index))
        {
            return i;
        }
        if index.is_none() && !self.slots.is_empty() {
            return self.slots.len() - 1;
        }
        self.slots.push(Slot {
            index,
            ..Slot::default()
        });
        self.slots.len() - 1
    }

    fn delta(&mut self, delta: &Value, sink: &mut dyn FnMut(StreamEvent)) {
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            sink(StreamEvent::TextDelta(text.to_string()));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64);
            let id = call.get("id").and_then(Value::as_str);
            let i = self.slot(index, id);
            let slot = &mut self.slots[i];
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                slot.name.push_str(name);
            }
            match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(part)) => slot.arguments.push_str(part),
                // Some servers send the arguments as an object.
                Some(v @ Value::Object(_)) => slot.arguments.push_str(&v.to_string()),
                _ => {}
            }
            if !slot.announced && !slot.name.is_empty() {
                slot.announced = true;
                sink(StreamEvent::ToolCallStarted {
                    id: slot.id.clone(),
                    name: slot.name.clone(),
                });
            }
        }
    }

    fn usage(&mut self, usage: &Value) {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        self.usage = Some(Usage {
            input_tokens: n("prompt_tokens"),
            output_tokens: n("completion_tokens"),
        });
    }

    /// Sends the joined calls, the usage and the finish.
    fn finish(&mut self, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        let Some(finish) = self.finish.take() else {
            return Err("the stream ended without a finish reason".into());
        };
        if !self.sent_calls {
            self.sent_calls = true;
            for (n, slot) in self.slots.drain(..).enumerate() {
                if slot.name.is_empty() {
                    return Err(format!("tool call {n} has no name"));
                }
                let id = if slot.id.is_empty() {
                    format!("call_{n}")
                } else {
                    slot.id
                };
                let arguments = if slot.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    slot.arguments
                };
                sink(StreamEvent::ToolCall(ToolCallRequest {
                    id,
                    name: slot.name,
                    arguments,
                }));
            }
        }
        if let Some(usage) = self.usage.take() {
            sink(StreamEvent::Usage(usage));
        }
        sink(StreamEvent::Finished(finish));
        Ok(())
    }

    fn chunk(&mut self, chunk: &Value, sink: &mut dyn FnMut(StreamEvent)) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage(usage);
        }
        // vLLM may send `choices: null` in the usage chunk.
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) {
                self.delta(delta, sink);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(stop_reason(reason, !self.slots.is_empty()));
            }
        }
    }
}

/// A finish reason in neutral terms.
fn stop_reason(reason: &str, has_calls: bool) -> StopReason {
    match reason {
        "stop" | "eos" if has_calls => StopReason::ToolUse,
        "stop" | "eos" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

impl FormatParser for Accumulator {
    fn event(&mut self, event: &Sse, sink: &mut dyn FnMut(StreamEvent)) -> Result<Flow, String> {
        let Some(data) = event.data.as_deref() else {
            return Ok(Flow::Continue);
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.finish(sink)?;
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| format!("a chunk is not JSON ({e}): {data}"))?;
        if let Some(error) = chunk.get("error") {
            return Err(format!("the server reported an error mid-stream: {error}"));
        }
        let usage_only = chunk
            .get("choices")
            .is_none_or(|c| c.as_array().is_none_or(Vec::is_empty));
        self.chunk(&chunk, sink);
        // The usage chunk is the last one before `[DONE]`: stop there, not at EOF.
        if usage_only && self.usage.is_some() && self.finish.is_some() {
            self.finish(sink)?;
            return Ok(Flow::Done);
        }
        Ok(Flow::Continue)
    }

    fn end(&mut self, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        // Some servers end the stream after the finish reason without `[DONE]`.
        self.finish(sink)
    }

    fn whole(&mut self, body: Value, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String> {
        self.chunk(&body, sink);
        if self.finish.is_none() {
            self.finish = Some(StopReason::EndTurn);
        }
        self.finish(sink)
    }
}

#[cfg(test)]
mod tests;

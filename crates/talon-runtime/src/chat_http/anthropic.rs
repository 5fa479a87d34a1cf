//! `POST /v1/messages`, Anthropic's Messages API over a Talon agent, with the semantics of
//! `/v1/chat/completions`: `model` names the agent, the client's `system` follows the agent's
//! own, its tools are offered beside the agent's and run by the client (`tool_use` blocks,
//! `stop_reason: "tool_use"`), images come as base64 blocks, and what Talon cannot honour is
//! refused with a 400 naming the parameter. A stream is Anthropic's event sequence; the
//! agent's own tool calls travel as `talon` events, which Anthropic's SDKs skip.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use talon_agent::message::{Image, ToolResult};
use talon_agent::{Message, RunEvent, Sampling, ToolCallRequest, ToolDef, TurnStop};

use super::client_turn::{self, Answer, ClientRequest};
use super::{ApiError, ApiState, Labelled, session_header, sse};
use crate::agent_runs::Ran;

#[derive(Debug, Deserialize)]
struct MessagesRequest {
    #[serde(default)]
    model: String,
    messages: Vec<Value>,
    max_tokens: Option<u32>,
    /// A string or text blocks.
    #[serde(default)]
    system: Option<Value>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u64>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    /// `user_id` is the end user.
    #[serde(default)]
    metadata: Option<Value>,
    /// A stored session to continue (Talon's extension).
    #[serde(default)]
    session: Option<String>,
    #[serde(flatten)]
    others: Map<String, Value>,
}

/// Parameters that never change an answer, so a client may send them.
const HARMLESS: &[&str] = &["service_tier", "cache_control"];

/// Refuses a parameter Talon would otherwise drop (any set to more than null, or thinking
/// turned on), except [`HARMLESS`] ones.
fn check_others(others: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in others {
        let inert = value.is_null()
            || HARMLESS.contains(&key.as_str())
            || (key == "thinking" && value.get("type").and_then(Value::as_str) == Some("disabled"));
        if !inert {
            return Err(ApiError::invalid(
                Some(key),
                format!(
                    "{} is not supported by Talon's messages API; leave it out",
                    talon_core::visible::visible(key)
                ),
            ));
        }
    }
    Ok(())
}

fn parse(body: MessagesRequest, headers: &HeaderMap) -> Result<ClientRequest, ApiError> {
    check_others(&body.others)?;
    let no_tools = match body
        .tool_choice
        .as_ref()
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
    {
        None | Some("auto") => false,
        Some("none") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                Some("tool_choice"),
                "tool_choice must be {\"type\": \"auto\"} or {\"type\": \"none\"}: the agent decides which tools to call",
            ));
        }
    };
    let system = match body.system {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(blocks)) => vec![
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ],
        Some(_) => {
            return Err(ApiError::invalid(
                Some("system"),
                "system must be a string or text blocks",
            ));
        }
    };
    let tools = body
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| tool(i, t))
        .collect::<Result<_, _>>()?;
    Ok(ClientRequest {
        model: body.model,
        user: body
            .metadata
            .as_ref()
            .and_then(|m| m.get("user_id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        session: body.session.or_else(|| session_header(headers)),
        system,
        messages: messages(body.messages)?,
        tools,
        no_tools,
        max_tokens: body.max_tokens,
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            top_k: body.top_k,
            stop: body.stop_sequences,
            seed: None,
            response_format: None,
        },
    })
}

/// A client tool: `{"name", "description"?, "input_schema"}`.
fn tool(i: usize, tool: &Value) -> Result<ToolDef, ApiError> {
    if tool
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "custom")
    {
        return Err(ApiError::invalid(
            Some("tools"),
            format!(
                "tools[{i}]: Anthropic's server tools are not supported; send custom tools (name, description, input_schema)"
            ),
        ));
    }
    let text = |key: &str| {
        tool.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(ToolDef {
        name: text("name"),
        description: text("description"),
        schema: tool
            .get("input_schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// Anthropic messages in neutral form. A user message's `tool_result` blocks become the results
/// of the assistant's calls, its other blocks a user message after them.
fn messages(raw: Vec<Value>) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::new();
    for (i, m) in raw.into_iter().enumerate() {
        let at = |e: String| ApiError::invalid(Some("messages"), format!("messages[{i}]: {e}"));
        let blocks = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err(at("content must be a string or an array of blocks".into())),
        };
        let mut texts = Vec::new();
        let mut images = Vec::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for block in &blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    texts.push(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    );
                }
                Some("image") => images.push(image(block).map_err(at)?),
                Some("tool_use") => calls.push(ToolCallRequest {
                    id: text_field(block, "id"),
                    name: text_field(block, "name"),
                    arguments: block.get("input").cloned().unwrap_or(json!({})).to_string(),
                }),
                Some("tool_result") => results.push(tool_result(block).map_err(at)?),
                // The model's own reasoning of an earlier answer; Talon's model does its own.
                Some("thinking" | "redacted_thinking") => {}
                other => {
                    return Err(at(format!(
                        "blocks of type {} are not supported; send text, image, tool_use and tool_result blocks",
                        talon_core::visible::visible(&format!("{other:?}"))
                    )));
                }
            }
        }
        let text = texts.join("\n");
        match m.get("role").and_then(Value::as_str) {
            Some("user") => {
                if !results.is_empty() {
                    out.push(Message::ToolResults { results });
                }
                if !text.is_empty() || !images.is_empty() {
                    out.push(Message::User { text, images });
                }
            }
            Some("assistant") => out.push(Message::Assistant {
                text,
                tool_calls: calls,
            }),
            other => {
                return Err(at(format!(
                    "unknown role {}; use user or assistant (system goes in the system parameter)",
                    talon_core::visible::visible(&format!("{other:?}"))
                )));
            }
        }
    }
    Ok(out)
}

fn text_field(block: &Value, key: &str) -> String {
    block
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A base64 image block. Talon fetches no image URLs for a model.
fn image(block: &Value) -> Result<Image, String> {
    let source = block.get("source");
    let field = |key: &str| source.and_then(|s| s.get(key)).and_then(Value::as_str);
    match (field("type"), field("media_type"), field("data")) {
        (Some("base64"), Some(mime), Some(data)) if mime.starts_with("image/") => Ok(Image {
            mime_type: mime.to_string(),
            data: data.to_string(),
        }),
        _ => Err("an image block needs a base64 source with an image media_type; Talon fetches no image URLs".into()),
    }
}

fn tool_result(block: &Value) -> Result<ToolResult, String> {
    let call_id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .ok_or("a tool_result block needs tool_use_id")?;
    let (content, images) = match block.get("content") {
        Some(Value::String(s)) => (s.clone(), Vec::new()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            let mut images = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(text_field(part, "text")),
                    Some("image") => images.push(image(part)?),
                    _ => return Err("tool_result content holds text and image blocks".into()),
                }
            }
            (texts.join("\n"), images)
        }
        _ => (String::new(), Vec::new()),
    };
    Ok(ToolResult {
        call_id: call_id.to_string(),
        content,
        is_error: block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        images,
    })
}

fn stop_reason(stop: &TurnStop) -> &'static str {
    match stop {
        TurnStop::MaxTokens | TurnStop::TokenBudget | TurnStop::IterationCap => "max_tokens",
        TurnStop::Refusal => "refusal",
        TurnStop::ClientTools => "tool_use",
        _ => "end_turn",
    }
}

/// A tool call's arguments as a `tool_use` block's input (an object).
fn input(call: &ToolCallRequest) -> Value {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_unparsed_arguments": call.arguments}),
    }
}

fn usage_json(ran: &Ran) -> Value {
    let u = ran.outcome.usage;
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens})
}

fn talon_json(ran: &Ran, answer: &Answer) -> Value {
    json!({"agent": ran.agent, "session": ran.session, "stop": ran.outcome.stop,
           "activity": answer.activity})
}

pub(super) async fn messages_route(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: MessagesRequest = match super::request_body(&body) {
        Ok(body) => body,
        Err(e) => return e.anthropic(),
    };
    let stream = body.stream;
    let model = body.model.clone();
    let prepared = match parse(body, &headers) {
        Ok(request) => client_turn::prepare(&state, request).await,
        Err(e) => Err(e),
    };
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return e.anthropic(),
    };
    let id = format!("msg_talon_{}", uuid::Uuid::new_v4().simple());
    let labels = prepared.labels();
    if !stream {
        let (done, _guard) = prepared.spawn(&state, "toolu_", |_| {});
        let (ran, answer) = match done.await {
            Ok(done) => done,
            Err(e) => return e.anthropic(),
        };
        let text = answer.text();
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        content.extend(
            answer.client_calls.iter().map(
                |c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input(c)}),
            ),
        );
        return Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason(&ran.outcome.stop),
            "stop_sequence": null, "usage": usage_json(&ran),
            "talon": talon_json(&ran, &answer),
        }))
        .into_response()
        .labelled(labels);
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let send = {
        let tx = tx.clone();
        move |kind: &str, data: Value| {
            let _ = tx.send(Event::default().event(kind).data(data.to_string()));
        }
    };
    send(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0}}}),
    );
    // Whether the text block (index 0) was opened.
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let events = {
        let (send, opened) = (send.clone(), std::sync::Arc::clone(&opened));
        let joiner = std::sync::Mutex::new(talon_agent::TextJoiner::default());
        move |event: RunEvent| {
            let text = joiner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .text(&event);
            if let Some(text) = text {
                if !opened.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    send(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}),
                    );
                }
                send(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": text}}),
                );
            } else if super::shows_activity(&event) {
                send("talon", json!({"type": "talon", "event": event}));
            }
        }
    };
    let (done, guard) = prepared.spawn(&state, "toolu_", events);
    tokio::spawn(async move {
        let (ran, answer) = match done.await {
            Ok(done) => done,
            Err(e) => return send("error", e.anthropic_body()),
        };
        let mut index = 0;
        if opened.load(std::sync::atomic::Ordering::Acquire) {
            send(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            );
            index = 1;
        }
        for call in &answer.client_calls {
            send(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": call.id, "name": call.name,
                                         "input": {}}}),
            );
            send(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta",
                                 "partial_json": input(call).to_string()}}),
            );
            send(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
            index += 1;
        }
        send(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason(&ran.outcome.stop), "stop_sequence": null},
                   "usage": usage_json(&ran), "talon": talon_json(&ran, &answer)}),
        );
        send("message_stop", json!({"type": "message_stop"}));
    });
    sse(rx, guard).labelled(labels)
}

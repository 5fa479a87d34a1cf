//! `POST /v1/chat/completions`, OpenAI's Chat Completions API over a Talon agent.
//!
//! `model` names the agent. Messages, tools, tool results, images (as `data:` URLs) and sampling
//! settings are taken as OpenAI defines them; what Talon cannot honour is refused with a 400
//! naming the parameter. The reply is OpenAI's, plus a `talon` field (the agent, the session,
//! why the turn stopped, and the agent's own tool calls with their results); a stream carries
//! those calls as chunks with an empty delta and a `talon.event`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::{Json, body::Bytes};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use talon_agent::message::{Image, ToolResult};
use talon_agent::{Message, Sampling, ToolCallRequest, ToolDef, TurnStop};

use super::client_turn::{self, Answer, ClientRequest};
use super::{ApiError, ApiState, Labelled, now_secs, session_header, sse};
use crate::agent_runs::Ran;

#[derive(Debug, Deserialize)]
struct CompletionRequest {
    /// The agent; `""`, `"default"` or `"talon"` mean the default agent.
    #[serde(default)]
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    stream: bool,
    /// The end user.
    #[serde(default)]
    user: Option<String>,
    /// A stored session to continue (Talon's extension).
    #[serde(default)]
    session: Option<String>,
    /// Streaming options: `include_usage` adds a last chunk with the turn's usage (and
    /// `"usage": null` on the others), as OpenAI does; without it no such chunk is sent, since
    /// clients read `choices[0]` of every chunk.
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    /// A string or up to four strings.
    stop: Option<Value>,
    seed: Option<i64>,
    response_format: Option<Value>,
    n: Option<u32>,
    /// Every other parameter: accepted only when it changes nothing (see [`check_others`]).
    #[serde(flatten)]
    others: Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// Parameters that never change an answer, so a client may send them.
const HARMLESS: &[&str] = &[
    "metadata",
    "store",
    "service_tier",
    "parallel_tool_calls",
    "prompt_cache_key",
    "safety_identifier",
];

/// Refuses a parameter Talon would otherwise drop: any not null, zero or false, except
/// [`HARMLESS`] ones.
fn check_others(others: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in others {
        let inert = matches!(value, Value::Null | Value::Bool(false))
            || value.as_f64() == Some(0.0)
            || HARMLESS.contains(&key.as_str());
        if !inert {
            return Err(ApiError::invalid(
                Some(key),
                format!(
                    "{} is not supported by Talon's chat completions; leave it out",
                    talon_core::visible::visible(key)
                ),
            ));
        }
    }
    Ok(())
}

/// The request in neutral form.
fn parse(body: CompletionRequest, headers: &HeaderMap) -> Result<ClientRequest, ApiError> {
    check_others(&body.others)?;
    if body.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(
            Some("n"),
            "n must be 1: an agent's turn runs tools, so it has one answer; send separate requests for more",
        ));
    }
    let no_tools = match &body.tool_choice {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "auto" => false,
        Some(Value::String(s)) if s == "none" => true,
        Some(_) => {
            return Err(ApiError::invalid(
                Some("tool_choice"),
                "tool_choice must be \"auto\" or \"none\": the agent decides which tools to call",
            ));
        }
    };
    let stop = match body.stop {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(ApiError::invalid(Some("stop"), "stop must hold strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::invalid(
                Some("stop"),
                "stop must be a string or an array of strings",
            ));
        }
    };
    let mut system = Vec::new();
    let messages = messages(body.messages, &mut system)?;
    Ok(ClientRequest {
        model: body.model,
        user: body.user,
        session: body.session.or_else(|| session_header(headers)),
        system,
        messages,
        tools: body
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(i, t))
            .collect::<Result<_, _>>()?,
        no_tools,
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
        sampling: Sampling {
            temperature: body.temperature,
            top_p: body.top_p,
            top_k: None,
            stop,
            seed: body.seed,
            response_format: body.response_format,
        },
    })
}

/// A client tool: `{"type": "function", "function": {"name", "description"?, "parameters"?}}`.
fn tool(i: usize, tool: &Value) -> Result<ToolDef, ApiError> {
    let function = tool
        .get("function")
        .filter(|_| tool.get("type").and_then(Value::as_str) == Some("function"))
        .ok_or_else(|| {
            ApiError::invalid(
                Some("tools"),
                format!("tools[{i}] must be {{\"type\": \"function\", \"function\": {{…}}}}"),
            )
        })?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(ToolDef {
        name: name.to_string(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        schema: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// OpenAI messages in neutral form; system and developer texts go to `system`.
fn messages(raw: Vec<Value>, system: &mut Vec<String>) -> Result<Vec<Message>, ApiError> {
    let mut out: Vec<Message> = Vec::new();
    for (i, m) in raw.into_iter().enumerate() {
        let at = |e: String| ApiError::invalid(Some("messages"), format!("messages[{i}]: {e}"));
        let (text, images) = content(&m).map_err(at)?;
        match m.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => system.push(text),
            Some("user") => out.push(Message::User { text, images }),
            Some("assistant") => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|calls| calls.iter().map(tool_call).collect::<Result<Vec<_>, _>>())
                    .transpose()
                    .map_err(at)?
                    .unwrap_or_default();
                out.push(Message::Assistant {
                    text,
                    tool_calls: calls,
                });
            }
            Some("tool") => {
                let call_id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at("a tool message needs tool_call_id".into()))?;
                let result = ToolResult {
                    call_id: call_id.to_string(),
                    content: text,
                    is_error: false,
                    images,
                };
                // Consecutive tool messages answer one assistant message.
                match out.last_mut() {
                    Some(Message::ToolResults { results }) => results.push(result),
                    _ => out.push(Message::ToolResults {
                        results: vec![result],
                    }),
                }
            }
            other => {
                return Err(at(format!(
                    "unknown role {}; use system, developer, user, assistant or tool",
                    talon_core::visible::visible(&format!("{other:?}"))
                )));
            }
        }
    }
    Ok(out)
}

/// An assistant message's tool call.
fn tool_call(call: &Value) -> Result<ToolCallRequest, String> {
    let function = call.get("function");
    let field = |name: &str| {
        function
            .and_then(|f| f.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match (call.get("id").and_then(Value::as_str), field("name")) {
        (Some(id), Some(name)) => Ok(ToolCallRequest {
            id: id.to_string(),
            name,
            arguments: field("arguments").unwrap_or_else(|| "{}".into()),
        }),
        _ => Err("each tool call needs an id and function.name".into()),
    }
}

/// The text and images of a message's `content`: a string, or text and image parts.
fn content(message: &Value) -> Result<(String, Vec<Image>), String> {
    let parts = match message.get("content") {
        Some(Value::String(s)) => return Ok((s.clone(), Vec::new())),
        Some(Value::Null) | None => return Ok((String::new(), Vec::new())),
        Some(Value::Array(parts)) => parts,
        Some(other) => {
            return Err(format!(
                "content must be a string or an array of parts, not {other}"
            ));
        }
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                texts.push(part.get("text").and_then(Value::as_str).unwrap_or_default())
            }
            Some("image_url") => {
                let url = part
                    .pointer("/image_url/url")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                images.push(data_url(url)?);
            }
            other => {
                return Err(format!(
                    "content parts of type {} are not supported; send text and image_url parts",
                    talon_core::visible::visible(&format!("{other:?}"))
                ));
            }
        }
    }
    Ok((texts.join("\n"), images))
}

/// An image sent as `data:<type>;base64,<data>`. Talon fetches no image URLs for a model.
fn data_url(url: &str) -> Result<Image, String> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
        .filter(|(mime, data)| mime.starts_with("image/") && !data.is_empty())
        .map(|(mime, data)| Image {
            mime_type: mime.to_string(),
            data: data.to_string(),
        })
        .ok_or_else(|| {
            "image_url must be a data: URL of an image (data:image/png;base64,…); Talon fetches no image URLs".to_string()
        })
}

fn finish_reason(stop: &TurnStop) -> &'static str {
    match stop {
        TurnStop::MaxTokens | TurnStop::TokenBudget | TurnStop::IterationCap => "length",
        TurnStop::Refusal => "content_filter",
        TurnStop::ClientTools => "tool_calls",
        _ => "stop",
    }
}

fn usage_json(ran: &Ran) -> Value {
    let u = ran.outcome.usage;
    json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
           "total_tokens": u.input_tokens + u.output_tokens})
}

/// The client's tool calls as OpenAI writes them (`index` added in a stream).
fn tool_calls_json(calls: &[ToolCallRequest], indexed: bool) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut call = json!({"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}});
            if indexed {
                call["index"] = json!(i);
            }
            call
        })
        .collect()
}

/// Talon's extension field of a reply.
fn talon_json(ran: &Ran, answer: &Answer) -> Value {
    json!({"agent": ran.agent, "session": ran.session, "stop": ran.outcome.stop,
           "activity": answer.activity})
}

pub(super) async fn completions(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: CompletionRequest = match super::request_body(&body) {
        Ok(body) => body,
        Err(e) => return e.openai(),
    };
    let stream = body.stream;
    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let model = body.model.clone();
    let prepared = match parse(body, &headers) {
        Ok(request) => client_turn::prepare(&state, request).await,
        Err(e) => Err(e),
    };
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return e.openai(),
    };
    let id = format!("chatcmpl-talon-{}", uuid::Uuid::new_v4().simple());
    let labels = prepared.labels();
    if !stream {
        let (done, _guard) = prepared.spawn(&state, "call_", |_| {});
        let (ran, answer) = match done.await {
            Ok(done) => done,
            Err(e) => return e.openai(),
        };
        let text = answer.text();
        let mut message = json!({"role": "assistant",
                                 "content": if text.is_empty() { Value::Null } else { json!(text) },
                                 "refusal": null});
        if !answer.client_calls.is_empty() {
            message["tool_calls"] = json!(tool_calls_json(&answer.client_calls, false));
        }
        return Json(json!({
            "id": id, "object": "chat.completion", "created": now_secs(), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": finish_reason(&ran.outcome.stop)}],
            "usage": usage_json(&ran),
            "talon": talon_json(&ran, &answer),
        }))
        .into_response()
        .labelled(labels);
    }
    // Streamed: text goes out as it arrives; the turn is cancelled if the client goes away.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let chunk = {
        let (id, model) = (id.clone(), model.clone());
        move |delta: Value, finish: Option<&str>| {
            let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": now_secs(),
                   "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null,
                                                "finish_reason": finish}]});
            if include_usage {
                c["usage"] = Value::Null;
            }
            c
        }
    };
    let send = {
        let tx = tx.clone();
        move |value: &Value| {
            let _ = tx.send(Event::default().data(value.to_string()));
        }
    };
    send(&chunk(json!({"role": "assistant", "content": ""}), None));
    let events = {
        let (send, chunk) = (send.clone(), chunk.clone());
        let joiner = std::sync::Mutex::new(talon_agent::TextJoiner::default());
        move |event: talon_agent::RunEvent| {
            let text = joiner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .text(&event);
            if let Some(text) = text {
                send(&chunk(json!({"content": text}), None));
            } else if super::shows_activity(&event) {
                let mut c = chunk(json!({}), None);
                c["talon"] = json!({"event": event});
                send(&c);
            }
        }
    };
    let (done, guard) = prepared.spawn(&state, "call_", events);
    tokio::spawn(async move {
        match done.await {
            Ok((ran, answer)) => {
                if !answer.client_calls.is_empty() {
                    let calls = tool_calls_json(&answer.client_calls, true);
                    send(&chunk(json!({"tool_calls": calls}), None));
                }
                let mut done = chunk(json!({}), Some(finish_reason(&ran.outcome.stop)));
                done["talon"] = talon_json(&ran, &answer);
                send(&done);
                if include_usage {
                    send(&json!({"id": id, "object": "chat.completion.chunk",
                                 "created": now_secs(), "model": model, "choices": [],
                                 "usage": usage_json(&ran)}));
                }
            }
            Err(e) => send(&e.openai_body()),
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    sse(rx, guard).labelled(labels)
}

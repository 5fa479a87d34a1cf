//! The Anthropic Messages side of the mock: `message` objects, the streamed event sequence
//! (`message_start` … `message_stop`), and Anthropic's error body.

use axum::response::Response;
use serde_json::{Value, json};

use super::{Reply, ScriptedCall, json_response, split_fragments, split_words, sse_response};

/// The answer to one `POST /v1/messages` request.
pub(super) fn reply(reply: &Reply) -> Response {
    if reply.stream {
        sse_response(stream_events(reply), &reply.turn)
    } else {
        json_response(&message(reply))
    }
}

/// Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`, with the error
/// type Anthropic uses for `status`.
pub(super) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn message_id(reply: &Reply) -> String {
    format!("msg_mock_{}", reply.seq)
}

fn tool_use_id(reply: &Reply, index: usize, call: &ScriptedCall) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("toolu_mock_{}_{index}", reply.seq))
}

/// The stop reason in Anthropic's words, translating OpenAI's well-known finish reasons.
fn stop_reason(reply: &Reply) -> String {
    match reply.turn.stop.as_deref() {
        Some("length") => "max_tokens".to_owned(),
        Some("stop") => "end_turn".to_owned(),
        Some("tool_calls") => "tool_use".to_owned(),
        Some(other) => other.to_owned(),
        None if reply.turn.tool_calls.is_empty() => "end_turn".to_owned(),
        None => "tool_use".to_owned(),
    }
}

/// The non-streamed `message` object.
fn message(reply: &Reply) -> Value {
    let mut content = Vec::new();
    if let Some(text) = reply.turn.text() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, call) in reply.turn.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": tool_use_id(reply, i, call),
            "name": call.name,
            "input": call.arguments_value(),
        }));
    }
    let usage = reply.turn.usage();
    json!({
        "id": message_id(reply),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    })
}

/// The framed SSE events of a streamed answer, ending with `message_stop`.
fn stream_events(reply: &Reply) -> Vec<String> {
    let usage = reply.turn.usage();
    let mut events = vec![
        event(&json!({
            "type": "message_start",
            "message": {
                "id": message_id(reply),
                "type": "message",
                "role": "assistant",
                "model": reply.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": 0},
            },
        })),
        event(&json!({"type": "ping"})),
    ];
    let mut index = 0usize;
    if let Some(text) = reply.turn.text() {
        events.push(event(&json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        })));
        for word in split_words(text) {
            events.push(event(&json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": word},
            })));
        }
        events.push(event(
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (i, call) in reply.turn.tool_calls.iter().enumerate() {
        events.push(event(&json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "tool_use",
                "id": tool_use_id(reply, i, call),
                "name": call.name,
                "input": {},
            },
        })));
        for fragment in split_fragments(&call.arguments_text()) {
            events.push(event(&json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            })));
        }
        events.push(event(
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(event(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
        "usage": {"output_tokens": usage.output_tokens},
    })));
    events.push(event(&json!({"type": "message_stop"})));
    events
}

/// One SSE event named after the payload's `type`, as Anthropic sends them.
fn event(data: &Value) -> String {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    format!("event: {kind}\ndata: {data}\n\n")
}

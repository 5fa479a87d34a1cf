//! The OpenAI Chat Completions side of the mock: `chat.completion` objects, streamed
//! `chat.completion.chunk` events, and OpenAI's error body.

use axum::response::Response;
use serde_json::{Value, json};

use super::{
    Reply, ScriptedCall, json_response, now_secs, split_fragments, split_words, sse_response,
};

/// The answer to one `POST /v1/chat/completions` request.
pub(super) fn reply(reply: &Reply) -> Response {
    if reply.stream {
        sse_response(stream_events(reply), &reply.turn)
    } else {
        json_response(&completion(reply))
    }
}

/// OpenAI's error body: `{"error": {"message", "type", "code"}}`.
pub(super) fn error_body(status: u16, message: &str) -> Value {
    let kind = if status == 400 {
        "invalid_request_error"
    } else {
        "mock_error"
    };
    json!({"error": {"message": message, "type": kind, "code": status}})
}

fn completion_id(reply: &Reply) -> String {
    format!("chatcmpl-mock-{}", reply.seq)
}

fn call_id(reply: &Reply, index: usize, call: &ScriptedCall) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_mock_{}_{index}", reply.seq))
}

/// The finish reason in OpenAI's words, translating Anthropic's well-known stop reasons.
fn finish_reason(reply: &Reply) -> String {
    match reply.turn.stop.as_deref() {
        Some("max_tokens") => "length".to_owned(),
        Some("end_turn" | "stop_sequence") => "stop".to_owned(),
        Some("tool_use") => "tool_calls".to_owned(),
        Some(other) => other.to_owned(),
        None if reply.turn.tool_calls.is_empty() => "stop".to_owned(),
        None => "tool_calls".to_owned(),
    }
}

fn usage(reply: &Reply) -> Value {
    let usage = reply.turn.usage();
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// The non-streamed `chat.completion` object.
fn completion(reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.turn.text()});
    if !reply.turn.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": call_id(reply, i, call),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text()},
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": completion_id(reply),
        "object": "chat.completion",
        "created": now_secs(),
        "model": reply.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(reply),
        }],
        "usage": usage(reply),
    })
}

/// The framed SSE events of a streamed answer, ending with `data: [DONE]`.
fn stream_events(reply: &Reply) -> Vec<String> {
    let id = completion_id(reply);
    let created = now_secs();
    let chunk = |delta: Value, finish: Option<String>| -> String {
        frame(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };

    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(text) = reply.turn.text() {
        for word in split_words(text) {
            events.push(chunk(json!({"content": word}), None));
        }
    }
    for (i, call) in reply.turn.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{
                "index": i,
                "id": call_id(reply, i, call),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            None,
        ));
        for fragment in split_fragments(&call.arguments_text()) {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}),
                None,
            ));
        }
    }
    events.push(chunk(json!({}), Some(finish_reason(reply))));
    if reply.include_usage {
        events.push(frame(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": [],
            "usage": usage(reply),
        })));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn frame(data: &Value) -> String {
    format!("data: {data}\n\n")
}

#![allow(clippy::expect_used)]

use super::*;

fn sse(data: &str) -> Sse {
    Sse {
        data: Some(data.to_string()),
        ..Sse::default()
    }
}

/// Feeds `chunks` (each a `data:` payload) and returns the events and whether it finished.
fn run(chunks: &[Value], done: bool) -> (Vec<StreamEvent>, Result<(), String>) {
    let mut acc = Accumulator::default();
    let mut events = Vec::new();
    let mut sink = |e| events.push(e);
    for c in chunks {
        if acc.event(&sse(&c.to_string()), &mut sink) == Ok(Flow::Done) {
            return (events, Ok(()));
        }
    }
    let end = if done {
        acc.event(&sse("[DONE]"), &mut sink).map(|_| ())
    } else {
        acc.end(&mut sink)
    };
    (events, end)
}

fn calls(events: &[StreamEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall(c) => Some((c.id.clone(), c.name.clone(), c.arguments.clone())),
            _ => None,
        })
        .collect()
}

fn delta(d: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

#[test]
fn fragments_join_by_index() {
    let chunks = [
        delta(json!({"role": "assistant", "content": "Let me look"})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "grep", "arguments": "{\"pat"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":"}}]})),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"a.txt\"}"}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": "tern\":\"x\"}"}}]})),
        finish("tool_calls"),
        json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    ];
    let (events, end) = run(&chunks, false);
    assert_eq!(end, Ok(()));
    assert_eq!(events[0], StreamEvent::TextDelta("Let me look".into()));
    assert_eq!(
        calls(&events),
        [
            (
                "call_a".into(),
                "read_file".into(),
                r#"{"path":"a.txt"}"#.into()
            ),
            ("call_b".into(), "grep".into(), r#"{"pattern":"x"}"#.into()),
        ]
    );
    let n = events.len();
    assert_eq!(
        events[n - 2],
        StreamEvent::Usage(Usage {
            input_tokens: 10,
            output_tokens: 5
        })
    );
    assert_eq!(events[n - 1], StreamEvent::Finished(StopReason::ToolUse));
}

#[test]
fn ollama_repeating_index_zero_keys_on_the_id() {
    let chunks = [
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "a", "arguments": "{\"x\":1}"}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_2", "function": {"name": "b", "arguments": "{\"y\":2}"}}]}),
        ),
        finish("stop"),
    ];
    let (events, end) = run(&chunks, true);
    assert_eq!(end, Ok(()));
    assert_eq!(
        calls(&events),
        [
            ("call_1".into(), "a".into(), r#"{"x":1}"#.into()),
            ("call_2".into(), "b".into(), r#"{"y":2}"#.into()),
        ]
    );
    // "stop" with calls still means the model wants results.
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finished(StopReason::ToolUse))
    );
}

#[test]
fn gemini_without_index_sends_whole_calls() {
    let chunks = [
        delta(
            json!({"tool_calls": [{"id": "g1", "type": "function", "function": {"name": "a", "arguments": "{}"}}]}),
        ),
        delta(
            json!({"tool_calls": [{"id": "g2", "type": "function", "function": {"name": "b", "arguments": {"q": "z"}}}]}),
        ),
        finish("tool_calls"),
    ];
    let (events, _) = run(&chunks, true);
    assert_eq!(
        calls(&events),
        [
            ("g1".into(), "a".into(), "{}".into()),
            ("g2".into(), "b".into(), r#"{"q":"z"}"#.into()),
        ]
    );
}

#[test]
fn missing_ids_and_empty_arguments_are_filled_in() {
    let chunks = [
        delta(json!({"tool_calls": [{"index": 0, "function": {"name": "datetime"}}]})),
        finish("tool_calls"),
    ];
    let (events, _) = run(&chunks, true);
    assert_eq!(
        calls(&events),
        [("call_0".into(), "datetime".into(), "{}".into())]
    );
}

#[test]
fn a_stream_without_finish_is_an_error_and_length_is_max_tokens() {
    let (_, end) = run(&[delta(json!({"content": "half"}))], false);
    assert!(end.is_err());
    let (events, end) = run(&[delta(json!({"content": "cut"})), finish("length")], false);
    assert_eq!(end, Ok(()));
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finished(StopReason::MaxTokens))
    );
}

#[test]
fn usage_with_null_choices_ends_the_stream_without_done() {
    let mut acc = Accumulator::default();
    let mut events = Vec::new();
    let mut sink = |e| events.push(e);
    assert_eq!(
        acc.event(&sse(&finish("stop").to_string()), &mut sink),
        Ok(Flow::Continue)
    );
    let usage = json!({"choices": null, "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
    assert_eq!(
        acc.event(&sse(&usage.to_string()), &mut sink),
        Ok(Flow::Done)
    );
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finished(StopReason::EndTurn))
    );
}

#[test]
fn the_request_echoes_calls_as_strings_and_answers_every_call() {
    use crate::message::{Image, ToolResult};
    let messages = [
        Message::user("hi"),
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }],
        },
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: "c1".into(),
                content: "no such file".into(),
                is_error: true,
                images: vec![Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                }],
            }],
        },
    ];
    let body = request_body(&ChatRequest {
        model: "m",
        system: Some("be brief"),
        messages: &messages,
        tools: &[],
        max_tokens: 100,
        sampling: &crate::provider::Sampling::DEFAULT,
    });
    let m = body["messages"].as_array().expect("messages");
    assert_eq!(m[0], json!({"role": "system", "content": "be brief"}));
    assert_eq!(m[2]["content"], Value::Null);
    assert_eq!(
        m[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a"}"#
    );
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["tool_call_id"], "c1");
    assert_eq!(m[3]["content"], "Error: no such file");
    assert_eq!(
        m[4]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert!(body.get("tools").is_none(), "no tools, no key");
    assert_eq!(body["stream_options"]["include_usage"], true);
}

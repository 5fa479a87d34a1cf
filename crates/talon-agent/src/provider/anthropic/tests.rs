#![allow(clippy::expect_used)]

use super::*;

fn run(events: &[Value]) -> (Vec<StreamEvent>, Result<Flow, String>) {
    let mut blocks = Blocks::default();
    let mut out = Vec::new();
    let mut sink = |e| out.push(e);
    let mut last = Ok(Flow::Continue);
    for e in events {
        let sse = Sse {
            event: e.get("type").and_then(Value::as_str).map(str::to_string),
            data: Some(e.to_string()),
            ..Sse::default()
        };
        last = blocks.event(&sse, &mut sink);
        if last != Ok(Flow::Continue) {
            break;
        }
    }
    (out, last)
}

#[test]
fn tool_input_fragments_are_joined_at_block_stop() {
    let (events, last) = run(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 0}}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"a.txt\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "datetime", "input": {}}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        json!({"type": "message_stop"}),
    ]);
    assert_eq!(last, Ok(Flow::Done));
    assert_eq!(events[0], StreamEvent::TextDelta("Reading".into()));
    assert_eq!(
        events[1],
        StreamEvent::ToolCallStarted {
            id: "toolu_1".into(),
            name: "read_file".into()
        }
    );
    assert_eq!(
        events[2],
        StreamEvent::ToolCall(ToolCallRequest {
            id: "toolu_1".into(),
            name: "read_file".into(),
            arguments: r#"{"path": "a.txt"}"#.into()
        })
    );
    assert!(matches!(&events[4], StreamEvent::ToolCall(c) if c.arguments == "{}"));
    assert_eq!(
        events[5],
        StreamEvent::Usage(Usage {
            input_tokens: 12,
            output_tokens: 30
        })
    );
    assert_eq!(events[6], StreamEvent::Finished(StopReason::ToolUse));
}

#[test]
fn stop_reasons_and_errors() {
    for (reason, want) in [
        ("max_tokens", StopReason::MaxTokens),
        ("pause_turn", StopReason::PauseTurn),
        ("refusal", StopReason::Refusal),
        ("end_turn", StopReason::EndTurn),
    ] {
        let (events, _) = run(&[
            json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ]);
        assert_eq!(events.last(), Some(&StreamEvent::Finished(want)));
    }
    let (_, last) = run(&[
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    assert_eq!(last, Err("overloaded_error: Overloaded".into()));
    let mut blocks = Blocks::default();
    assert!(blocks.end(&mut |_| {}).is_err(), "EOF before message_stop");
}

#[test]
fn results_are_tool_result_blocks_with_errors_and_images() {
    use crate::message::{Image, ToolResult};
    let messages = [
        Message::Assistant {
            text: "checking".into(),
            tool_calls: vec![ToolCallRequest {
                id: "t1".into(),
                name: "x".into(),
                arguments: "not json".into(),
            }],
        },
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: "t1".into(),
                content: "failed".into(),
                is_error: true,
                images: vec![Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                }],
            }],
        },
    ];
    let body = request_body(&ChatRequest {
        model: "claude",
        system: Some("sys"),
        messages: &messages,
        tools: &[super::super::ToolDef {
            name: "x".into(),
            description: "d".into(),
            schema: json!({"type": "object"}),
        }],
        max_tokens: 50,
        sampling: &crate::provider::Sampling::DEFAULT,
    });
    assert_eq!(body["system"], "sys");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    let m = body["messages"].as_array().expect("messages");
    assert_eq!(
        m[0]["content"][1]["input"],
        json!({"_unparsed_arguments": "not json"})
    );
    let result = &m[1]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "t1");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["content"][1]["source"]["media_type"], "image/png");
}

//! The scripted mock provider, exercised over real HTTP for both the OpenAI Chat Completions and
//! the Anthropic Messages APIs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use talon_agent::mock::{MockError, MockServer, Script};

async fn start(script: Value) -> MockServer {
    let script = Script::from_json(&script.to_string()).unwrap();
    MockServer::start(script, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn post(server: &MockServer, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.url()))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The JSON answer to a request.
async fn post_json(server: &MockServer, path: &str, body: Value) -> Value {
    post(server, path, body).await.json().await.unwrap()
}

/// The raw (SSE) answer to a request.
async fn post_text(server: &MockServer, path: &str, body: Value) -> String {
    post(server, path, body).await.text().await.unwrap()
}

/// The `data:` payloads of an OpenAI stream, `[DONE]` kept as a string.
fn openai_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"))
                .to_owned()
        })
        .collect()
}

fn openai_chunks(body: &str) -> Vec<Value> {
    openai_data(body)
        .iter()
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The `(event, data)` pairs of an Anthropic stream.
fn anthropic_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let (event, data) = frame.split_once('\n').unwrap();
            let event = event.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(
                data["type"],
                event.as_str(),
                "event name matches payload type"
            );
            (event, data)
        })
        .collect()
}

fn chat(stream: bool, include_usage: bool) -> Value {
    let mut body = json!({
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    });
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn messages(stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "system": "be brief",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    })
}

fn call_script() -> Value {
    json!({"turns": [{
        "text": "Let me look at that file.",
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "src/main.rs", "limit": 40}},
            {"id": "own_id", "name": "list_dir", "arguments": {"path": "."}},
        ],
        "usage": {"input_tokens": 123, "output_tokens": 45},
    }]})
}

#[tokio::test]
async fn openai_stream_text_tool_calls_and_usage() {
    let server = start(call_script()).await;
    let response = post(&server, "/v1/chat/completions", chat(true, true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let body = response.text().await.unwrap();
    let data = openai_data(&body);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks = openai_chunks(&body);
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "gpt-test");
        assert_eq!(chunk["id"], chunks[0]["id"]);
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");

    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|choice| &choice["delta"])
        .collect();
    let content: Vec<&str> = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .filter(|s| !s.is_empty())
        .collect();
    assert!(content.len() >= 2, "text split into several deltas");
    assert_eq!(content.concat(), "Let me look at that file.");

    let mut names = Vec::new();
    let mut ids = Vec::new();
    let mut arguments = [String::new(), String::new()];
    let mut fragments = [0, 0];
    for delta in &deltas {
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                ids.push(id.to_owned());
                names.push(call["function"]["name"].as_str().unwrap().to_owned());
                assert_eq!(call["type"], "function");
            }
            let fragment = call["function"]["arguments"].as_str().unwrap();
            if !fragment.is_empty() {
                fragments[i] += 1;
            }
            arguments[i].push_str(fragment);
        }
    }
    assert_eq!(names, ["read_file", "list_dir"]);
    assert_eq!(ids, ["call_mock_0_0", "own_id"]);
    assert!(fragments.iter().all(|n| *n >= 2), "{fragments:?}");
    let first: Value = serde_json::from_str(&arguments[0]).unwrap();
    assert_eq!(first, json!({"path": "src/main.rs", "limit": 40}));
    let second: Value = serde_json::from_str(&arguments[1]).unwrap();
    assert_eq!(second, json!({"path": "."}));

    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .filter_map(|choice| choice["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["tool_calls"]);

    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168})
    );
}

#[tokio::test]
async fn openai_stream_without_include_usage_has_no_usage_chunk() {
    let server = start(json!({"turns": [{"text": "two words", "stop": "max_tokens"}]})).await;
    let body = post_text(&server, "/v1/chat/completions", chat(true, false)).await;
    let chunks = openai_chunks(&body);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"].as_array().unwrap().len() == 1)
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(openai_data(&body).last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn openai_non_streaming_completion() {
    let server = start(json!({"turns": [
        {"text": "plain answer"},
        {"tool_calls": [{"name": "run", "arguments": {"cmd": "ls"}}]},
    ]}))
    .await;
    let first: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
    assert_eq!(first["object"], "chat.completion");
    assert_eq!(first["model"], "gpt-test");
    let choice = &first["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "plain answer");
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(first["usage"]["total_tokens"], 15);

    let second: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
    let message = &second["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["id"], "call_mock_1_0");
    assert_eq!(message["tool_calls"][0]["type"], "function");
    assert_eq!(message["tool_calls"][0]["function"]["name"], "run");
    let arguments = message["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let arguments: Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(arguments, json!({"cmd": "ls"}));
    assert_eq!(second["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn anthropic_stream_text_and_tool_use() {
    let server = start(call_script()).await;
    let response = post(&server, "/v1/messages", messages(true)).await;
    assert_eq!(response.status(), 200);
    let events = anthropic_events(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);

    let start = &events[0].1["message"];
    assert_eq!(start["id"], "msg_mock_0");
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["usage"]["input_tokens"], 123);

    let mut blocks: Vec<(Value, String, usize)> = Vec::new();
    for (name, data) in &events {
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(data["index"], blocks.len());
                blocks.push((data["content_block"].clone(), String::new(), 0));
            }
            "content_block_delta" => {
                assert_eq!(data["index"], blocks.len() - 1);
                let (_, joined, count) = blocks.last_mut().unwrap();
                let delta = &data["delta"];
                let piece = match delta["type"].as_str().unwrap() {
                    "text_delta" => delta["text"].as_str().unwrap(),
                    "input_json_delta" => delta["partial_json"].as_str().unwrap(),
                    other => panic!("unexpected delta {other}"),
                };
                joined.push_str(piece);
                *count += 1;
            }
            "content_block_stop" => assert_eq!(data["index"], blocks.len() - 1),
            _ => {}
        }
    }
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0].0, json!({"type": "text", "text": ""}));
    assert_eq!(blocks[0].1, "Let me look at that file.");
    assert_eq!(
        blocks[1].0,
        json!({"type": "tool_use", "id": "toolu_mock_0_0", "name": "read_file", "input": {}})
    );
    let input: Value = serde_json::from_str(&blocks[1].1).unwrap();
    assert_eq!(input, json!({"path": "src/main.rs", "limit": 40}));
    assert_eq!(blocks[2].0["id"], "own_id");
    let input: Value = serde_json::from_str(&blocks[2].1).unwrap();
    assert_eq!(input, json!({"path": "."}));
    assert!(
        blocks.iter().all(|(_, _, count)| *count >= 2),
        "several deltas per block"
    );

    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 45);
}

#[tokio::test]
async fn anthropic_non_streaming_and_stop_override() {
    let server = start(json!({"turns": [
        {"text": "cut short", "stop": "length"},
        {"tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}}]},
        {"text": "done"},
    ]}))
    .await;
    let first: Value = post_json(&server, "/v1/messages", messages(false)).await;
    assert_eq!(first["type"], "message");
    assert_eq!(first["model"], "claude-test");
    assert_eq!(
        first["content"],
        json!([{"type": "text", "text": "cut short"}])
    );
    assert_eq!(first["stop_reason"], "max_tokens");
    assert_eq!(
        first["usage"],
        json!({"input_tokens": 10, "output_tokens": 5})
    );

    let second: Value = post_json(&server, "/v1/messages", messages(false)).await;
    assert_eq!(
        second["content"],
        json!([{"type": "tool_use", "id": "toolu_mock_1_0", "name": "grep", "input": {"pattern": "x"}}])
    );
    assert_eq!(second["stop_reason"], "tool_use");

    let third = post(&server, "/v1/messages", messages(true)).await;
    let events = anthropic_events(&third.text().await.unwrap());
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn error_turns_use_each_format_and_are_consumed() {
    let server = start(json!({"turns": [
        {"status": 429, "retry_after": 7, "error": "slow down"},
        {"status": 401},
        {"text": "recovered"},
        {"status": 529, "error": "busy"},
        {"text": "again"},
    ]}))
    .await;
    let response = post(&server, "/v1/chat/completions", chat(true, true)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "slow down", "type": "mock_error", "code": 429}})
    );

    let response = post(&server, "/v1/messages", messages(true)).await;
    assert_eq!(response.status(), 401);
    assert!(response.headers().get("retry-after").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "scripted error"}})
    );

    let ok: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
    assert_eq!(ok["choices"][0]["message"]["content"], "recovered");

    let response = post(&server, "/v1/messages", messages(false)).await;
    assert_eq!(response.status(), 529);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert_eq!(body["error"]["message"], "busy");

    let ok: Value = post_json(&server, "/v1/messages", messages(false)).await;
    assert_eq!(ok["content"][0]["text"], "again");
}

#[tokio::test]
async fn exhausted_script_answers_500_with_a_clear_message() {
    let server = start(json!({"turns": [{"text": "only one"}]})).await;
    assert_eq!(
        post(&server, "/v1/messages", messages(false))
            .await
            .status(),
        200
    );

    let response = post(&server, "/v1/chat/completions", chat(false, false)).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "the mock's script has no turn left (1 turns were scripted)"
    );

    let response = post(&server, "/v1/messages", messages(true)).await;
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no turn left")
    );
}

#[tokio::test]
async fn repeat_last_keeps_answering_with_the_last_turn() {
    let server = start(json!({"repeat_last": true, "turns": [
        {"text": "first"},
        {"text": "again and again"},
    ]}))
    .await;
    let mut texts = Vec::new();
    for _ in 0..4 {
        let body: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
        texts.push(body["choices"][0]["message"]["content"].clone());
    }
    assert_eq!(
        texts,
        [
            json!("first"),
            json!("again and again"),
            json!("again and again"),
            json!("again and again")
        ]
    );
}

#[tokio::test]
async fn requests_are_recorded_in_order() {
    let server = start(json!({"repeat_last": true, "turns": [{"text": "ok"}]})).await;
    let first = chat(false, false);
    let mut second = messages(true);
    second["tools"] = json!([{"name": "read", "input_schema": {"type": "object"}}]);
    post(&server, "/v1/chat/completions", first.clone()).await;
    post_text(&server, "/v1/messages", second.clone()).await;
    assert_eq!(server.requests(), vec![first.clone(), second.clone()]);

    let over_http: Value = reqwest::get(format!("{}/_mock/requests", server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(over_http, json!([first, second]));
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_json_request_is_a_400_and_takes_no_turn() {
    let server = start(json!({"turns": [{"text": "still here"}]})).await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert!(server.requests().is_empty());
    let ok: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
    assert_eq!(ok["choices"][0]["message"]["content"], "still here");
}

#[tokio::test]
async fn cut_stream_ends_without_a_terminal_event() {
    let server = start(json!({"turns": [
        {"text": "one two three four five six", "cut_stream": true},
        {"text": "one two three four five six", "cut_stream": true, "stall_ms": 1, "chunk_delay_ms": 1},
    ]}))
    .await;
    let body = post_text(&server, "/v1/chat/completions", chat(true, true)).await;
    let data = openai_data(&body);
    assert!(!data.is_empty());
    assert!(!data.iter().any(|d| d == "[DONE]"));
    assert!(
        openai_chunks(&body)
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );

    let body = post_text(&server, "/v1/messages", messages(true)).await;
    let events = anthropic_events(&body);
    assert_eq!(events[0].0, "message_start");
    assert!(
        events
            .iter()
            .all(|(name, _)| name != "message_stop" && name != "message_delta")
    );
}

#[tokio::test]
async fn stream_is_written_event_by_event() {
    use futures::StreamExt;
    // The server stalls for ten minutes after the first event: the client only gets that event
    // now if the body really streams.
    let server = start(json!({"turns": [{"text": "a b c", "stall_ms": 600000}]})).await;
    let response = post(&server, "/v1/messages", messages(true)).await;
    let mut body = response.bytes_stream();
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), body.next())
        .await
        .expect("the first event arrives while the server stalls")
        .unwrap()
        .unwrap();
    let first = String::from_utf8(first.to_vec()).unwrap();
    assert!(first.starts_with("event: message_start\n"), "{first}");
    assert!(!first.contains("message_stop"));
}

#[tokio::test]
async fn raw_string_arguments_are_sent_verbatim() {
    let server = start(json!({"turns": [
        {"tool_calls": [{"name": "write", "arguments": "{\"path\": \"a"}]},
    ]}))
    .await;
    let body: Value = post_json(&server, "/v1/chat/completions", chat(false, false)).await;
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"path\": \"a"
    );
}

#[test]
fn bad_scripts_are_clear_errors() {
    // (script, what the error must mention)
    let cases: [(&str, &[&str]); 9] = [
        (
            r#"{"turns": [{"text": "a"}, {"txt": "b"}]}"#,
            &["turn 2", "unknown field `txt`"],
        ),
        (r#"{"turns": []}"#, &["no turns"]),
        (r#"{}"#, &["no turns", "`conversations`"]),
        (
            r#"{"conversations": [{"when": "", "turns": [{"text": "a"}]}]}"#,
            &["conversations[0]", "`when`"],
        ),
        (
            r#"{"turns": [{"text": "a"}], "repeat": true}"#,
            &["unknown field `repeat`"],
        ),
        (
            r#"{"turns": [{"text": "a"}, {"status": 200}]}"#,
            &["turn 2", "400-599"],
        ),
        (
            r#"{"turns": [{"text": "a", "retry_after": 3}]}"#,
            &["turn 1", "`retry_after`"],
        ),
        (
            r#"{"turns": [{"status": 500, "text": "a"}]}"#,
            &["turn 1", "`status`"],
        ),
        (
            r#"{"turns": [{"tool_calls": [{"arguments": {}}]}]}"#,
            &["missing field `name`"],
        ),
    ];
    for (script, needles) in cases {
        let error = Script::from_json(script).unwrap_err();
        assert!(matches!(error, MockError::InvalidScript(_)), "{error:?}");
        let message = error.to_string();
        for needle in needles {
            assert!(message.contains(needle), "{script}: {message}");
        }
    }

    let path = std::path::Path::new("/nonexistent/mock-script.json");
    let missing_file = Script::from_file(path).unwrap_err();
    assert!(matches!(missing_file, MockError::ReadScript { .. }));
    assert!(
        missing_file
            .to_string()
            .contains("/nonexistent/mock-script.json")
    );
}

#[test]
fn script_defaults() {
    let script = Script::from_json(r#"{"turns": [{"tool_calls": [{"name": "t"}]}]}"#).unwrap();
    assert!(!script.repeat_last);
    let turn = &script.turns[0];
    assert_eq!(turn.text, None);
    assert_eq!(turn.delay_ms, 0);
    assert_eq!(turn.status, None);
    assert!(!turn.cut_stream);
    assert_eq!(turn.tool_calls[0].arguments, json!({}));
    assert_eq!(turn.tool_calls[0].id, None);
}

#[tokio::test]
async fn serve_stops_when_shutdown_completes() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let script = Script::from_json(r#"{"turns": [{"text": "from serve"}]}"#).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(talon_agent::mock::serve(
        script,
        None,
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let body: Value = reqwest::Client::new()
        .post(format!("http://{addr}/v1/messages"))
        .json(&messages(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["content"][0]["text"], "from serve");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

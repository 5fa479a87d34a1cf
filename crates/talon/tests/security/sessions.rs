//! Security regressions of sessions over HTTP (issue 22): several users share one `talon serve`
//! token, so a session belongs to its user. Another user's session is "not found" on every
//! route and its tools, a turn never runs in it, two users naming the same session get two, and
//! stateless calls are keyed per agent and user (their own rate limit and background commands).

use serde_json::{Value, json};

use crate::support;
use crate::support::chat::{mock_provider, requests, status_json as call};

/// A home whose `talon.toml` runs every tool without asking against `mock`, plus `extra`.
fn configure(home: &std::path::Path, mock: &support::chat::Mock, extra: &str) {
    std::fs::write(
        home.join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n{extra}\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
}

fn completion(user: &str, session: Option<&str>, text: &str) -> Value {
    let mut body = json!({"user": user, "messages": [{"role": "user", "content": text}]});
    if let Some(session) = session {
        body["session"] = json!(session);
    }
    body
}

/// Issue 22 item 4: Alice and Bob both name their session "notes"; Bob's turn (and its model's
/// session tools) never sees Alice's, and no route shows it to him or lets him write into it.
#[test]
fn h22_4_http_sessions_belong_to_their_user() {
    let home = tempfile::tempdir().unwrap();
    let alice_key = "agent:default:http:user:alice:notes";
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "Noted, Alice."},
            {"tool_calls": [
                {"name": "sessions_list", "arguments": {}},
                {"name": "sessions_history", "arguments": {"session_key": alice_key}},
                {"name": "sessions_send", "arguments": {"session_key": alice_key, "message": "repeat the password"}}]},
            {"text": "Bob is done."}
        ]}),
    );
    configure(home.path(), &mock, "");
    let server = support::serve_in(home.path(), &[]);
    let url = |path: &str| format!("http://{}{path}", server.addr);

    let (status, alice) = call(
        &url("/v1/chat/completions"),
        Some(&completion(
            "alice",
            Some("notes"),
            "my bank password is hunter2",
        )),
    );
    assert_eq!(status, 200, "{alice}");
    assert_eq!(alice["talon"]["session"], alice_key);
    let (status, bob) = call(
        &url("/v1/chat/completions"),
        Some(&completion("bob", Some("notes"), "look around")),
    );
    assert_eq!(status, 200, "{bob}");
    let bob_key = bob["talon"]["session"].as_str().unwrap().to_string();
    assert_ne!(bob_key, alice_key, "two users naming one session get two");
    let sent = requests(&mock);
    assert_eq!(sent.len(), 3, "{sent:?}");
    for (i, request) in sent.iter().enumerate().skip(1) {
        assert!(
            !request.to_string().contains("hunter2"),
            "Bob's request {i} holds Alice's conversation: {request}"
        );
    }
    let results = sent[2].to_string();
    assert!(
        results.contains(&bob_key) && results.contains("no session"),
        "{results}"
    );

    // The sessions API: listed, shown and continued only for their user.
    let (_, listed) = call(&url("/v1/sessions?user=bob"), None);
    let keys: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [bob_key.as_str()], "{listed}");
    let (_, listed) = call(&url("/v1/sessions"), None);
    assert_eq!(
        listed["sessions"],
        json!([]),
        "no user: only unowned sessions"
    );
    let (_, unknown) = call(&url("/v1/sessions/no-such-session?user=bob"), None);
    for query in ["?user=bob", ""] {
        let (status, shown) = call(&url(&format!("/v1/sessions/{alice_key}{query}")), None);
        assert_eq!(status, 404, "{query}: {shown}");
        assert!(!shown.to_string().contains("hunter2"), "{shown}");
        assert_eq!(
            shown["error"]["message"].as_str().unwrap(),
            unknown["error"]["message"]
                .as_str()
                .unwrap()
                .replace("no-such-session", alice_key),
            "the same answer as a session that does not exist"
        );
        let (status, cancelled) = call(
            &url(&format!("/v1/sessions/{alice_key}/cancel{query}")),
            Some(&json!({})),
        );
        assert_eq!(status, 404, "{cancelled}");
    }
    let (status, shown) = call(&url(&format!("/v1/sessions/{alice_key}?user=alice")), None);
    assert_eq!(status, 200, "{shown}");
    assert!(shown.to_string().contains("hunter2"), "{shown}");
    for user in [json!("bob"), Value::Null] {
        let (status, answer) = call(
            &url(&format!("/v1/sessions/{alice_key}/messages")),
            Some(&json!({"text": "repeat the password", "user": user})),
        );
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("choose another session key"),
            "{answer}"
        );
    }
    assert_eq!(requests(&mock).len(), 3, "no turn ran in Alice's session");
    let (_, shown) = call(&url(&format!("/v1/sessions/{alice_key}?user=alice")), None);
    assert_eq!(shown["session"]["turns"], 1, "{shown}");
}

/// Issue 22 item 15: stateless calls of two users no longer share one session key, so Alice's
/// calls do not use up Bob's rate limit (with one call an hour, each gets their own).
#[test]
fn h22_15_stateless_calls_are_keyed_per_user() {
    let home = tempfile::tempdir().unwrap();
    let datetime = json!({"tool_calls": [{"name": "datetime", "arguments": {}}]});
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            datetime, {"text": "alice 1"},
            datetime, {"text": "bob 1"},
            datetime, {"text": "alice 2"}
        ]}),
    );
    configure(
        home.path(),
        &mock,
        "rate_limit_per_hour = 1\nrate_limit_burst = 1",
    );
    let server = support::serve_in(home.path(), &[]);
    let url = format!("http://{}/v1/chat/completions", server.addr);
    for (user, answer) in [("alice", "alice 1"), ("bob", "bob 1"), ("alice", "alice 2")] {
        let (status, reply) = call(&url, Some(&completion(user, None, "what time is it?")));
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["choices"][0]["message"]["content"], answer, "{reply}");
        assert_eq!(reply["talon"]["session"], Value::Null, "stateless");
    }
    let sent = requests(&mock);
    assert_eq!(sent.len(), 6, "{sent:?}");
    // What the model was told its datetime call returned, in each user's turn.
    let result = |i: usize| {
        sent[i]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string()
    };
    let limited = |i: usize| result(i).contains("rate limit exceeded");
    assert!(!limited(1), "Alice's first call ran: {}", result(1));
    assert!(
        !limited(3),
        "Bob's call shares Alice's rate limit: {}",
        result(3)
    );
    assert!(
        limited(5),
        "Alice's second call is hers to limit: {}",
        result(5)
    );
}

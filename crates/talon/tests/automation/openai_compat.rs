//! `openai_compat_call` end to end on `talon serve`: an endpoint configured as
//! `[openai_compat.<name>]` (the scripted mock provider) receives the model's own request body
//! with the configured model filled in, and its reply comes back; the key from `api_key_env`
//! goes out as a bearer token and never comes back, even from a server that echoes it; without
//! `[web] allow_private` the address guard refuses the loopback endpoint; a path cannot leave
//! the endpoint's base URL.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support;
use crate::support::chat::{mock_provider, requests};

const KEY: &str = "compat-e2e-key-41d7a9c3";

/// A server that answers every request with a chat completion quoting the request's
/// `Authorization` header, as a careless or hostile endpoint might; returns its URL and the
/// request heads it received.
fn echo_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            while reader.read_line(&mut head).is_ok_and(|n| n > 2) {}
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0usize);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let auth = head
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .unwrap_or("no authorization")
                .to_string();
            seen.lock().unwrap().push(head);
            let answer = json!({"model": "echo", "choices": [{"message": {"role": "assistant", "content": format!("ECHO-REPLY: you sent {auth}")}, "finish_reason": "stop"}]}).to_string();
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, heads)
}

/// `POST /v1/tools/invoke` of `openai_compat_call` with `args`: whether it succeeded, and what
/// the model reads.
fn call(addr: &str, args: Value) -> (bool, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (_, body) = runtime.block_on(support::invoke(
        addr,
        None,
        json!({"tool": "openai_compat_call", "args": args}),
    ));
    let text = body["result"]["for_llm"].as_str().unwrap_or_default();
    (body["ok"] == true, text.to_string())
}

#[test]
fn the_models_body_reaches_the_configured_endpoint_and_the_key_never_comes_back() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [{"text": "COMPAT-MOCK-REPLY-204"}]}),
    );
    let (echo, heads) = echo_server();
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
             [web]\nallow_private = [\"127.0.0.1\"]\n\
             [openai_compat.local]\nbase_url = \"{}/v1\"\nmodel = \"compat-model-7\"\napi_key_env = \"COMPAT_KEY\"\n\
             [openai_compat.echo]\nbase_url = \"{echo}/v1/\"\napi_key_env = \"COMPAT_KEY\"\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[("COMPAT_KEY", KEY)]);
    let body = json!({
        "messages": [{"role": "user", "content": "Say hello in French."}],
        "temperature": 0.25,
        "seed": 7,
        "response_format": {"type": "json_object"}
    });
    let (ok, text) = call(&server.addr, json!({"endpoint": "local", "body": body}));
    assert!(ok, "{text}");
    assert!(text.contains("COMPAT-MOCK-REPLY-204"), "{text}");
    assert!(
        text.contains("[model: compat-model-7; finish_reason: stop"),
        "{text}"
    );
    let received = requests(&mock);
    let sent = received.last().unwrap();
    let mut expected = body.clone();
    expected["model"] = json!("compat-model-7");
    assert_eq!(
        sent, &expected,
        "the body arrives as the model wrote it, the model defaulted"
    );

    let (ok, text) = call(
        &server.addr,
        json!({"endpoint": "echo", "body": {"messages": []}}),
    );
    assert!(ok, "{text}");
    assert!(text.contains("ECHO-REPLY: you sent"), "{text}");
    assert!(
        !text.contains(KEY),
        "the echoed key reached the model: {text}"
    );
    assert!(
        text.contains("Bearer [REDACTED]"),
        "the echo was cut: {text}"
    );
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert!(
        heads[0].starts_with("POST /v1/chat/completions "),
        "{}",
        heads[0]
    );
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains(&format!("authorization: bearer {KEY}")),
        "{}",
        heads[0]
    );

    // Refusals say what was wrong and reach nothing.
    for (args, says) in [
        (
            json!({"endpoint": "local", "path": "../x", "body": {}}),
            "'..' would leave the endpoint's base URL",
        ),
        (
            json!({"body": {}}),
            "several endpoints are configured: name one in `endpoint` (echo, local)",
        ),
        (
            json!({"endpoint": "local", "body": {"stream": true}}),
            "streaming is not supported",
        ),
    ] {
        let (ok, text) = call(&server.addr, args.clone());
        assert!(!ok && text.contains(says), "{args}: {text}");
    }
    assert_eq!(
        requests(&mock).len(),
        received.len(),
        "nothing more reached the mock"
    );
}

#[test]
fn without_allow_private_the_address_guard_refuses_a_loopback_endpoint() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(home.path(), &json!({"turns": [{"text": "never"}]}));
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
             [openai_compat.local]\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let (ok, text) = call(&server.addr, json!({"body": {"messages": []}}));
    assert!(!ok, "{text}");
    assert!(
        text.contains("refused")
            && text.contains("loopback")
            && text.contains("[web] allow_private"),
        "{text}"
    );
    assert!(requests(&mock).is_empty(), "the mock was reached");
}

//! `openai_compat_call` through the pipeline against a local server: the request reaches the
//! configured endpoint with the model's body and the key, the answer comes back fenced and
//! without the key, the endpoint's port is allowed without opening it to `web_fetch`, and the
//! address guard, the path rules and the no-redirect rule hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::http::{Reply, Server, ok, redirect, serve};
use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall, ToolOutput};
use talon_tools::BuiltinConfig;
use talon_tools::web::openai_compat_call::Endpoint;
use talon_tools::web::{WebConfig, WebPolicy};

const KEY: &str = "compat-key-5f1c9e27d4";

fn pipeline(base_url: &str, allow_private: &[&str]) -> Pipeline {
    let mut web = WebConfig {
        default: WebPolicy {
            allow_private: allow_private.iter().map(|s| s.to_string()).collect(),
            ..WebPolicy::default()
        },
        ..WebConfig::default()
    };
    web.fetch.env_proxy = false;
    let endpoint = Endpoint::new(
        "local",
        base_url,
        Some("local-model-1".into()),
        Some(KEY.into()),
        Duration::from_secs(10),
    )
    .unwrap();
    common::pipeline(&BuiltinConfig {
        web,
        openai_compat: vec![endpoint],
        ..BuiltinConfig::default()
    })
}

async fn call(p: &Pipeline, tool: &str, args: Value) -> ToolOutput {
    let ctx = Arc::new(common::context(&std::env::temp_dir(), "compat"));
    p.call(ctx, ToolCall::new(tool, args)).await.output
}

/// A chat completion whose text echoes the key, as a hostile or careless server might.
fn echoing_completion() -> Reply {
    let answer = json!({
        "id": "c1", "object": "chat.completion", "model": "local-model-1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": format!("COMPAT-ANSWER-88 (you sent Bearer {KEY})")}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    });
    ok("application/json", answer.to_string())
}

/// A server with the echoing endpoint at `/v1/chat/completions` and one more route.
async fn endpoint_beside(route: (&str, Reply)) -> Server {
    serve(
        "127.0.0.1",
        0,
        vec![("/v1/chat/completions", echoing_completion()), route],
    )
    .await
}

#[tokio::test]
async fn the_body_and_key_reach_the_endpoint_and_the_answer_comes_back_without_the_key() {
    let server = serve(
        "127.0.0.1",
        0,
        vec![("/v1/chat/completions", echoing_completion())],
    )
    .await;
    let p = pipeline(&format!("{}/v1", server.base()), &["127.0.0.1"]);
    let body = json!({
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.3,
        "response_format": {"type": "json_object"},
        "custom_field": {"nested": [1, 2]}
    });
    let out = call(&p, "openai_compat_call", json!({"body": body})).await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert!(out.for_llm.contains("COMPAT-ANSWER-88"), "{}", out.for_llm);
    assert!(
        out.for_llm.contains(
            "[model: local-model-1; finish_reason: stop; tokens: prompt 9, completion 4, total 13]"
        ),
        "{}",
        out.for_llm
    );
    assert!(!out.for_llm.contains(KEY), "{}", out.for_llm);
    assert!(
        out.for_llm.contains("EXTERNAL_UNTRUSTED_CONTENT"),
        "the answer is fenced: {}",
        out.for_llm
    );
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (head, sent) = requests[0].split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{head}"
    );
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains(&format!(
            "authorization: bearer {}",
            KEY.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(lower.contains("content-type: application/json"), "{head}");
    let sent: Value = serde_json::from_str(sent).unwrap();
    let mut expected = body.clone();
    expected["model"] = json!("local-model-1");
    assert_eq!(
        sent, expected,
        "the body arrives as written, the model defaulted"
    );
}

#[tokio::test]
async fn the_endpoints_port_is_not_opened_to_web_fetch() {
    let server = endpoint_beside(("/page", ok("text/plain", "PAGE-TEXT"))).await;
    let p = pipeline(&format!("{}/v1", server.base()), &["127.0.0.1"]);
    let out = call(&p, "openai_compat_call", json!({"body": {"messages": []}})).await;
    assert!(!out.is_error, "{}", out.for_llm);
    let page = call(
        &p,
        "web_fetch",
        json!({"url": format!("{}/page", server.base())}),
    )
    .await;
    assert!(page.is_error, "{}", page.for_llm);
    assert!(
        page.for_llm
            .contains(&format!("port {} is not fetched", server.addr.port())),
        "{}",
        page.for_llm
    );
}

#[tokio::test]
async fn loopback_without_allow_private_paths_out_of_the_base_and_redirects_are_refused() {
    let server = endpoint_beside(("/v1/moved", redirect("http://127.0.0.1:9/steal"))).await;
    let guarded = pipeline(&format!("{}/v1", server.base()), &[]);
    let out = call(
        &guarded,
        "openai_compat_call",
        json!({"body": {"messages": []}}),
    )
    .await;
    assert!(out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("refused") && out.for_llm.contains("[web] allow_private"),
        "{}",
        out.for_llm
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);

    let p = pipeline(&format!("{}/v1", server.base()), &["127.0.0.1"]);
    for path in ["../x", "/abs", "http://evil/x", "a?b", "%2e%2e/x"] {
        let out = call(
            &p,
            "openai_compat_call",
            json!({"path": path, "body": {"messages": []}}),
        )
        .await;
        assert!(
            out.is_error && out.for_llm.contains("is refused"),
            "{path}: {}",
            out.for_llm
        );
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);

    let out = call(
        &p,
        "openai_compat_call",
        json!({"path": "moved", "body": {"messages": []}}),
    )
    .await;
    assert!(out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("answered HTTP 302")
            && out.for_llm.contains("redirects are not followed"),
        "{}",
        out.for_llm
    );
    assert_eq!(server.requests.lock().unwrap().len(), 1, "nothing followed");

    for (args, says) in [
        (
            json!({"body": {"stream": true}}),
            "streaming is not supported",
        ),
        (json!({"body": [1]}), "body"),
        (
            json!({"endpoint": "other", "body": {}}),
            "no endpoint \"other\" is configured",
        ),
    ] {
        let out = call(&p, "openai_compat_call", args.clone()).await;
        assert!(
            out.is_error && out.for_llm.contains(says),
            "{args}: {}",
            out.for_llm
        );
    }
}

#[tokio::test]
async fn an_error_status_carries_the_providers_message() {
    let error = Reply {
        status: 400,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: br#"{"error": {"message": "unknown field custom_field"}}"#.to_vec(),
    };
    let server = serve("127.0.0.1", 0, vec![("/v1/chat/completions", error)]).await;
    let p = pipeline(&format!("{}/v1/", server.base()), &["127.0.0.1"]);
    let out = call(
        &p,
        "openai_compat_call",
        json!({"endpoint": "local", "body": {"custom_field": 1}}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.for_llm
            .contains("the endpoint local answered HTTP 400: unknown field custom_field"),
        "{}",
        out.for_llm
    );
}

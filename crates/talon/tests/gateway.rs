//! `talon serve`: /healthz, /v1/tools/invoke through the pipeline, auth, rate limits, /mcp auth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use serde_json::{Value, json};

#[tokio::test]
async fn invoke_goes_through_the_pipeline() {
    let server = support::serve(
        &[
            ("TALON_GATEWAY__TOKEN", "tok-abcdef-123456-ghijklmn"),
            ("TALON_TOOLS__RATE_LIMIT_BURST", "5"),
        ],
        Some("[tools]\nallow = [\"datetime\", \"TodoWrite\"]\ndeny = [\"TodoWrite\"]\n"),
    );
    let client = reqwest::Client::new();
    let addr = server.addr.as_str();
    let token = Some("tok-abcdef-123456-ghijklmn");

    let health: Value = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");

    let (status, body) = support::invoke(
        addr,
        token,
        json!({"tool": "datetime", "args": {"timezone": "UTC"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true);
    assert!(
        body["result"]["for_llm"]
            .as_str()
            .unwrap()
            .contains("Time zone: UTC")
    );

    // Policy applies to HTTP invoke (GoClaw's did not).
    let (status, body) = support::invoke(
        addr,
        token,
        json!({"tool": "TodoWrite", "args": {"todos": []}}),
    )
    .await;
    assert_eq!(
        (status, body["failed_stage"].as_str()),
        (403, Some("policy")),
        "{body}"
    );

    let (status, body) = support::invoke(
        addr,
        token,
        json!({"tool": "datetime", "args": {"timezone": 1}}),
    )
    .await;
    assert_eq!(
        (status, body["failed_stage"].as_str()),
        (400, Some("validation")),
        "{body}"
    );

    let (status, _) = support::invoke(addr, token, json!({"tool": "nope"})).await;
    assert_eq!(status, 404);

    let (status, body) =
        support::invoke(addr, token, json!({"tool": "datetime", "dry_run": true})).await;
    assert_eq!(status, 200);
    assert_eq!(body["definition"]["name"], "datetime");

    let (status, body) = support::invoke(addr, token, json!({"tol": "datetime"})).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("invalid request body"),
        "{body}"
    );

    // The rate limit is keyed by the token, burst 5. Refused calls above never reached the limiter
    // (policy and validation come first), so one call is counted so far.
    for _ in 0..4 {
        let (status, _) = support::invoke(addr, token, json!({"tool": "datetime"})).await;
        assert_eq!(status, 200);
    }
    let (status, body) = support::invoke(addr, token, json!({"tool": "datetime"})).await;
    assert_eq!(
        (status, body["failed_stage"].as_str()),
        (429, Some("rate_limit")),
        "{body}"
    );

    let list: Value = client
        .get(format!("http://{addr}/v1/tools?format=openai"))
        .bearer_auth("tok-abcdef-123456-ghijklmn")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["tools"][0]["function"]["name"], "datetime");
    assert_eq!(
        list["tools"].as_array().unwrap().len(),
        1,
        "TodoWrite is denied"
    );
}

#[tokio::test]
async fn bearer_token_is_required_except_for_healthz() {
    let server = support::serve(
        &[("TALON_GATEWAY__TOKEN", "right-token-987654-qwertyuio")],
        None,
    );
    let client = reqwest::Client::new();
    let addr = server.addr.as_str();
    assert_eq!(
        client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Refusals are OpenAI's JSON errors, so SDK clients show what is wrong.
    let (status, body) = support::invoke(addr, None, json!({"tool": "datetime"})).await;
    assert_eq!(status, 401);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing bearer token"),
        "{body}"
    );
    assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
    let (status, body) =
        support::invoke(addr, Some("wrong-token"), json!({"tool": "datetime"})).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
    let mcp = client
        .post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 401, "/mcp is protected too");
    // So are the OpenAI-facing routes, which list the agents.
    for path in ["/v1/models", "/v1/models/default"] {
        let response = client
            .get(format!("http://{addr}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
}

#[test]
fn refuses_to_listen_beyond_loopback_without_a_token() {
    let home = tempfile::tempdir().unwrap();
    let out = support::command(home.path())
        .args(["serve", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("refusing to listen on 0.0.0.0:0 without gateway.token")
    );
}

#[test]
fn bad_bind_address_is_a_usage_error() {
    let home = tempfile::tempdir().unwrap();
    let out = support::command(home.path())
        .args(["serve", "--bind", "localhost"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an address like 127.0.0.1:8790"));
}

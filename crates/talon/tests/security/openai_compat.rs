//! Issue 27: where `openai_compat_call` must not reach. The model writes the request body, so it
//! must not also choose where the request (and the operator's key) goes: only the configured
//! endpoint, only under its base URL, and only through the address guard, which refuses a
//! loopback endpoint unless the operator listed it in `[web] allow_private`. Permission checks
//! are bypassed here so that nothing but the tool and the guard stands in the way.

use std::net::TcpListener;

use serde_json::json;

use crate::support::{self, invoke};

/// `openai_compat_call` with `args` on the gateway at `addr`: success, and what the model reads.
async fn compat(addr: &str, args: serde_json::Value) -> (bool, String) {
    let (_, body) = invoke(
        addr,
        None,
        json!({"tool": "openai_compat_call", "args": args}),
    )
    .await;
    let text = body["result"]["for_llm"].as_str().unwrap_or_default();
    (body["ok"] == true, text.to_string())
}

#[tokio::test]
async fn h27_07_openai_compat_call_reaches_only_the_configured_endpoint_through_the_guard() {
    // The endpoint: a listener that must never see a connection.
    let endpoint = TcpListener::bind("127.0.0.1:0").unwrap();
    endpoint.set_nonblocking(true).unwrap();
    let base = format!("http://{}/v1", endpoint.local_addr().unwrap());
    let config = |web: &str| {
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n{web}\
             [openai_compat.local]\nbase_url = \"{base}\"\nmodel = \"m\"\n"
        )
    };

    // The default [web] policy: the loopback endpoint is refused by the address guard.
    let guarded = support::serve(&[], Some(&config("")));
    let (ok, text) = compat(&guarded.addr, json!({"body": {"messages": []}})).await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("refused") && text.contains("loopback"),
        "{text}"
    );
    assert!(text.contains("[web] allow_private"), "{text}");

    // Allowed by the operator, the endpoint still cannot be left through `path` or `endpoint`.
    let allowed = support::serve(
        &[],
        Some(&config("[web]\nallow_private = [\"127.0.0.1\"]\n")),
    );
    for path in [
        "../x",
        "../../admin",
        "/admin",
        "//evil.example/x",
        "http://169.254.169.254/latest/meta-data",
        "%2e%2e/admin",
        "chat\\..\\..\\admin",
        "chat/completions?next=http://evil",
    ] {
        let (ok, text) = compat(
            &allowed.addr,
            json!({"path": path, "body": {"messages": []}}),
        )
        .await;
        assert!(!ok && text.contains("is refused"), "{path}: {text}");
    }
    let (ok, text) = compat(
        &allowed.addr,
        json!({"endpoint": "http://evil.example", "body": {}}),
    )
    .await;
    assert!(!ok && text.contains("is configured"), "{text}");
    assert!(
        endpoint
            .accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a refused call connected to the endpoint"
    );
}

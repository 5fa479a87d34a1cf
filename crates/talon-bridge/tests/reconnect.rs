//! A server process that dies: its tools fail fast with a clear message while Talon reconnects
//! (first attempt after 2 s), then work again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use talon_bridge::link::Status;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall, ToolOutput};

#[tokio::test]
async fn a_crashed_server_is_reconnected_and_its_tools_fail_fast_meanwhile() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/changing_server.py"
    );
    let config = ServerConfig::stdio(
        "crashy",
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: HashMap::from([("CRASHY".to_string(), "1".to_string())]),
            cwd: None,
        },
    );
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    let connected = bridge.connect(&[config], Startup::Wait).await.unwrap();
    let link = Arc::clone(&connected.links[0]);
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .build()
        .unwrap();
    let call = |tool: &'static str| {
        let mut ctx = CallContext::new("reconnect");
        ctx.permission_mode = PermissionMode::BypassPermissions;
        let pipeline = &pipeline;
        async move {
            pipeline
                .call(Arc::new(ctx), ToolCall::new(tool, json!({})))
                .await
                .output
        }
    };
    let out = call("mcp__crashy__crash").await;
    assert!(out.is_error, "{}", out.for_llm);
    // While it is down, its tools stay listed and fail at once, saying why.
    let out: ToolOutput = call("mcp__crashy__alpha").await;
    assert!(
        out.is_error && out.for_llm.contains("MCP server \"crashy\""),
        "{}",
        out.for_llm
    );
    assert!(out.for_llm.contains("Try again"), "{}", out.for_llm);
    assert!(registry.resolve("mcp__crashy__alpha").is_some());
    // Then it comes back.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = call("mcp__crashy__alpha").await;
        if !out.is_error {
            assert!(
                out.for_llm.contains("alpha replaced by beta"),
                "{}",
                out.for_llm
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not reconnected: {}",
            out.for_llm
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(link.status(), Status::Connected);
}

//! A server that changes its tool list: the bridge re-lists it on
//! `notifications/tools/list_changed`, replaces its tools and rebuilds the `mcp` and
//! `mcp:<server>` groups (GoClaw PR #1167 left stale group members behind).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall};

/// Waits (up to 10 s) until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn changed_tool_lists_replace_tools_and_groups() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/changing_server.py"
    );
    let config = ServerConfig::stdio(
        "chg",
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: HashMap::new(),
            cwd: None,
        },
    );
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::GoClaw, None);
    let connected = bridge.connect(&[config], Startup::Wait).await.unwrap();
    assert!(connected.failed.is_empty(), "{:?}", connected.failed);
    assert!(registry.resolve("mcp_chg__alpha").is_some());
    assert_eq!(
        registry.group("mcp:chg").unwrap(),
        vec!["mcp_chg__alpha".to_string()]
    );

    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .build()
        .unwrap();
    let call = |tool: &str| {
        let mut ctx = CallContext::new("changes");
        ctx.permission_mode = PermissionMode::BypassPermissions;
        let (pipeline, call) = (&pipeline, ToolCall::new(tool, json!({})));
        async move { pipeline.call(Arc::new(ctx), call).await.output }
    };
    let out = call("mcp_chg__alpha").await;
    assert!(
        out.for_llm.contains("alpha replaced by beta"),
        "{}",
        out.for_llm
    );
    eventually("beta to appear", || {
        registry.resolve("mcp_chg__beta").is_some()
    })
    .await;
    assert!(registry.resolve("mcp_chg__alpha").is_none());
    assert_eq!(
        registry.group("mcp:chg").unwrap(),
        vec!["mcp_chg__beta".to_string()]
    );
    assert_eq!(
        registry.group("mcp").unwrap(),
        vec!["mcp_chg__beta".to_string()]
    );
    let out = call("mcp_chg__alpha").await;
    assert!(out.is_error, "the removed tool is gone: {}", out.for_llm);
    let out = call("mcp_chg__beta").await;
    assert!(
        out.for_llm.contains("beta replaced by gamma"),
        "{}",
        out.for_llm
    );
    eventually("gamma to appear", || {
        registry.resolve("mcp_chg__gamma").is_some()
    })
    .await;
    assert_eq!(
        registry.group("mcp").unwrap(),
        vec!["mcp_chg__gamma".to_string()]
    );
}

#[tokio::test]
async fn in_the_background_a_dead_server_delays_nothing() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/changing_server.py"
    );
    let live = ServerConfig::stdio(
        "live",
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: HashMap::new(),
            cwd: None,
        },
    );
    let mut dead = ServerConfig::stdio(
        "dead",
        StdioConfig {
            command: "sleep".into(),
            args: vec!["600".into()],
            env: HashMap::new(),
            cwd: None,
        },
    );
    dead.startup_timeout = Duration::from_secs(300);
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::GoClaw, None);
    // Generous bound: it only trips if start-up waited for the dead server's 300 s.
    let connected = tokio::time::timeout(
        Duration::from_secs(60),
        bridge.connect(&[dead, live], Startup::Background),
    )
    .await
    .expect("start-up does not wait for a server that never answers")
    .unwrap();
    assert!(connected.links.is_empty() && connected.failed.is_empty());
    eventually("the live server's tools", || {
        registry.resolve("mcp_live__alpha").is_some()
    })
    .await;
    assert!(registry.group("mcp:dead").is_none());
}

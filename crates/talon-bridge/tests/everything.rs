//! The bridge against the reference MCP server `@modelcontextprotocol/server-everything` (from
//! npm, installed into the target directory on first use), plus a server that never answers and
//! one that does not exist: tools registered under Claude Code's names with risks from their
//! annotations, grouped, and called through Talon's pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::npm;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, Risk, ToolCall};

fn stdio(command: &str, args: &[&str]) -> StdioConfig {
    StdioConfig {
        command: command.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: HashMap::from([("GREETING".to_string(), "hello from talon".to_string())]),
        cwd: None,
    }
}

#[tokio::test]
async fn bridged_tools_are_registered_grouped_rated_and_called_through_the_pipeline() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let mut everything = ServerConfig::stdio(
        "everything",
        stdio("node", &[entry.to_str().unwrap(), "stdio"]),
    );
    everything.required = true;
    let mut dead = ServerConfig::stdio("dead", stdio("sleep", &["60"]));
    dead.startup_timeout = Duration::from_secs(2);
    let missing = ServerConfig::stdio("missing", stdio("/nonexistent/mcp-server", &[]));
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    let connected = bridge
        .connect(&[everything, dead, missing], Startup::Wait)
        .await
        .expect("the required server connects");
    assert_eq!(connected.links.len(), 1);
    assert_eq!(connected.failed.len(), 2, "{:?}", connected.failed);
    assert!(
        connected
            .failed
            .iter()
            .any(|f| f.contains("\"dead\" did not answer within 2 s")),
        "{:?}",
        connected.failed
    );
    assert!(
        connected
            .failed
            .iter()
            .any(|f| f.contains("\"missing\": cannot start")),
        "{:?}",
        connected.failed
    );

    let echo = registry
        .resolve("mcp__everything__echo")
        .expect("echo is bridged");
    assert_eq!(echo.spec().risk, Risk::Low);
    let gzip = registry
        .resolve("mcp__everything__gzip-file-as-resource")
        .expect("bridged");
    assert_eq!(gzip.spec().risk, Risk::High);
    let group = registry.group("mcp:everything").unwrap();
    assert!(group.contains(&"mcp__everything__get-sum".to_string()));
    assert_eq!(registry.group("mcp").unwrap().len(), group.len());

    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .build()
        .unwrap();
    let call = |tool: &str, args: serde_json::Value| {
        let mut ctx = CallContext::new("bridge-test");
        ctx.permission_mode = PermissionMode::BypassPermissions;
        let pipeline = &pipeline;
        let call = ToolCall::new(tool, args);
        async move { pipeline.call(Arc::new(ctx), call).await.output }
    };
    let out = call("mcp__everything__echo", json!({"message": "hi there"})).await;
    assert!(
        !out.is_error && out.for_llm.contains("Echo: hi there"),
        "{}",
        out.for_llm
    );
    assert!(out.for_llm.contains("EXTERNAL_UNTRUSTED_CONTENT"));
    let out = call("mcp__everything__get-sum", json!({"a": 2, "b": 40})).await;
    assert!(out.for_llm.contains("42"), "{}", out.for_llm);
    let out = call("mcp__everything__get-tiny-image", json!({})).await;
    assert!(
        out.media.iter().any(|m| m.mime_type == "image/png"),
        "{}",
        out.for_llm
    );
    // The server's schema is enforced by Talon before the call leaves.
    let out = call("mcp__everything__echo", json!({})).await;
    assert!(
        out.is_error && out.for_llm.contains("message"),
        "{}",
        out.for_llm
    );
    // Resources, Claude Code's way.
    let out = call("ListMcpResources", json!({"server": "everything"})).await;
    assert!(
        !out.is_error && out.for_llm.contains("\"server\": \"everything\""),
        "{}",
        out.for_llm
    );
    let uri = out
        .for_llm
        .split("\"uri\": \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a resource URI")
        .to_string();
    let out = call(
        "ReadMcpResource",
        json!({"server": "everything", "uri": uri}),
    )
    .await;
    assert!(
        !out.is_error && out.for_llm.contains(&format!("[resource {uri}")),
        "{}",
        out.for_llm
    );
    let out = call("ReadMcpResource", json!({"server": "nope", "uri": "x"})).await;
    assert!(
        out.is_error && out.for_llm.contains("no MCP server named \"nope\""),
        "{}",
        out.for_llm
    );
    // The server sees the allowlisted environment and its configured variables, nothing else.
    let out = call("mcp__everything__get-env", json!({})).await;
    assert!(out.for_llm.contains("hello from talon"), "{}", out.for_llm);
    assert!(
        !out.for_llm.contains("CARGO_MANIFEST_DIR"),
        "{}",
        out.for_llm
    );
}

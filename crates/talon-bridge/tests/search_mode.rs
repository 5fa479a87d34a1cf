//! Search mode against server-everything: above the threshold its tools are not offered
//! inline; `mcp_tool_search` finds them (BM25) and activates them, and a call by name activates
//! a tool too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::npm;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall};

/// server-everything over stdio.
fn everything() -> ServerConfig {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    ServerConfig::stdio(
        "everything",
        StdioConfig {
            command: "node".into(),
            args: vec![entry.to_str().unwrap().into(), "stdio".into()],
            env: HashMap::new(),
            cwd: None,
        },
    )
}

#[tokio::test]
async fn above_the_threshold_tools_are_found_activated_and_called() {
    let config = everything();
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    bridge.set_search_threshold(3);
    bridge.connect(&[config], Startup::Wait).await.unwrap();
    let all = bridge.tool_names();
    assert!(all.len() > 3, "{all:?}");
    assert!(
        registry.resolve("mcp__everything__echo").is_none(),
        "deferred tools are not registered"
    );
    assert!(registry.resolve("mcp_tool_search").is_some());

    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .deferred_activator(bridge.activator())
        .build()
        .unwrap();
    let ctx = || {
        let mut ctx = CallContext::new("search-mode");
        ctx.permission_mode = PermissionMode::BypassPermissions;
        Arc::new(ctx)
    };
    let offered = |p: &Pipeline| -> Vec<String> {
        p.offered(&ctx())
            .iter()
            .map(|t| t.spec().name.clone())
            .collect()
    };
    assert!(!offered(&pipeline).iter().any(|n| n.starts_with("mcp__")));

    let out = pipeline
        .call(
            ctx(),
            ToolCall::new(
                "mcp_tool_search",
                json!({"query": "add two numbers sum", "limit": 1}),
            ),
        )
        .await
        .output;
    assert!(
        out.for_llm.contains("mcp__everything__get-sum") && out.for_llm.contains("\"a\""),
        "the hit comes with its schema: {}",
        out.for_llm
    );
    assert!(offered(&pipeline).contains(&"mcp__everything__get-sum".to_string()));
    assert!(
        registry
            .group("mcp:everything")
            .unwrap()
            .contains(&"mcp__everything__get-sum".to_string())
    );
    let out = pipeline
        .call(
            ctx(),
            ToolCall::new("mcp__everything__get-sum", json!({"a": 40, "b": 2})),
        )
        .await
        .output;
    assert!(out.for_llm.contains("42"), "{}", out.for_llm);

    // A call by name activates a deferred tool without a search.
    let out = pipeline
        .call(
            ctx(),
            ToolCall::new("mcp__everything__echo", json!({"message": "lazy"})),
        )
        .await
        .output;
    assert!(out.for_llm.contains("Echo: lazy"), "{}", out.for_llm);
    let out = pipeline
        .call(
            ctx(),
            ToolCall::new("mcp_tool_search", json!({"query": "zebra quantum"})),
        )
        .await
        .output;
    assert!(
        out.for_llm.contains("No MCP tool matches"),
        "{}",
        out.for_llm
    );

    // Back under the threshold: everything is offered and the search tool goes.
    bridge.set_search_threshold(1000);
    assert!(registry.resolve("mcp_tool_search").is_none());
    assert_eq!(registry.group("mcp:everything").unwrap().len(), all.len());
}

/// Issue 26: with an embedding model, `mcp_tool_search` ranks by meaning as well as words: a
/// request worded unlike the tool's description still finds it first (a concept table stands
/// in for the model here; `talon`'s knowledge tests run the real one).
#[tokio::test]
async fn with_an_embedder_a_request_in_other_words_finds_the_tool() {
    let config = everything();
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    bridge.set_search_threshold(3);
    bridge.set_embedder(Arc::new(talon_embed::ConceptEmbedder::new(&[
        &["sum", "sums", "total", "add", "adds", "addition", "plus"],
        &["echo", "echoes", "parrot", "repeat"],
    ])));
    bridge.connect(&[config], Startup::Wait).await.unwrap();
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .deferred_activator(bridge.activator())
        .build()
        .unwrap();
    let mut ctx = CallContext::new("search-mode");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    let out = pipeline
        .call(
            Arc::new(ctx),
            ToolCall::new(
                "mcp_tool_search",
                json!({"query": "compute a total", "limit": 1}),
            ),
        )
        .await
        .output;
    assert!(
        out.for_llm.contains("mcp__everything__get-sum"),
        "found by meaning: {}",
        out.for_llm
    );
}

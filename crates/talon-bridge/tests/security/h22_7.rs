//! Issue 22 item 7: denying `group:mcp:<server>` denies the server to the resource tools too
//! (`ListMcpResources` / `ReadMcpResource`, `mcp_list_resources` / `mcp_read_resource`), not
//! only its own tools: a named denied server is refused, a listing leaves it out, and
//! `mcp_tool_search` does not find its tools. Item 6 for the
//! bridge: every tool it registers is in a capability group.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::policy::catalog::is_capability_group;
use talon_core::policy::{PolicyConfig, PolicyEngine, ToolPolicy};
use talon_core::{CallContext, CallOutcome, FailedStage, Pipeline, Registry, ToolCall};

fn server(name: &str) -> ServerConfig {
    with_tools(name, "")
}

/// The fixture server `name` with `tools` (comma-separated).
fn with_tools(name: &str, tools: &str) -> ServerConfig {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/resources_server.py"
    );
    ServerConfig::stdio(
        name,
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: HashMap::from([
                ("SERVER".to_string(), name.to_string()),
                ("TOOLS".to_string(), tools.to_string()),
            ]),
            cwd: None,
        },
    )
}

async fn call(pipeline: &Pipeline, tool: &str, input: serde_json::Value) -> CallOutcome {
    let mut ctx = CallContext::new("h22-7");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    pipeline
        .call(Arc::new(ctx), ToolCall::new(tool, input))
        .await
}

#[tokio::test]
async fn h22_7_a_denied_server_is_denied_to_the_resource_tools() {
    for (dialect, list, read) in [
        (Dialect::ClaudeCode, "ListMcpResources", "ReadMcpResource"),
        (Dialect::GoClaw, "mcp_list_resources", "mcp_read_resource"),
    ] {
        let registry = Arc::new(Registry::new());
        let bridge = Bridge::new(&registry, dialect, None);
        bridge.add(server("alpha")).await.unwrap();
        bridge.add(server("beta")).await.unwrap();
        let pipeline = Pipeline::builder(Arc::clone(&registry))
            .rate_limiter(None)
            .policy(
                PolicyEngine::new(PolicyConfig {
                    global: ToolPolicy {
                        deny: vec!["group:mcp:beta".into()],
                        ..ToolPolicy::default()
                    },
                    ..PolicyConfig::default()
                })
                .unwrap(),
            )
            .build()
            .unwrap();

        // Named: refused by policy, nothing read.
        let out = call(
            &pipeline,
            read,
            json!({"server": "beta", "uri": "mem://beta/notes"}),
        )
        .await;
        assert_eq!(
            out.failed_stage,
            Some(FailedStage::Policy),
            "{read}: {}",
            out.output.for_llm
        );
        assert!(!out.output.for_llm.contains("beta notes body"));
        let out = call(&pipeline, list, json!({"server": "beta"})).await;
        assert_eq!(
            out.failed_stage,
            Some(FailedStage::Policy),
            "{list}: {}",
            out.output.for_llm
        );

        // The allowed server still works.
        let out = call(
            &pipeline,
            read,
            json!({"server": "alpha", "uri": "mem://alpha/notes"}),
        )
        .await;
        assert!(
            out.output.for_llm.contains("alpha notes body"),
            "{}",
            out.output.for_llm
        );

        // Listing every server: the denied one is left out, and not named.
        let out = call(&pipeline, list, json!({})).await;
        assert_eq!(out.failed_stage, None, "{}", out.output.for_llm);
        assert!(
            out.output.for_llm.contains("mem://alpha/notes"),
            "{}",
            out.output.for_llm
        );
        assert!(
            !out.output.for_llm.contains("beta"),
            "{list}: {}",
            out.output.for_llm
        );

        // An unknown server's error names only the reachable ones.
        let out = call(
            &pipeline,
            read,
            json!({"server": "gamma", "uri": "mem://x"}),
        )
        .await;
        assert!(
            out.output.for_llm.contains("alpha") && !out.output.for_llm.contains("beta"),
            "{}",
            out.output.for_llm
        );
    }
}

/// Item 6 for the bridge's tools: each is in a capability group (`mcp`, `mcp:<server>`) in
/// both dialects, so `group:mcp` or `group:mcp:<server>` reaches it.
#[tokio::test]
async fn h22_6_every_bridge_tool_declares_a_capability_group() {
    for dialect in [Dialect::ClaudeCode, Dialect::GoClaw] {
        let registry = Arc::new(Registry::new());
        let bridge = Bridge::new(&registry, dialect, None);
        bridge.add(server("alpha")).await.unwrap();
        let missing: Vec<String> = registry
            .tools()
            .iter()
            .filter(|t| !t.spec().groups.iter().any(|g| is_capability_group(g)))
            .map(|t| t.spec().name.clone())
            .collect();
        assert!(registry.len() >= 2, "{:?}", registry.names());
        assert!(missing.is_empty(), "{dialect:?}: {missing:?}");
    }
}

#[tokio::test]
async fn h22_7_tool_search_does_not_find_a_denied_servers_tools() {
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    bridge.set_search_threshold(1);
    let servers = [
        with_tools("alpha", "forecast"),
        with_tools("beta", "forecast"),
    ];
    bridge.connect(&servers, Startup::Wait).await.unwrap();
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .deferred_activator(bridge.activator())
        .policy(
            PolicyEngine::new(PolicyConfig {
                global: ToolPolicy {
                    deny: vec!["group:mcp:beta".into()],
                    ..ToolPolicy::default()
                },
                ..PolicyConfig::default()
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    let out = call(
        &pipeline,
        "mcp_tool_search",
        json!({"query": "forecast numbers", "limit": 10}),
    )
    .await;
    let text = out.output.for_llm;
    assert!(text.contains("mcp__alpha__forecast"), "{text}");
    assert!(
        !text.contains("beta"),
        "a denied server's tool was shown: {text}"
    );
}

//! Issue 22 item 6: every tool belongs to its capability group whatever its dialect, so
//! denying `group:runtime`, `group:fs` or `group:web` denies the Claude Code tools too.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;
use talon_core::policy::catalog::is_capability_group;
use talon_core::policy::{PolicyConfig, PolicyEngine, PolicyRequest, ToolPolicy};
use talon_core::{FailedStage, Pipeline, Registry, ToolCall};
use talon_store::{Store, StoreConfig};
use talon_tools::BuiltinConfig;

use crate::common;

/// Every built-in tool of both dialects (the store-backed ones included).
async fn all_builtins(dir: &std::path::Path) -> Arc<Registry> {
    let store = Store::open(&StoreConfig::sqlite_in(dir)).await.unwrap();
    let registry = Arc::new(Registry::new());
    let config = BuiltinConfig {
        store: Some(store),
        ..BuiltinConfig::default()
    };
    talon_tools::register_builtin(&registry, &config).unwrap();
    registry
}

fn effective(registry: &Registry, profile: Option<&str>, deny: &str) -> BTreeSet<String> {
    let engine = PolicyEngine::new(PolicyConfig {
        global: ToolPolicy {
            profile: profile.map(str::to_string),
            deny: vec![deny.to_string()],
            ..ToolPolicy::default()
        },
        ..PolicyConfig::default()
    })
    .unwrap();
    engine.effective(registry, &PolicyRequest::default())
}

#[tokio::test]
async fn h22_6_every_builtin_tool_declares_a_capability_group() {
    let dir = tempfile::tempdir().unwrap();
    let registry = all_builtins(dir.path()).await;
    let names = registry.names();
    for both in [
        "exec",
        "Bash",
        "read_file",
        "Read",
        "web_fetch",
        "WebFetch",
        "Config",
    ] {
        assert!(names.iter().any(|n| n == both), "{both} is registered");
    }
    let missing: Vec<String> = registry
        .tools()
        .iter()
        .filter(|t| !t.spec().groups.iter().any(|g| is_capability_group(g)))
        .map(|t| t.spec().name.clone())
        .collect();
    assert!(
        missing.is_empty(),
        "tools without a capability group: {missing:?}"
    );
}

#[tokio::test]
async fn h22_6_denying_a_capability_group_denies_it_in_both_dialects() {
    let dir = tempfile::tempdir().unwrap();
    let registry = all_builtins(dir.path()).await;
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "group:runtime",
            "Read",
            &[
                "exec",
                "process",
                "credentialed_exec",
                "Bash",
                "TaskOutput",
                "TaskStop",
            ],
        ),
        (
            "group:fs",
            "Bash",
            &[
                "read_file",
                "write_file",
                "edit",
                "glob",
                "search",
                "list_files",
                "Read",
                "Write",
                "Edit",
                "Glob",
                "Grep",
                "NotebookEdit",
            ],
        ),
        (
            "group:web",
            "Read",
            &["web_fetch", "web_search", "WebFetch", "WebSearch"],
        ),
    ];
    for (deny, kept, tools) in cases {
        // The README's example: profile "coding" with a deny; and the full profile.
        for profile in [Some("coding"), None] {
            let set = effective(&registry, profile, deny);
            let left: Vec<&&str> = tools.iter().filter(|t| set.contains(**t)).collect();
            assert!(left.is_empty(), "{deny} ({profile:?}) leaves {left:?}");
            assert!(set.contains(kept), "{deny} denies only its group");
        }
    }
}

#[tokio::test]
async fn h22_6_a_denied_group_refuses_the_claude_code_call() {
    let dir = tempfile::tempdir().unwrap();
    let registry = all_builtins(dir.path()).await;
    let engine = PolicyEngine::new(PolicyConfig {
        global: ToolPolicy {
            profile: Some("coding".into()),
            deny: vec!["group:runtime".into()],
            ..ToolPolicy::default()
        },
        ..PolicyConfig::default()
    })
    .unwrap();
    let pipeline = Pipeline::builder(registry)
        .policy(engine)
        .rate_limiter(None)
        .build()
        .unwrap();
    let ctx = Arc::new(common::context(dir.path(), "s"));
    let out = pipeline
        .call(ctx, ToolCall::new("Bash", json!({"command": "touch ran"})))
        .await;
    assert_eq!(
        out.failed_stage,
        Some(FailedStage::Policy),
        "{}",
        out.output.for_llm
    );
    assert!(!dir.path().join("ran").exists());
}

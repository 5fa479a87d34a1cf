//! The bridge against the reference filesystem server (`@modelcontextprotocol/server-filesystem`
//! from npm), under GoClaw's names with a custom prefix: its tools rated by their annotations,
//! its own confinement errors passed back to the model, and results read through the pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::npm;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, Risk, ToolCall};

#[tokio::test]
async fn server_filesystem_is_bridged_under_goclaw_names() {
    let entry = npm::server_filesystem(env!("CARGO_TARGET_TMPDIR"));
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("notes.txt"), "kiwi staging is at 10.0.0.7\n").unwrap();
    let mut config = ServerConfig::stdio(
        "files-ext",
        StdioConfig {
            command: "node".into(),
            args: vec![
                entry.to_str().unwrap().into(),
                root_path.to_str().unwrap().into(),
            ],
            env: HashMap::new(),
            cwd: None,
        },
    );
    config.required = true;
    config.prefix = Some("docs".into());
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::GoClaw, None);
    bridge.connect(&[config], Startup::Wait).await.unwrap();

    let read = registry
        .resolve("mcp_docs__read_text_file")
        .expect("bridged");
    assert_eq!(read.spec().risk, Risk::Low, "read-only annotation");
    let write = registry.resolve("mcp_docs__write_file").expect("bridged");
    assert_ne!(write.spec().risk, Risk::Low);
    assert!(
        registry
            .group("mcp:files-ext")
            .unwrap()
            .contains(&"mcp_docs__list_directory".to_string())
    );
    assert!(
        registry.resolve("mcp_list_resources").is_some(),
        "GoClaw-dialect resource tools"
    );

    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .build()
        .unwrap();
    let call = |tool: &str, args: serde_json::Value| {
        let mut ctx = CallContext::new("filesystem-bridge");
        ctx.permission_mode = PermissionMode::BypassPermissions;
        let call = ToolCall::new(tool, args);
        let pipeline = &pipeline;
        async move { pipeline.call(Arc::new(ctx), call).await.output }
    };
    let path = root_path.join("notes.txt").display().to_string();
    let out = call("mcp_docs__read_text_file", json!({"path": path})).await;
    assert!(
        !out.is_error && out.for_llm.contains("kiwi staging"),
        "{}",
        out.for_llm
    );
    let out = call(
        "mcp_docs__list_directory",
        json!({"path": root_path.display().to_string()}),
    )
    .await;
    assert!(out.for_llm.contains("notes.txt"), "{}", out.for_llm);
    // The server's own confinement: outside its root is refused, and the model is told.
    let out = call("mcp_docs__read_text_file", json!({"path": "/etc/passwd"})).await;
    assert!(
        out.is_error && out.for_llm.to_lowercase().contains("access denied"),
        "{}",
        out.for_llm
    );
}

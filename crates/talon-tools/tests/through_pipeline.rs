//! The built-in tools, called the only way they can be: through the pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use talon_core::{CallContext, FailedStage, Pipeline, Registry, ToolCall};

fn pipeline() -> Pipeline {
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default())
        .expect("register");
    Pipeline::builder(registry).build().expect("pipeline")
}

fn ctx(session: &str) -> Arc<CallContext> {
    Arc::new(CallContext::new(session))
}

#[tokio::test]
async fn datetime_defaults_to_utc_and_rejects_unknown_zones() {
    let p = pipeline();
    let out = p.call(ctx("s"), ToolCall::new("datetime", json!({}))).await;
    assert_eq!(out.failed_stage, None);
    assert!(
        out.output.for_llm.contains("Time zone: UTC"),
        "{}",
        out.output.for_llm
    );
    let out = p
        .call(
            ctx("s"),
            ToolCall::new("datetime", json!({"timezone": "Nowhere/City"})),
        )
        .await;
    assert_eq!(out.failed_stage, Some(FailedStage::Tool));
    let out = p
        .call(ctx("s"), ToolCall::new("datetime", json!({"tz": "UTC"})))
        .await;
    assert_eq!(
        out.failed_stage,
        Some(FailedStage::Validation),
        "unknown fields are reported"
    );
}

#[tokio::test]
async fn todo_write_validates_and_keeps_lists_per_session() {
    let p = pipeline();
    let list = json!({"todos": [
        {"content": "Write code", "status": "in_progress", "activeForm": "Writing code"},
        {"content": "Run tests", "status": "pending", "activeForm": "Running tests"},
    ]});
    let out = p.call(ctx("a"), ToolCall::new("TodoWrite", list)).await;
    assert_eq!(out.failed_stage, None, "{}", out.output.for_llm);
    assert!(
        out.output
            .for_llm
            .starts_with("Todos have been modified successfully.")
    );
    assert_eq!(
        out.output.for_user.as_deref(),
        Some("1. [~] Writing code\n2. [ ] Run tests")
    );

    let missing = json!({"todos": [{"content": "x", "status": "pending"}]});
    let out = p.call(ctx("a"), ToolCall::new("TodoWrite", missing)).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Validation));
    assert!(
        out.output
            .for_llm
            .contains("\"activeForm\" is a required property"),
        "{}",
        out.output.for_llm
    );

    let bad_status = json!({"todos": [{"content": "x", "status": "done", "activeForm": "x"}]});
    let out = p
        .call(ctx("a"), ToolCall::new("TodoWrite", bad_status))
        .await;
    assert!(
        out.output.for_llm.contains("field `todos.0.status`"),
        "{}",
        out.output.for_llm
    );

    let two = json!({"todos": [
        {"content": "a", "status": "in_progress", "activeForm": "A"},
        {"content": "b", "status": "in_progress", "activeForm": "B"},
    ]});
    let out = p.call(ctx("a"), ToolCall::new("TodoWrite", two)).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Tool));
    assert!(
        out.output
            .for_llm
            .contains("at most one todo can be in_progress")
    );
}

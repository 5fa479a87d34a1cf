//! A server that reports progress, is cancelled, hangs, writes junk, floods, and asks for user
//! input: progress reaches the caller and Talon's events, cancellation reaches the server,
//! and every misbehaviour ends in a clear result while the server stays usable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use talon_bridge::{Bridge, Dialect, ServerConfig, Startup, StdioConfig};
use talon_core::events::ToolEvent;
use talon_core::permission::PermissionMode;
use talon_core::{
    CallContext, FailedStage, Pipeline, ProgressSink, ProgressUpdate, Registry, ToolCall,
};

struct Fixture {
    pipeline: Pipeline,
    cancel_log: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _bridge: Arc<Bridge>,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cancel_log = dir.path().join("cancelled.log");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/misbehaving_server.py"
    );
    let mut config = ServerConfig::stdio(
        "odd",
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: HashMap::from([
                ("CANCEL_LOG".to_string(), cancel_log.display().to_string()),
                ("SLOW_SECS".to_string(), "20".to_string()),
            ]),
            cwd: None,
        },
    );
    config.required = true;
    config.call_timeout = Duration::from_secs(2);
    config.max_output_chars = 10_000;
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    bridge.connect(&[config], Startup::Wait).await.unwrap();
    let pipeline = Pipeline::builder(registry)
        .rate_limiter(None)
        .build()
        .unwrap();
    Fixture {
        pipeline,
        cancel_log,
        _dir: dir,
        _bridge: bridge,
    }
}

fn ctx() -> CallContext {
    let mut ctx = CallContext::new("misbehaving");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    ctx
}

async fn cancellations(log: &std::path::Path) -> String {
    for _ in 0..300 {
        if let Ok(text) = std::fs::read_to_string(log)
            && !text.is_empty()
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    String::new()
}

#[tokio::test]
async fn progress_reaches_the_caller_and_events_and_cancellation_reaches_the_server() {
    let f = fixture().await;
    let mut events = f.pipeline.events().subscribe();
    let seen: Arc<Mutex<Vec<ProgressUpdate>>> = Arc::default();
    let mut ctx = ctx();
    let (first, mut first_seen) = tokio::sync::mpsc::unbounded_channel();
    let sink_seen = Arc::clone(&seen);
    ctx.progress = Some(ProgressSink(Arc::new(move |update| {
        sink_seen.lock().unwrap().push(update);
        let _ = first.send(());
    })));
    let cancel = ctx.cancel.clone();
    let call = f
        .pipeline
        .call(Arc::new(ctx), ToolCall::new("mcp__odd__slow", json!({})));
    let cancel_after_progress = async {
        first_seen.recv().await;
        cancel.cancel();
    };
    let (outcome, ()) = tokio::join!(call, cancel_after_progress);
    assert_eq!(
        outcome.failed_stage,
        Some(FailedStage::Cancelled),
        "{}",
        outcome.output.for_llm
    );
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (first.progress, first.total, first.message.as_deref()),
        (1.0, Some(3.0), Some("step 1"))
    );
    let mut progress_events = 0;
    while let Ok(event) = events.try_recv() {
        if let ToolEvent::Progress { tool, .. } = event {
            assert_eq!(&*tool, "mcp__odd__slow");
            progress_events += 1;
        }
    }
    assert!(progress_events >= 1);
    let log = cancellations(&f.cancel_log).await;
    assert!(
        log.contains("the caller cancelled the call"),
        "the server heard notifications/cancelled: {log:?}"
    );
}

#[tokio::test]
async fn hangs_junk_floods_and_elicitation_end_clearly_and_the_server_stays_usable() {
    let f = fixture().await;
    let call = |tool: &str| {
        let pipeline = &f.pipeline;
        let call = ToolCall::new(
            format!("mcp__odd__{tool}"),
            json!({"message": "still here"}),
        );
        async move { pipeline.call(Arc::new(ctx()), call).await.output }
    };
    let out = call("hang").await;
    assert!(
        out.is_error && out.for_llm.contains("did not answer within 2 s"),
        "{}",
        out.for_llm
    );
    // A call that times out is cancelled at the server too.
    assert!(cancellations(&f.cancel_log).await.contains("cancelled"));
    let out = call("echo").await;
    assert!(out.for_llm.contains("echo: still here"), "{}", out.for_llm);

    let out = call("malformed").await;
    assert!(
        out.for_llm.contains("answered after junk"),
        "{}",
        out.for_llm
    );

    let out = call("flood").await;
    assert!(
        !out.is_error
            && out
                .for_llm
                .contains("[output cut at 10000 of 2000000 characters]"),
        "{}",
        &out.for_llm[out.for_llm.len().saturating_sub(300)..]
    );

    let out = call("elicit").await;
    assert!(out.for_llm.contains("decline"), "{}", out.for_llm);
    let out = call("echo").await;
    assert!(out.for_llm.contains("echo: still here"), "{}", out.for_llm);
}

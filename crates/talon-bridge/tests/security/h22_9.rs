//! Issue 22 item 9: a bridged server cannot exhaust Talon's memory. It floods requests without
//! reading its input, reports progress for calls that do not exist, and asks more questions
//! than anyone could answer; Talon holds a bounded amount, says what it refused, and keeps
//! answering. Nothing here is timed: the bounds are read from the session's counters
//! (`Server::held`) and from what the server itself received.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use talon_bridge::watcher::MAX_SERVER_REQUESTS;
use talon_bridge::{Bridge, Dialect, Server, ServerConfig, Startup, StdioConfig};
use talon_core::events::{MAX_PROGRESS_MESSAGE_BYTES, ToolEvent};
use talon_core::permission::PermissionMode;
use talon_core::{
    CallContext, ClientHandle, ClientRequests, Pipeline, ProgressSink, Registry, ToolCall,
};
use talon_jsonrpc::limits::{MAX_UNWRITTEN_BYTES, MAX_UNWRITTEN_MESSAGES};

struct Flooding {
    pipeline: Pipeline,
    bridge: Arc<Bridge>,
}

impl Flooding {
    async fn start() -> Self {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/flooding_server.py"
        );
        let mut config = ServerConfig::stdio(
            "flood",
            StdioConfig {
                command: "python3".into(),
                args: vec![script.into()],
                env: HashMap::new(),
                cwd: None,
            },
        );
        config.required = true;
        config.call_timeout = Duration::from_secs(60);
        let registry = Arc::new(Registry::new());
        let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
        bridge.connect(&[config], Startup::Wait).await.unwrap();
        let pipeline = Pipeline::builder(registry)
            .rate_limiter(None)
            .build()
            .unwrap();
        Self { pipeline, bridge }
    }

    fn server(&self) -> Arc<Server> {
        self.bridge.link("flood").unwrap().server().unwrap()
    }

    async fn call(&self, ctx: CallContext, tool: &str, arguments: Value) -> String {
        let out = self
            .pipeline
            .call(
                Arc::new(ctx),
                ToolCall::new(format!("mcp__flood__{tool}"), arguments),
            )
            .await
            .output;
        assert!(!out.is_error, "{tool}: {}", out.for_llm);
        out.for_llm
    }
}

fn ctx() -> CallContext {
    let mut ctx = CallContext::new("h22-9");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    ctx
}

/// (a) 20,000 `ping` requests from a server that reads nothing until it has sent them all:
/// Talon used to keep an answer (and a task) for each. Now at most the backlog's bound waits,
/// the rest are dropped, and the session still works.
#[tokio::test]
async fn h22_9_a_server_flooding_requests_without_reading_is_bounded() {
    let f = Flooding::start().await;
    let sent = 20_000;
    let out = f
        .call(ctx(), "flood_requests", json!({"count": sent}))
        .await;
    assert!(out.contains("flooded"), "{out}");
    let held = f.server().held();
    assert!(
        held.unwritten.peak_messages <= MAX_UNWRITTEN_MESSAGES
            && held.unwritten.peak_bytes <= MAX_UNWRITTEN_BYTES,
        "{held:?}"
    );
    assert!(held.unwritten.refused > 0, "nothing was refused: {held:?}");

    // The server reads at last: it got the answers that fit, not one per request.
    let out = f.call(ctx(), "pongs", json!({})).await;
    let pongs: u64 = out
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {out}"));
    assert!(pongs < sent, "every one of {sent} pings was answered");
    assert!(pongs + held.unwritten.refused <= sent, "{pongs} {held:?}");
    let out = f
        .call(ctx(), "echo", json!({"message": "still here"}))
        .await;
    assert!(out.contains("echo: still here"), "{out}");
}

/// (b) Progress for tokens no call sent, 64 KiB each: Talon used to keep the last 32 (and a
/// server could send them forever). Now they are dropped at once and counted, and the call's
/// own report arrives cut to size, on its sink and on the event bus.
#[tokio::test]
async fn h22_9_progress_for_calls_that_do_not_exist_is_dropped() {
    let f = Flooding::start().await;
    let mut events = f.pipeline.events().subscribe();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let into = Arc::clone(&seen);
    let mut ctx = ctx();
    ctx.progress = Some(ProgressSink(Arc::new(move |update| {
        into.lock()
            .unwrap()
            .push(update.message.unwrap_or_default());
    })));
    let ghosts = 300;
    let out = f
        .call(ctx, "flood_progress", json!({"count": ghosts}))
        .await;
    assert!(out.contains("reported"), "{out}");
    let held = f.server().held();
    assert_eq!(held.early_reports, 0, "{held:?}");
    assert_eq!(held.stray_reports, ghosts, "{held:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the call's own report arrives");
    assert!(
        seen[0].len() <= MAX_PROGRESS_MESSAGE_BYTES,
        "{}",
        seen[0].len()
    );
    let mut progress_events = 0;
    while let Ok(event) = events.try_recv() {
        if let ToolEvent::Progress { update, .. } = event {
            let message = update.message.unwrap_or_default();
            assert!(message.len() <= MAX_PROGRESS_MESSAGE_BYTES);
            progress_events += 1;
        }
    }
    assert_eq!(progress_events, 1);
}

/// A client that never answers, counting the questions it was asked.
struct NeverAnswers(Arc<AtomicUsize>);

impl ClientRequests for NeverAnswers {
    fn elicit(&self, _params: Value) -> talon_core::context::ClientFuture {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

/// (a) Twenty questions at once, to a user who is slow to answer: Talon used to start a task
/// and put a question for each. Now it works on [`MAX_SERVER_REQUESTS`] at a time and answers
/// the rest at once with an error saying why.
#[tokio::test]
async fn h22_9_server_requests_beyond_the_in_flight_limit_are_refused() {
    let f = Flooding::start().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let mut ctx = ctx();
    ctx.client = Some(ClientHandle(Arc::new(NeverAnswers(Arc::clone(&asked)))));
    let count = 20;
    let refused = count - MAX_SERVER_REQUESTS;
    let out = f
        .call(ctx, "ask_many", json!({"count": count, "want": refused}))
        .await;
    let start = out
        .find('[')
        .unwrap_or_else(|| panic!("no answers in {out}"));
    let end = out
        .rfind(']')
        .unwrap_or_else(|| panic!("no answers in {out}"));
    let answers: Vec<Value> = serde_json::from_str(&out[start..=end]).unwrap();
    assert_eq!(answers.len(), refused);
    for answer in &answers {
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains("too many requests in flight"), "{answer}");
    }
    assert_eq!(asked.load(Ordering::SeqCst), MAX_SERVER_REQUESTS);
    assert_eq!(f.server().held().refused_requests, refused as u64);
}

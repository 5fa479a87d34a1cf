//! Security regressions of the session tools (issue 22 item 4): several users share one
//! gateway, so a call sees and reaches only the sessions of its own agent and user; another
//! user's session is "not found", the same as a key that does not exist.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use talon_core::{CallContext, Pipeline, ToolCall};
use talon_store::{Store, StoreConfig};
use talon_tools::sessions::SessionSender;
use talon_tools::{BuiltinConfig, FsConfig};

use crate::common;

/// Records the turns `sessions_send` asks for instead of running them.
#[derive(Default)]
struct Recorder(Mutex<Vec<(Option<String>, String)>>);

impl SessionSender for Recorder {
    fn send<'a>(
        &'a self,
        ctx: &'a CallContext,
        session_key: &'a str,
        _text: &'a str,
    ) -> BoxFuture<'a, Result<String, String>> {
        self.0
            .lock()
            .unwrap()
            .push((ctx.user.clone(), session_key.to_string()));
        Box::pin(async { Ok("delivered".to_string()) })
    }
}

/// An agent runtime without small models: WebFetch returns pages.
struct NoSmallModel;

impl talon_tools::claude_code::web_fetch::PageAnswerer for NoSmallModel {
    fn answer<'a>(
        &'a self,
        _ctx: &'a CallContext,
        _prompt: &'a str,
        _content: &'a str,
    ) -> BoxFuture<'a, Option<Result<String, String>>> {
        Box::pin(async { None })
    }
}

struct Env {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
    sent: Arc<Recorder>,
}

impl Env {
    async fn call(&self, user: Option<&str>, session: &str, tool: &str, args: Value) -> String {
        let mut ctx = common::context(&self.dir.path().join("ws"), session);
        ctx.agent_key = Some("default".into());
        ctx.user = user.map(str::to_string);
        let out = self
            .pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await;
        out.output.for_llm
    }
}

/// Alice's session (with her secret), Bob's two, and one of no user, all of agent `default`.
async fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
        .await
        .unwrap();
    store.ensure_agent("default").await.unwrap();
    for (key, owner, text) in [
        ("alice-chat", Some("alice"), "my bank password is hunter2"),
        ("bob-chat", Some("bob"), "bob's own words"),
        ("bob-other", Some("bob"), "bob's other chat"),
        ("nobody-chat", None, "unowned words"),
    ] {
        let turn = store.begin_turn(key, "default", owner).await.unwrap();
        let message = json!({"role": "user", "text": text}).to_string();
        store
            .finish_turn(key, turn.turn, &[message], "final", 1, 1)
            .await
            .unwrap();
    }
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        store: Some(store),
        ..BuiltinConfig::default()
    };
    let sent = Arc::new(Recorder::default());
    let registry = Arc::new(talon_core::Registry::new());
    talon_tools::register_builtin(&registry, &config)
        .unwrap()
        .register_agent_services(&registry, sent.clone(), Arc::new(NoSmallModel))
        .unwrap();
    let pipeline = common::pipeline_over(registry);
    Env {
        dir,
        pipeline,
        sent,
    }
}

/// Issue 22 item 4: Bob's model neither lists nor reads Alice's conversation, nor sends into it;
/// a call naming no user reaches only sessions of no user.
#[tokio::test]
async fn h22_4_session_tools_see_only_the_callers_sessions() {
    let env = env().await;
    let listed = env
        .call(Some("bob"), "bob-chat", "sessions_list", json!({}))
        .await;
    assert!(
        listed.contains("bob-chat") && listed.contains("bob-other"),
        "{listed}"
    );
    assert!(
        !listed.contains("alice-chat") && !listed.contains("nobody-chat"),
        "{listed}"
    );
    let unknown = env
        .call(
            Some("bob"),
            "bob-chat",
            "sessions_history",
            json!({"session_key": "no-such-session"}),
        )
        .await;
    assert!(unknown.contains("no session"), "{unknown}");
    for (tool, args) in [
        ("sessions_history", json!({"session_key": "alice-chat"})),
        (
            "sessions_send",
            json!({"session_key": "alice-chat", "message": "tell me your password"}),
        ),
    ] {
        let out = env.call(Some("bob"), "bob-chat", tool, args).await;
        assert!(!out.contains("hunter2"), "{tool}: {out}");
        // The same answer as a session that does not exist.
        assert_eq!(
            out,
            unknown.replace("no-such-session", "alice-chat"),
            "{tool}"
        );
    }
    // A tool call made in Alice's session key by Bob learns nothing of it either.
    let status = env
        .call(Some("bob"), "alice-chat", "session_status", json!({}))
        .await;
    assert!(
        status.contains("is not stored") && !status.contains("1 turns"),
        "{status}"
    );
    // Bob's own sessions stay reachable, and only they reach the runtime.
    let history = env
        .call(
            Some("bob"),
            "bob-chat",
            "sessions_history",
            json!({"session_key": "bob-other"}),
        )
        .await;
    assert!(history.contains("bob's other chat"), "{history}");
    let sent = env
        .call(
            Some("bob"),
            "bob-chat",
            "sessions_send",
            json!({"session_key": "bob-other", "message": "hi"}),
        )
        .await;
    assert!(sent.contains("delivered"), "{sent}");
    assert_eq!(
        *env.sent.0.lock().unwrap(),
        [(Some("bob".to_string()), "bob-other".to_string())]
    );
    // No user: only sessions of no user.
    let listed = env
        .call(None, "nobody-chat", "sessions_list", json!({}))
        .await;
    assert!(listed.contains("nobody-chat"), "{listed}");
    assert!(
        !listed.contains("alice-chat") && !listed.contains("bob-chat"),
        "{listed}"
    );
    let out = env
        .call(
            None,
            "nobody-chat",
            "sessions_history",
            json!({"session_key": "alice-chat"}),
        )
        .await;
    assert!(
        !out.contains("hunter2") && out.contains("no session"),
        "{out}"
    );
}

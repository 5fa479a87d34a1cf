//! The gateway's security suite. Issue 22 item 4's class on the gateway's own routes: several
//! users share one token, so the events stream, the approvals and questions waiting for a
//! person, and the session key of an invoked call all belong to the user the caller names.
//! Served on a real listener, as clients see it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::approvals::Approvals;
use talon_core::caller::FixedAgents;
use talon_core::permission::PermissionMode;
use talon_core::questions::Questions;
use talon_core::rate_limit::RateLimiter;
use talon_core::{CallContext, Callers, Pipeline, Registry, Workspaces};
use tokio_util::sync::CancellationToken;

use talon_gateway::{GatewayConfig, Services, router};

/// A gateway over Talon's built-in tools in `mode`, asking `approvals` when a call needs a
/// person, with `limiter` as the pipeline's rate limit. Returns its base URL.
async fn serve(
    workspace: &std::path::Path,
    mode: PermissionMode,
    limiter: Option<RateLimiter>,
) -> (String, Arc<Approvals>, Arc<Questions>) {
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default())
        .expect("built-in tools register");
    let events = talon_core::events::EventBus::default();
    let approvals = Arc::new(Approvals::new(events.clone()));
    let questions = Arc::new(Questions::new(events.clone()));
    let pipeline = Pipeline::builder(registry)
        .events(events)
        .approver(Arc::clone(&approvals) as Arc<dyn talon_core::permission::Approver>)
        .rate_limiter(limiter)
        .build()
        .expect("pipeline");
    let mut template = CallContext::new("template");
    template.permission_mode = mode;
    let services = Services {
        pipeline: Arc::new(pipeline),
        template,
        callers: Callers::new(
            Workspaces::PerAgentUser(workspace.to_path_buf()),
            "default",
            Arc::new(FixedAgents::of(["default", "ops"])),
        ),
        approvals: Arc::clone(&approvals),
        questions: Arc::clone(&questions),
        admin: None,
        readiness: None,
    };
    let config = GatewayConfig {
        bind: "127.0.0.1:0".parse().expect("address"),
        token: None,
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        mcp_client_confirms: true,
    };
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("address");
    let app = router(&config, services, CancellationToken::new());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), approvals, questions)
}

/// A fresh directory for one test's workspaces (left in the system's temporary directory).
fn workspace(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "talon-gateway-{test}-{}-{}",
        std::process::id(),
        uuid_like()
    ));
    std::fs::create_dir_all(&dir).expect("a workspace");
    dir
}

/// A value unique to this call within the process.
fn uuid_like() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `POST /v1/tools/invoke` with `body`: (status, JSON).
async fn invoke(base: &str, body: Value) -> (u16, Value) {
    post(&format!("{base}/v1/tools/invoke"), &body).await
}

async fn post(url: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .expect("answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

async fn get(url: &str) -> Value {
    reqwest::get(url)
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON")
}

/// An open `GET /v1/events` (server-sent events) stream.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(url: &str) -> Self {
        let response = reqwest::get(url).await.expect("subscribes");
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's JSON.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return serde_json::from_str(data).expect("an event's JSON");
                }
                continue;
            }
            let chunk = self
                .response
                .chunk()
                .await
                .expect("reads")
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Every event up to and including the `n`th `tool_finished` of a call of `user`.
    async fn until_finished(&mut self, user: Option<&str>, n: usize) -> Vec<Value> {
        let mut seen = Vec::new();
        let mut finished = 0;
        while finished < n {
            let event = self.next().await;
            if event["type"] == "tool_finished" && event["user"].as_str() == user {
                finished += 1;
            }
            seen.push(event);
        }
        seen
    }
}

/// Issue 22 item 4's class: `GET /v1/events` showed every user's calls (their tools, and what
/// waits for approval with its command) to any subscriber, whatever session it named. A
/// subscriber now sees only the events of the user it names; none: only calls naming no user.
#[tokio::test]
async fn h22_4_events_show_only_the_named_users_calls() {
    let workspace = workspace("events");
    let (base, _, _) = serve(&workspace, PermissionMode::Default, None).await;
    let mut alice = Events::open(&format!("{base}/v1/events?user=alice")).await;
    let mut bob = Events::open(&format!("{base}/v1/events?user=bob")).await;
    let mut nobody = Events::open(&format!("{base}/v1/events")).await;
    // Two rounds, so each subscriber's second call of its own user comes after the others'
    // first: a stream that let them through would have shown them by then.
    for _ in 0..2 {
        for user in [Some("alice"), Some("bob"), None] {
            let mut body = json!({"tool": "datetime", "args": {}});
            if let Some(user) = user {
                body["user"] = json!(user);
            }
            let (status, answer) = invoke(&base, body).await;
            assert_eq!(status, 200, "{answer}");
        }
    }
    for (stream, user) in [
        (&mut alice, Some("alice")),
        (&mut bob, Some("bob")),
        (&mut nobody, None),
    ] {
        let seen = stream.until_finished(user, 2).await;
        assert!(
            seen.iter().all(|e| e["user"].as_str() == user),
            "{user:?} saw: {seen:?}"
        );
        assert!(seen.iter().any(|e| e["type"] == "tool_started"), "{seen:?}");
    }
}

/// Issue 22 item 4's class: `GET /v1/approvals` listed every user's waiting calls (the command
/// and its arguments), and `POST /v1/approvals` let any user answer them; the same for
/// questions. Each is now listed and answered only with its user's `?user=`; for anyone else
/// it does not exist.
#[tokio::test]
async fn h22_4_approvals_and_questions_belong_to_their_user() {
    let workspace = workspace("approvals");
    let (base, _, questions) = serve(&workspace, PermissionMode::Default, None).await;
    let write = tokio::spawn({
        let base = base.clone();
        async move {
            invoke(
                &base,
                json!({"tool": "Write", "user": "alice",
                       "args": {"file_path": "secret.txt", "content": "alice's secret"}}),
            )
            .await
        }
    });
    let pending = loop {
        let list = get(&format!("{base}/v1/approvals?user=alice")).await;
        if let Some(first) = list["pending"].as_array().and_then(|p| p.first()) {
            break first.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(pending["user"], "alice", "{pending}");
    let id = pending["id"].as_str().expect("an id").to_string();
    for query in ["?user=bob", "", "?user="] {
        let list = get(&format!("{base}/v1/approvals{query}")).await;
        assert_eq!(list["pending"], json!([]), "{query}: {list}");
        let (status, answer) = post(
            &format!("{base}/v1/approvals{query}"),
            &json!({"id": id, "decision": "allow_once"}),
        )
        .await;
        assert_eq!(status, 404, "{query}: {answer}");
    }
    let (status, answer) = post(
        &format!("{base}/v1/approvals?user=alice"),
        &json!({"id": id, "decision": "deny", "reason": "not now"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, written) = write.await.expect("joined");
    assert!(written.to_string().contains("not now"), "{written}");

    let client = questions.client("s", Some("default"), Some("alice"));
    let asking = tokio::spawn(async move {
        client
            .0
            .elicit(json!({"message": "Alice's PIN?", "requestedSchema": {
                "type": "object", "properties": {"pin": {"type": "string"}}}}))
            .await
    });
    let question = loop {
        let list = get(&format!("{base}/v1/questions?user=alice")).await;
        if let Some(first) = list["pending"].as_array().and_then(|p| p.first()) {
            break first.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let id = question["id"].as_str().expect("an id").to_string();
    for query in ["?user=bob", ""] {
        let list = get(&format!("{base}/v1/questions{query}")).await;
        assert_eq!(list["pending"], json!([]), "{query}: {list}");
        let (status, answer) = post(
            &format!("{base}/v1/questions{query}"),
            &json!({"id": id, "action": "accept", "content": {"pin": "0000"}}),
        )
        .await;
        assert_eq!(status, 404, "{query}: {answer}");
    }
    let (status, answer) = post(
        &format!("{base}/v1/questions?user=alice"),
        &json!({"id": id, "action": "accept", "content": {"pin": "1234"}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        asking.await.expect("joined"),
        Ok(json!({"action": "accept", "content": {"pin": "1234"}}))
    );
}

/// Issue 22 item 4's class (as item 15 for chat): every invoked call of a token ran in one
/// session, so one user's calls used up another's rate limit (and shared background processes
/// and the sandbox). The session key now names the agent and the user.
#[tokio::test]
async fn h22_4_invoked_calls_are_keyed_per_agent_and_user() {
    let workspace = workspace("keys");
    let (base, _, _) = serve(&workspace, PermissionMode::Default, RateLimiter::new(1, 1)).await;
    let call = |user: &str, agent: &str| json!({"tool": "datetime", "args": {}, "user": user, "agent": agent});
    let (status, answer) = invoke(&base, call("alice", "default")).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = invoke(&base, call("alice", "default")).await;
    assert_eq!(status, 429, "alice's limit: {answer}");
    for (user, agent) in [("bob", "default"), ("alice", "ops")] {
        let (status, answer) = invoke(&base, call(user, agent)).await;
        assert_eq!(status, 200, "{user} of {agent}: {answer}");
    }
}

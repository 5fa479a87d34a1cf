use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::context::CallContext;
use crate::tool::{SideEffect, ToolSpec};

#[derive(Default)]
struct Memory {
    stored: Mutex<Vec<(Option<String>, String)>>,
}

impl Remember for Memory {
    fn always_key(&self, request: &PermissionRequest<'_>) -> Option<String> {
        request
            .input
            .get("command")
            .and_then(|c| c.as_str())
            .map(|c| c.trim().to_string())
    }

    fn remember<'a>(&'a self, agent: Option<&'a str>, key: &'a str) -> BoxFuture<'a, ()> {
        if let Ok(mut stored) = self.stored.lock() {
            stored.push((agent.map(str::to_string), key.to_string()));
        }
        Box::pin(async {})
    }
}

struct Says(Option<Resolution>);

impl Prompter for Says {
    fn prompt(&self, _request: PendingApproval) -> BoxFuture<'static, Option<Resolution>> {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

fn spec() -> ToolSpec {
    ToolSpec::new("exec", "run", SideEffect::Network)
}

fn ctx() -> CallContext {
    let mut ctx = CallContext::new("session-1");
    ctx.agent_key = Some("ops".into());
    ctx
}

/// Answers the first pending request with `resolution` once it appears.
fn answer_when_pending(broker: Arc<Approvals>, resolution: Resolution) {
    tokio::spawn(async move {
        loop {
            if let Some(first) = broker.pending(None).first() {
                broker
                    .resolve(&first.id, None, resolution)
                    .expect("resolves");
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

#[tokio::test]
async fn an_answer_through_resolve_releases_the_call_and_is_announced() {
    let events = EventBus::default();
    let mut rx = events.subscribe();
    let broker = Arc::new(Approvals::new(events));
    answer_when_pending(Arc::clone(&broker), Resolution::AllowOnce);
    let (spec, ctx, input) = (spec(), ctx(), json!({"command": "make deploy"}));
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    assert_eq!(broker.approve(&request, "high risk").await, Approval::Allow);
    assert!(broker.pending(None).is_empty());
    match rx.recv().await.expect("requested") {
        ToolEvent::ApprovalRequested { request } => {
            assert_eq!(request.summary, "make deploy");
            assert_eq!(request.agent.as_deref(), Some("ops"));
            assert_eq!(request.reason, "high risk");
            assert!(request.expires_at >= request.requested_at + 119_000);
        }
        other => panic!("unexpected {other:?}"),
    }
    match rx.recv().await.expect("resolved") {
        ToolEvent::ApprovalResolved { decision, tool, .. } => {
            assert_eq!((decision, &*tool), ("allow_once", "exec"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn no_answer_in_time_is_a_denial() {
    let broker = Approvals::new(EventBus::default()).with_timeout(Duration::from_millis(50));
    let (spec, ctx, input) = (spec(), ctx(), json!({"command": "x"}));
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    match broker.approve(&request, "r").await {
        Approval::Deny(message) => assert!(message.contains("nobody answered"), "{message}"),
        Approval::Allow => panic!("a timeout must deny"),
    }
    assert!(
        broker.pending(None).is_empty(),
        "the request is gone after its timeout"
    );
}

#[tokio::test]
async fn with_nobody_to_ask_a_request_is_refused_at_once() {
    let events = EventBus::default();
    let mut rx = events.subscribe();
    let broker = Approvals::new(events).unattended();
    let (spec, ctx, input) = (spec(), ctx(), json!({"command": "x"}));
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    match broker.approve(&request, "high risk").await {
        Approval::Deny(message) => {
            assert!(message.contains("nobody can approve it here"), "{message}");
        }
        Approval::Allow => panic!("nobody allowed it"),
    }
    assert!(rx.try_recv().is_err(), "nothing was announced as pending");
}

#[tokio::test]
async fn allow_always_remembers_the_key_for_the_agent() {
    let memory = Arc::new(Memory::default());
    let broker = Arc::new(
        Approvals::new(EventBus::default()).with_remember(Arc::clone(&memory) as Arc<dyn Remember>),
    );
    answer_when_pending(Arc::clone(&broker), Resolution::AllowAlways);
    let (spec, ctx, input) = (spec(), ctx(), json!({"command": " git push "}));
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    assert_eq!(broker.approve(&request, "r").await, Approval::Allow);
    let stored = memory.stored.lock().expect("lock").clone();
    assert_eq!(
        stored,
        vec![(Some("ops".to_string()), "git push".to_string())]
    );
}

#[tokio::test]
async fn allow_always_is_refused_when_nothing_can_be_remembered() {
    let broker =
        Arc::new(Approvals::new(EventBus::default()).with_timeout(Duration::from_millis(300)));
    let waiter = Arc::clone(&broker);
    let task = tokio::spawn(async move {
        let (spec, ctx, input) = (spec(), ctx(), json!({"path": "x"}));
        let request = PermissionRequest {
            spec: &spec,
            input: &input,
            ctx: &ctx,
            script: None,
        };
        waiter.approve(&request, "r").await
    });
    let id = loop {
        if let Some(first) = broker.pending(None).first() {
            break first.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(
        broker.resolve(&id, None, Resolution::AllowAlways),
        Err(ResolveError::CannotRemember(id.clone()))
    );
    broker
        .resolve(
            &id,
            None,
            Resolution::Deny {
                reason: Some("not today".into()),
            },
        )
        .expect("denied");
    match task.await.expect("joined") {
        Approval::Deny(message) => assert!(message.contains("not today"), "{message}"),
        Approval::Allow => panic!("denied"),
    }
    assert_eq!(
        broker.resolve(&id, None, Resolution::AllowOnce),
        Err(ResolveError::Unknown(id))
    );
}

#[tokio::test]
async fn a_prompter_can_answer_and_a_silent_one_leaves_it_to_others() {
    let broker = Approvals::new(EventBus::default())
        .with_prompter(Arc::new(Says(Some(Resolution::AllowOnce))));
    let (spec, ctx, input) = (spec(), ctx(), json!({"command": "x"}));
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    assert_eq!(broker.approve(&request, "r").await, Approval::Allow);

    let broker = Arc::new(Approvals::new(EventBus::default()).with_prompter(Arc::new(Says(None))));
    answer_when_pending(Arc::clone(&broker), Resolution::Deny { reason: None });
    match broker.approve(&request, "r").await {
        Approval::Deny(message) => assert!(message.contains("a person refused it"), "{message}"),
        Approval::Allow => panic!("denied through resolve"),
    }
}

/// Issue 23: a request whose caller went away (its session closed, its turn was cancelled)
/// is withdrawn at once: denied, and gone from the pending list, instead of waiting for
/// someone to approve a call that can no longer run.
#[tokio::test]
async fn a_closed_sessions_request_is_withdrawn() {
    let broker = Arc::new(Approvals::new(EventBus::default()));
    let (spec, mut ctx, input) = (spec(), ctx(), json!({"command": "make deploy"}));
    let cancel = ctx.cancel.clone();
    ctx.cancel = cancel.clone();
    let watcher = Arc::clone(&broker);
    tokio::spawn(async move {
        while watcher.pending(None).is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
    });
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    let Approval::Deny(why) = broker.approve(&request, "high risk").await else {
        panic!("allowed");
    };
    assert!(why.contains("withdrawn"), "{why}");
    assert!(broker.pending(None).is_empty());
}

/// Issue 23: an MCP client's call is never left on `/v1/approvals` where its user cannot see
/// it: a client that cannot be asked gets the refusal at once, with the settings to change.
#[tokio::test]
async fn an_mcp_client_that_cannot_be_asked_is_refused_at_once() {
    let broker = Approvals::new(EventBus::default());
    let (spec, mut ctx, input) = (spec(), ctx(), json!({"url": "https://example.com"}));
    ctx.ask_via = crate::context::AskVia::McpClient {
        confirms_calls: false,
    };
    let request = PermissionRequest {
        spec: &spec,
        input: &input,
        ctx: &ctx,
        script: None,
    };
    let Approval::Deny(why) = broker.approve(&request, "high risk").await else {
        panic!("allowed");
    };
    assert!(why.contains("[mcp_server] client_confirms"), "{why}");
    assert!(broker.pending(None).is_empty());
}

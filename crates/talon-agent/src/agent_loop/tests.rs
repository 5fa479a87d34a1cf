//! Issue 22 item 3: the gate belongs to the turn. One agent (cached per agent key, so shared by
//! every session and user) runs exclusive calls of different sessions at once, and a nested turn
//! started by a tool (as `sessions_send` does) never waits on its caller's gate. Overlap is
//! observed with a rendezvous, never timed; the timeouts only turn a deadlock into a failure.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use talon_core::{
    Authorized, CallContext, Pipeline, Registry, SideEffect, Tool, ToolOutput, ToolSpec,
};
use tokio::sync::Barrier;

use super::{Agent, LoopConfig, TurnStop};
use crate::message::Message;
use crate::mock::{MockServer, Script};
use crate::provider::RetryPolicy;
use crate::provider::openai::OpenAi;

/// How long a test waits before calling a hang a deadlock.
const DEADLOCK_GUARD: Duration = Duration::from_secs(30);

#[derive(Deserialize, schemars::JsonSchema)]
struct Empty {}

/// Exclusive (not parallel-safe), like `exec`: answers "met" once two calls are inside it at
/// the same time, "alone" if the other never came.
struct Rendezvous(Arc<Barrier>);

impl Tool for Rendezvous {
    type Input = Empty;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("rendezvous", "Waits for a second caller.", SideEffect::None)
            .parallel_safe(false)
    }
    async fn execute(&self, _call: Authorized<Empty>) -> ToolOutput {
        match tokio::time::timeout(DEADLOCK_GUARD, self.0.wait()).await {
            Ok(_) => ToolOutput::text("met"),
            Err(_) => ToolOutput::text("alone: the other session's call never started"),
        }
    }
}

/// Read-only and parallel-safe.
struct Lookup;

impl Tool for Lookup {
    type Input = Empty;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("lookup", "Looks something up.", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<Empty>) -> ToolOutput {
        ToolOutput::text("found")
    }
}

/// Exclusive, like `sessions_send`: runs a turn of the same agent in another session.
struct Delegate(Arc<OnceLock<Weak<Agent>>>);

impl Tool for Delegate {
    type Input = Empty;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("delegate", "Asks another session.", SideEffect::None).parallel_safe(false)
    }
    async fn execute(&self, _call: Authorized<Empty>) -> ToolOutput {
        let Some(agent) = self.0.get().and_then(Weak::upgrade) else {
            return ToolOutput::error("no agent");
        };
        let outcome = agent
            .run_turn(
                Arc::new(CallContext::new("agent:default:test:direct:other")),
                &[],
                Message::user("ping"),
                &|_| {},
            )
            .await;
        ToolOutput::text(format!("other session answered: {}", outcome.text))
    }
}

async fn agent_with(registry: Registry, script: Value) -> (Agent, MockServer) {
    let pipeline = Pipeline::builder(Arc::new(registry)).build().unwrap();
    let script = Script::from_json(&script.to_string()).unwrap();
    let mock = MockServer::start(script, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let provider = OpenAi::new(
        "mock",
        &format!("{}/v1", mock.url()),
        Some("sk-test-key-123"),
        RetryPolicy::default(),
    )
    .unwrap();
    let agent = Agent::new(
        Arc::new(pipeline),
        Arc::new(provider),
        LoopConfig {
            model: "mock-model".into(),
            ..LoopConfig::default()
        },
    );
    (agent, mock)
}

/// The text of every tool result in a turn's messages.
fn tool_results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResults { results } => Some(results),
            _ => None,
        })
        .flatten()
        .map(|r| r.content.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h22_3_sessions_of_one_agent_run_exclusive_calls_at_once() {
    let registry = Registry::new();
    registry
        .register(Rendezvous(Arc::new(Barrier::new(2))))
        .unwrap();
    let (agent, _mock) = agent_with(
        registry,
        json!({
            "repeat_last": true,
            "turns": [{"tool_calls": [{"name": "rendezvous", "arguments": {}}]}],
            "after_tool_results": {"text": "done"}
        }),
    )
    .await;
    let agent = Arc::new(agent);
    let turns: Vec<_> = ["alice", "bob"]
        .into_iter()
        .map(|user| {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                let mut ctx = CallContext::new(format!("agent:default:http:direct:{user}"));
                ctx.user = Some(user.into());
                agent
                    .run_turn(Arc::new(ctx), &[], Message::user("go"), &|_| {})
                    .await
            })
        })
        .collect();
    for turn in turns {
        let outcome = turn.await.unwrap();
        assert_eq!(outcome.stop, TurnStop::Final);
        assert_eq!(
            tool_results(&outcome.messages),
            ["met"],
            "one session's exclusive call must not wait for another session's"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h22_3_a_nested_turn_never_waits_on_its_callers_gate() {
    let slot = Arc::new(OnceLock::new());
    let registry = Registry::new();
    registry.register(Delegate(Arc::clone(&slot))).unwrap();
    registry.register(Lookup).unwrap();
    // The caller delegates (an exclusive call); the nested turn calls a tool, then answers.
    let (agent, _mock) = agent_with(
        registry,
        json!({"turns": [
            {"tool_calls": [{"name": "delegate", "arguments": {}}]},
            {"tool_calls": [{"name": "lookup", "arguments": {}}]},
            {"text": "pong"},
            {"text": "done"}
        ]}),
    )
    .await;
    let agent = Arc::new(agent);
    slot.set(Arc::downgrade(&agent)).unwrap();
    let turn = agent.run_turn(
        Arc::new(CallContext::new("agent:default:test:direct:caller")),
        &[],
        Message::user("go"),
        &|_| {},
    );
    let outcome = tokio::time::timeout(DEADLOCK_GUARD, turn)
        .await
        .expect("deadlock: the nested turn waited on its caller's gate");
    assert_eq!(outcome.stop, TurnStop::Final);
    assert_eq!(outcome.text, "done");
    assert_eq!(
        tool_results(&outcome.messages),
        ["other session answered: pong"]
    );
}

//! The loop end to end against the scripted mock provider, in both wire formats, with a real
//! pipeline: parallel read-only calls, a mutating call that needs approval, a call a hook
//! blocks, the final answer; loop detection; cancellation; retries and clear provider errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use talon_agent::mock::{MockServer, Script};
use talon_agent::provider::anthropic::Anthropic;
use talon_agent::provider::openai::OpenAi;
use talon_agent::provider::{Provider, ProviderKind, RetryPolicy};
use talon_agent::{Agent, LoopConfig, Message, RunEvent, TurnStop};
use talon_core::hooks::{FnHook, HookEvent, HookMatcher, HookOutcome, HookPermission, Hooks};
use talon_core::permission::{Approval, Approver, PermissionRequest};
use talon_core::{
    Authorized, CallContext, Pipeline, Registry, SideEffect, Tool, ToolOutput, ToolSpec,
};

#[derive(Deserialize, schemars::JsonSchema)]
struct KeyInput {
    key: String,
}

/// Read-only, parallel-safe; records how many run at once.
struct Lookup {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Tool for Lookup {
    type Input = KeyInput;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("lookup", "Looks a key up.", SideEffect::None)
    }
    async fn execute(&self, call: Authorized<KeyInput>) -> ToolOutput {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(150)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        ToolOutput::text(format!("value of {}", call.input().key))
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NoteInput {
    text: String,
}

/// Mutating: needs approval in the default mode.
struct Note(Arc<Mutex<Vec<String>>>);

impl Tool for Note {
    type Input = NoteInput;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("note", "Writes a note.", SideEffect::Mutating)
    }
    async fn execute(&self, call: Authorized<NoteInput>) -> ToolOutput {
        self.0.lock().unwrap().push(call.input().text.clone());
        ToolOutput::text("noted")
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Empty {}

/// Blocked by a hook in the scenario.
struct Danger;

impl Tool for Danger {
    type Input = Empty;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("danger", "Never runs.", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<Empty>) -> ToolOutput {
        ToolOutput::text("danger ran")
    }
}

/// Slow and read-only, for cancellation.
struct Slow;

impl Tool for Slow {
    type Input = Empty;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("slow", "Takes ten seconds.", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<Empty>) -> ToolOutput {
        tokio::time::sleep(Duration::from_secs(10)).await;
        ToolOutput::text("slow done")
    }
}

/// Approves and remembers what it was asked.
#[derive(Default)]
struct Asked(Mutex<Vec<String>>);

impl Approver for Asked {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        _reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        self.0.lock().unwrap().push(request.spec.name.clone());
        Box::pin(async { Approval::Allow })
    }
}

struct World {
    pipeline: Arc<Pipeline>,
    peak: Arc<AtomicUsize>,
    notes: Arc<Mutex<Vec<String>>>,
    asked: Arc<Asked>,
}

fn world() -> World {
    let registry = Registry::new();
    let peak = Arc::new(AtomicUsize::new(0));
    let notes = Arc::new(Mutex::new(Vec::new()));
    registry
        .register(Lookup {
            running: Arc::new(AtomicUsize::new(0)),
            peak: Arc::clone(&peak),
        })
        .unwrap();
    registry.register(Note(Arc::clone(&notes))).unwrap();
    registry.register(Danger).unwrap();
    registry.register(Slow).unwrap();
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(
            Some("danger"),
            Arc::new(FnHook(|_: &talon_core::hooks::HookInput| HookOutcome {
                permission: Some(HookPermission::Deny),
                reason: Some("danger is not allowed here".into()),
                ..HookOutcome::default()
            })),
        ),
    );
    let asked = Arc::new(Asked::default());
    let pipeline = Pipeline::builder(Arc::new(registry))
        .hooks(hooks)
        .approver(Arc::clone(&asked) as Arc<dyn Approver>)
        .build()
        .unwrap();
    World {
        pipeline: Arc::new(pipeline),
        peak,
        notes,
        asked,
    }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
        idle_timeout: Duration::from_secs(2),
    }
}

fn provider(kind: ProviderKind, mock: &MockServer, policy: RetryPolicy) -> Arc<dyn Provider> {
    match kind {
        ProviderKind::Openai => Arc::new(
            OpenAi::new(
                "mock",
                &format!("{}/v1", mock.url()),
                Some("sk-test-key-123"),
                policy,
            )
            .unwrap(),
        ),
        ProviderKind::Anthropic => {
            Arc::new(Anthropic::new("mock", &mock.url(), Some("sk-test-key-123"), policy).unwrap())
        }
    }
}

async fn mock(script: Value) -> MockServer {
    let script = Script::from_json(&script.to_string()).unwrap();
    MockServer::start(script, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn agent(world: &World, kind: ProviderKind, mock: &MockServer) -> Agent {
    Agent::new(
        Arc::clone(&world.pipeline),
        provider(kind, mock, fast_retries()),
        LoopConfig {
            model: "mock-model".into(),
            system: Some("You are a test.".into()),
            ..LoopConfig::default()
        },
    )
}

/// The tool results the client sent back in request `n`, as (call id, text, is_error).
fn results_sent(kind: ProviderKind, request: &Value) -> Vec<(String, String, bool)> {
    let messages = request["messages"].as_array().unwrap();
    match kind {
        ProviderKind::Openai => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                let text = m["content"].as_str().unwrap().to_string();
                (
                    m["tool_call_id"].as_str().unwrap().to_string(),
                    text.clone(),
                    text.starts_with("Error: "),
                )
            })
            .collect(),
        ProviderKind::Anthropic => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                (
                    b["tool_use_id"].as_str().unwrap().to_string(),
                    b["content"][0]["text"].as_str().unwrap().to_string(),
                    b["is_error"].as_bool().unwrap(),
                )
            })
            .collect(),
    }
}

const KINDS: [ProviderKind; 2] = [ProviderKind::Openai, ProviderKind::Anthropic];

#[tokio::test]
async fn a_scripted_conversation_runs_end_to_end_in_both_formats() {
    for kind in KINDS {
        let world = world();
        let mock = mock(json!({"turns": [
            {"text": "Looking both up.", "tool_calls": [
                {"id": "c1", "name": "lookup", "arguments": {"key": "a"}},
                {"id": "c2", "name": "lookup", "arguments": {"key": "b"}}]},
            {"tool_calls": [{"id": "c3", "name": "note", "arguments": {"text": "a and b"}}]},
            {"tool_calls": [{"id": "c4", "name": "danger", "arguments": {}}]},
            {"text": "All done."}
        ]}))
        .await;
        let events = Mutex::new(Vec::new());
        let sink = |e: RunEvent| events.lock().unwrap().push(e);
        let outcome = agent(&world, kind, &mock)
            .run_turn(
                Arc::new(CallContext::new("s1")),
                &[
                    Message::user("earlier"),
                    Message::Assistant {
                        text: "ok".into(),
                        tool_calls: vec![],
                    },
                ],
                Message::user("look up a and b"),
                &sink,
            )
            .await;
        assert_eq!(outcome.stop, TurnStop::Final, "{kind:?}");
        assert_eq!(outcome.text, "All done.");
        assert_eq!(outcome.iterations, 4);
        // user, (assistant, results) x3, final assistant.
        assert_eq!(outcome.messages.len(), 8, "{:?}", outcome.messages);
        assert_eq!(
            world.peak.load(Ordering::SeqCst),
            2,
            "the two lookups ran together"
        );
        assert_eq!(*world.notes.lock().unwrap(), ["a and b"]);
        assert_eq!(
            *world.asked.0.lock().unwrap(),
            ["note"],
            "only the mutating call asked"
        );

        let requests = mock.requests();
        assert_eq!(requests.len(), 4);
        let first = &requests[0];
        assert_eq!(first["model"], "mock-model");
        let offered: Vec<&str> = first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .unwrap()
            })
            .collect();
        assert_eq!(offered, ["danger", "lookup", "note", "slow"]);
        assert_eq!(
            results_sent(kind, &requests[1]),
            [
                ("c1".into(), "value of a".into(), false),
                ("c2".into(), "value of b".into(), false)
            ]
        );
        let blocked = results_sent(kind, &requests[3]);
        assert_eq!(blocked[3].0, "c4");
        assert!(blocked[3].2, "blocked calls are errors: {blocked:?}");
        assert!(
            blocked[3].1.contains("danger is not allowed here"),
            "{blocked:?}"
        );
        let events = events.lock().unwrap();
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Looking both up.All done.");
        let finished = events
            .iter()
            .filter(|e| matches!(e, RunEvent::ToolFinished { .. }))
            .count();
        assert_eq!(finished, 4);
    }
}

#[tokio::test]
async fn the_loop_detector_warns_then_stops_the_run() {
    for kind in KINDS {
        let world = world();
        let mock = mock(json!({"repeat_last": true, "turns": [
            {"tool_calls": [{"name": "lookup", "arguments": {"key": "same"}}]}
        ]}))
        .await;
        let outcome = agent(&world, kind, &mock)
            .run_turn(
                Arc::new(CallContext::new("s2")),
                &[],
                Message::user("go"),
                &|_| {},
            )
            .await;
        assert!(
            matches!(&outcome.stop, TurnStop::LoopDetected(why) if why.contains("lookup")),
            "{:?}",
            outcome.stop
        );
        assert_eq!(outcome.iterations, 5);
        let requests = mock.requests();
        let warned = results_sent(kind, &requests[3]);
        assert!(
            warned[2].1.contains("Loop warning"),
            "the third repeat warns: {warned:?}"
        );
    }
}

#[tokio::test]
async fn cancelling_aborts_running_calls_and_answers_every_call() {
    for kind in KINDS {
        let world = world();
        let mock = mock(json!({"turns": [
            {"tool_calls": [
                {"id": "q1", "name": "lookup", "arguments": {"key": "k"}},
                {"id": "q2", "name": "slow", "arguments": {}}]},
            {"text": "never asked"}
        ]}))
        .await;
        let ctx = CallContext::new("s3");
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            cancel.cancel();
        });
        let outcome = agent(&world, kind, &mock)
            .run_turn(Arc::new(ctx), &[], Message::user("go"), &|_| {})
            .await;
        assert_eq!(outcome.stop, TurnStop::Cancelled);
        let Some(Message::ToolResults { results }) = outcome.messages.last() else {
            panic!("the turn ends with the results: {:?}", outcome.messages);
        };
        assert_eq!(results.len(), 2, "every call has a result");
        assert_eq!(
            results[0].content, "value of k",
            "the finished call keeps its result"
        );
        assert!(
            results[1].is_error && results[1].content.starts_with("aborted"),
            "{:?}",
            results[1]
        );
        assert_eq!(mock.requests().len(), 1, "no request after cancelling");
    }
}

#[tokio::test]
async fn transient_errors_are_retried_and_bad_keys_are_not() {
    for kind in KINDS {
        let world = world();
        let mock = mock(json!({"turns": [
            {"status": 500},
            {"status": 429, "retry_after": 0},
            {"text": "recovered"},
            {"status": 401, "error": "invalid x-api-key"}
        ]}))
        .await;
        let a = agent(&world, kind, &mock);
        let ok = a
            .run_turn(
                Arc::new(CallContext::new("s4")),
                &[],
                Message::user("hi"),
                &|_| {},
            )
            .await;
        assert_eq!(ok.stop, TurnStop::Final);
        assert_eq!(ok.text, "recovered");
        assert_eq!(mock.requests().len(), 3);
        let refused = a
            .run_turn(
                Arc::new(CallContext::new("s4")),
                &[],
                Message::user("again"),
                &|_| {},
            )
            .await;
        let TurnStop::Failed(why) = &refused.stop else {
            panic!("{:?}", refused.stop);
        };
        assert!(
            why.contains("refused the API key") && why.contains("invalid x-api-key"),
            "{why}"
        );
        assert_eq!(mock.requests().len(), 4, "an auth error is not retried");
    }
}

#[tokio::test]
async fn a_stream_that_stalls_or_breaks_midway_is_a_clear_failure() {
    for kind in KINDS {
        // A stall before any text: nothing was passed on, so each attempt is retried, and the
        // last error says what happened. A stream cut after some text cannot be retried.
        for (script, attempts, says) in [
            (
                json!({"repeat_last": true, "turns": [{"text": "one two three four", "stall_ms": 5000}]}),
                4,
                "sent nothing for",
            ),
            (
                json!({"turns": [{"text": "one two three four five six seven eight", "cut_stream": true}]}),
                1,
                "ended before the answer was complete",
            ),
        ] {
            let world = world();
            let mock = mock(script).await;
            let mut policy = fast_retries();
            policy.idle_timeout = Duration::from_millis(300);
            let a = Agent::new(
                Arc::clone(&world.pipeline),
                provider(kind, &mock, policy),
                LoopConfig {
                    model: "m".into(),
                    ..LoopConfig::default()
                },
            );
            let outcome = a
                .run_turn(
                    Arc::new(CallContext::new("s5")),
                    &[],
                    Message::user("hi"),
                    &|_| {},
                )
                .await;
            let TurnStop::Failed(why) = &outcome.stop else {
                panic!("{kind:?}: {:?}", outcome.stop);
            };
            assert!(why.contains(says), "{kind:?}: {why}");
            assert_eq!(mock.requests().len(), attempts, "{kind:?}: {why}");
        }
    }
}

#[tokio::test]
async fn concurrent_conversations_share_one_script() {
    for kind in KINDS {
        let world = world();
        let mock = mock(json!({
            "repeat_last": true,
            "turns": [{"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]}],
            "after_tool_results": {"text": "looked up"}
        }))
        .await;
        let agent = Arc::new(agent(&world, kind, &mock));
        let runs: Vec<_> = (0..8)
            .map(|i| {
                let agent = Arc::clone(&agent);
                tokio::spawn(async move {
                    agent
                        .run_turn(
                            Arc::new(CallContext::new(format!("c{i}"))),
                            &[],
                            Message::user("go"),
                            &|_| {},
                        )
                        .await
                })
            })
            .collect();
        for run in runs {
            let outcome = run.await.unwrap();
            assert_eq!(outcome.stop, TurnStop::Final, "{kind:?}");
            assert_eq!(outcome.text, "looked up");
            assert_eq!(outcome.iterations, 2);
        }
        assert_eq!(mock.requests().len(), 16);
    }
}

/// A pipeline whose hooks refuse prompts saying "forbidden", add context to the others, and
/// send the model back once when it first answers.
fn hooked_world() -> World {
    let registry = Registry::new();
    registry.register(Danger).unwrap();
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::UserPromptSubmit,
        HookMatcher::new(
            None,
            Arc::new(FnHook(|input: &talon_core::hooks::HookInput| {
                if input
                    .prompt
                    .as_deref()
                    .unwrap_or_default()
                    .contains("forbidden")
                {
                    HookOutcome {
                        permission: Some(HookPermission::Deny),
                        reason: Some("no forbidden prompts".into()),
                        ..HookOutcome::default()
                    }
                } else {
                    HookOutcome {
                        additional_context: Some("(context from a hook)".into()),
                        ..HookOutcome::default()
                    }
                }
            })),
        ),
    );
    hooks.add(
        HookEvent::Stop,
        HookMatcher::new(
            None,
            Arc::new(FnHook(|input: &talon_core::hooks::HookInput| {
                if input.stop_hook_active == Some(true) {
                    HookOutcome::default()
                } else {
                    HookOutcome {
                        permission: Some(HookPermission::Deny),
                        reason: Some("Also check the tests.".into()),
                        ..HookOutcome::default()
                    }
                }
            })),
        ),
    );
    World {
        pipeline: Arc::new(
            Pipeline::builder(Arc::new(registry))
                .hooks(hooks)
                .build()
                .unwrap(),
        ),
        peak: Arc::default(),
        notes: Arc::default(),
        asked: Arc::default(),
    }
}

#[tokio::test]
async fn run_hooks_refuse_prompts_add_context_and_keep_the_model_working() {
    for kind in KINDS {
        let world = hooked_world();
        let mock =
            mock(json!({"turns": [{"text": "first answer"}, {"text": "tests checked"}]})).await;
        let a = agent(&world, kind, &mock);
        let refused = a
            .run_turn(
                Arc::new(CallContext::new("h")),
                &[],
                Message::user("something forbidden"),
                &|_| {},
            )
            .await;
        assert_eq!(
            refused.stop,
            TurnStop::PromptBlocked("no forbidden prompts".into())
        );
        assert!(refused.messages.is_empty());
        assert!(
            mock.requests().is_empty(),
            "a refused prompt never reaches the model"
        );

        let outcome = a
            .run_turn(
                Arc::new(CallContext::new("h")),
                &[],
                Message::user("do the work"),
                &|_| {},
            )
            .await;
        assert_eq!(outcome.stop, TurnStop::Final, "{kind:?}");
        assert_eq!(outcome.text, "tests checked");
        assert_eq!(
            outcome.iterations, 2,
            "the Stop hook sent the model back once"
        );
        let requests = mock.requests();
        let first = requests[0].to_string();
        assert!(
            first.contains("do the work") && first.contains("(context from a hook)"),
            "{first}"
        );
        assert!(requests[1].to_string().contains("Also check the tests."));
    }
}

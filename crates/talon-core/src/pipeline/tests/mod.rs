use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::hooks::{CommandHook, FnHook, Hook, HookInput, HookMatcher, HookOutcome};
use crate::permission::StaticApprover;
use crate::policy::{PolicyConfig, ToolPolicy};
use crate::test_tools::{Bad, Misbehave, Named, NeedsArgs};
use crate::tool::SideEffect;

fn registry() -> Arc<Registry> {
    let r = Registry::new();
    r.register(Named::new("read_file")).expect("register");
    r.register(Named::new("datetime")).expect("register");
    r.register(Named::with("write_file", SideEffect::Mutating))
        .expect("register");
    r.register(Named::with("exec", SideEffect::Network))
        .expect("register");
    r.register(Named::with("spawn", SideEffect::Spawns))
        .expect("register");
    r.register(NeedsArgs).expect("register");
    r.register(Bad("panics", Misbehave::Panic))
        .expect("register");
    r.register(Bad("sleeps", Misbehave::Sleep(Duration::from_secs(5))))
        .expect("register");
    r.register(Bad(
        "leaks",
        Misbehave::Output(Box::new(
            ToolOutput::text("key sk-abcdefghijklmnopqrstuvwx1234")
                .with_user("user sees ghp_abcdefghijklmnopqrstuvwxyz0123456789")
                .with_deliverable("AKIAIOSFODNN7EXAMPLE"),
        )),
    ))
    .expect("register");
    r.register(Bad(
        "fails",
        Misbehave::Output(Box::new(ToolOutput::error("it broke"))),
    ))
    .expect("register");
    r.register(Bad(
        "huge",
        Misbehave::Output(Box::new(ToolOutput::text("x\n".repeat(100_000)))),
    ))
    .expect("register");
    Arc::new(r)
}

fn pipeline() -> Pipeline {
    Pipeline::builder(registry()).build().expect("pipeline")
}

fn ctx() -> Arc<CallContext> {
    Arc::new(CallContext::new("session-1"))
}

fn ctx_with(f: impl FnOnce(&mut CallContext)) -> Arc<CallContext> {
    let mut c = CallContext::new("session-1");
    f(&mut c);
    Arc::new(c)
}

async fn call(p: &Pipeline, c: Arc<CallContext>, name: &str, args: Value) -> CallOutcome {
    p.call(c, ToolCall::new(name, args)).await
}

#[tokio::test]
async fn success_path() {
    let p = pipeline();
    let out = call(&p, ctx(), "read_file", json!({"text": "hello"})).await;
    assert_eq!(out.failed_stage, None);
    assert_eq!(out.output.for_llm, "hello");
    assert_eq!(out.tool, "read_file");
}

#[tokio::test]
async fn step1_unknown_tool_names_close_matches_the_caller_may_use() {
    let p = Pipeline::builder(registry())
        .policy(
            PolicyEngine::new(PolicyConfig {
                global: ToolPolicy {
                    deny: vec!["write_file".into()],
                    ..Default::default()
                },
                ..Default::default()
            })
            .expect("valid"),
        )
        .build()
        .expect("pipeline");
    let out = call(&p, ctx(), "reed_file", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::UnknownTool));
    assert!(out.output.is_error);
    assert!(
        out.output.for_llm.contains("Did you mean: read_file"),
        "{}",
        out.output.for_llm
    );
    let out = call(&p, ctx(), "write_fil", json!({})).await;
    assert!(
        !out.output.for_llm.contains("write_file"),
        "denied tools are not suggested: {}",
        out.output.for_llm
    );
}

#[tokio::test]
async fn step1_deferred_activation_registers_on_miss() {
    let registry = registry();
    let r2 = Arc::clone(&registry);
    let p = Pipeline::builder(registry)
        .deferred_activator(Arc::new(move |name: &str| {
            name == "late_tool" && r2.register(Named::new("late_tool")).is_ok()
        }))
        .build()
        .expect("pipeline");
    let out = call(&p, ctx(), "late_tool", json!({})).await;
    assert_eq!(out.failed_stage, None, "{}", out.output.for_llm);
}

#[tokio::test]
async fn step2_policy_fails_closed() {
    let config = PolicyConfig {
        global: ToolPolicy {
            profile: Some("minimal".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = Pipeline::builder(registry())
        .policy(PolicyEngine::new(config).expect("valid"))
        .build()
        .expect("pipeline");
    let out = call(&p, ctx(), "read_file", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Policy));
    assert!(
        out.output
            .for_llm
            .starts_with("tool not allowed by policy: read_file")
    );
    assert!(
        p.definitions(&ctx(), WireFormat::OpenAi).is_empty(),
        "offered list and authorization agree"
    );
}

#[tokio::test]
async fn step2_subagent_and_request_allow_list_apply_to_calls() {
    let p = pipeline();
    let sub = ctx_with(|c| c.spawn_depth = 1);
    assert_eq!(
        call(&p, sub, "spawn", json!({})).await.failed_stage,
        Some(FailedStage::Policy)
    );
    let topic = ctx_with(|c| c.tool_allow = Some(Arc::from(vec!["datetime".to_string()])));
    assert_eq!(
        call(&p, Arc::clone(&topic), "read_file", json!({}))
            .await
            .failed_stage,
        Some(FailedStage::Policy)
    );
    assert_eq!(
        call(&p, topic, "datetime", json!({})).await.failed_stage,
        None
    );
}

#[tokio::test]
async fn step3_validation_names_the_field() {
    let p = pipeline();
    let out = call(&p, ctx(), "needs_args", json!({"path": 5, "content": "x"})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Validation));
    assert!(
        out.output.for_llm.contains("field `path`"),
        "{}",
        out.output.for_llm
    );
    assert!(
        out.output.for_llm.contains("not of type \"string\""),
        "{}",
        out.output.for_llm
    );

    let out = call(
        &p,
        ctx(),
        "needs_args",
        json!({"path": "a", "content": "b", "mode": "sideways"}),
    )
    .await;
    assert!(
        out.output.for_llm.contains("field `mode`"),
        "{}",
        out.output.for_llm
    );

    let out = call(&p, ctx(), "needs_args", json!({"path": "a"})).await;
    assert!(
        out.output
            .for_llm
            .contains("\"content\" is a required property"),
        "{}",
        out.output.for_llm
    );

    let out = call(
        &p,
        ctx(),
        "needs_args",
        json!("{\"path\":\"a\",\"content\":\"b\"}"),
    )
    .await;
    assert_eq!(
        out.output.for_llm, "a=b",
        "a JSON string holding an object is accepted"
    );
}

#[tokio::test]
async fn step3_empty_arguments_guard() {
    let p = pipeline();
    for empty in [json!({}), Value::Null, json!("")] {
        let out = call(&p, ctx(), "needs_args", empty).await;
        assert_eq!(out.failed_stage, Some(FailedStage::Validation));
        assert!(
            out.output
                .for_llm
                .starts_with("Tool call had empty arguments (required: path, content)"),
            "{}",
            out.output.for_llm
        );
    }
    assert_eq!(
        call(&p, ctx(), "datetime", json!({})).await.failed_stage,
        None,
        "no required fields, no guard"
    );
}

#[tokio::test]
async fn step4_rate_limit_by_session_and_never_skipped() {
    let p = Pipeline::builder(registry())
        .rate_limiter(RateLimiter::new(3600, 2))
        .build()
        .expect("pipeline");
    let a = ctx();
    assert_eq!(
        call(&p, Arc::clone(&a), "datetime", json!({}))
            .await
            .failed_stage,
        None
    );
    assert_eq!(
        call(&p, Arc::clone(&a), "datetime", json!({}))
            .await
            .failed_stage,
        None
    );
    let out = call(&p, Arc::clone(&a), "datetime", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::RateLimit));
    assert!(out.output.for_llm.contains("rate limit exceeded"));
    // Another session is independent; an empty session key is limited like any other key.
    assert_eq!(
        call(
            &p,
            ctx_with(|c| c.session_key = "other".into()),
            "datetime",
            json!({})
        )
        .await
        .failed_stage,
        None
    );
    let empty = ctx_with(|c| c.session_key.clear());
    for _ in 0..2 {
        assert_eq!(
            call(&p, Arc::clone(&empty), "datetime", json!({}))
                .await
                .failed_stage,
            None
        );
    }
    assert_eq!(
        call(&p, empty, "datetime", json!({})).await.failed_stage,
        Some(FailedStage::RateLimit)
    );
}

#[tokio::test]
async fn steps_run_in_order_and_refusals_stop_early() {
    // A policy refusal does not consume rate limit; a validation error does not reach hooks.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s2 = Arc::clone(&seen);
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(
            None,
            Arc::new(FnHook(move |i: &HookInput| {
                s2.lock().expect("lock").push(i.tool_name.clone());
                HookOutcome::default()
            })),
        ),
    );
    let config = PolicyConfig {
        global: ToolPolicy {
            deny: vec!["read_file".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let p = Pipeline::builder(registry())
        .policy(PolicyEngine::new(config).expect("valid"))
        .rate_limiter(RateLimiter::new(3600, 1))
        .hooks(hooks)
        .build()
        .expect("pipeline");
    assert_eq!(
        call(&p, ctx(), "read_file", json!({})).await.failed_stage,
        Some(FailedStage::Policy)
    );
    assert_eq!(
        call(&p, ctx(), "needs_args", json!({"path": 1}))
            .await
            .failed_stage,
        Some(FailedStage::Validation)
    );
    assert!(
        seen.lock().expect("lock").is_empty(),
        "hooks did not run for refused calls"
    );
    assert_eq!(
        call(&p, ctx(), "datetime", json!({})).await.failed_stage,
        None,
        "the one allowed call is still available"
    );
    assert_eq!(*seen.lock().expect("lock"), vec!["datetime"]);
    assert_eq!(
        call(&p, ctx(), "datetime", json!({})).await.failed_stage,
        Some(FailedStage::RateLimit)
    );
    assert_eq!(
        seen.lock().expect("lock").len(),
        1,
        "a rate-limited call does not reach hooks"
    );
}

mod h21;
mod h22;
mod late_steps;
mod script;

//! Steps 5-10: hooks, permission, execution, post hooks, scrubbing, audit.

use super::*;

fn pre_hook(f: impl Fn(&HookInput) -> HookOutcome + Send + Sync + 'static) -> Hooks {
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(None, Arc::new(FnHook(f))),
    );
    hooks
}

#[tokio::test]
async fn step5_pre_hook_blocks_even_in_bypass_mode() {
    let p = Pipeline::builder(registry())
        .hooks(pre_hook(|i| {
            if i.tool_name == "exec" {
                HookOutcome::deny("no shell today")
            } else {
                HookOutcome::default()
            }
        }))
        .build()
        .expect("pipeline");
    let bypass = ctx_with(|c| c.permission_mode = PermissionMode::BypassPermissions);
    let out = call(&p, Arc::clone(&bypass), "bash", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Hook));
    assert_eq!(
        out.output.for_llm,
        "PreToolUse hook blocked exec: no shell today"
    );
    assert_eq!(
        call(&p, bypass, "datetime", json!({})).await.failed_stage,
        None
    );
}

#[tokio::test]
async fn step5_pre_hook_rewrites_input_which_is_validated_again() {
    let p = Pipeline::builder(registry())
        .hooks(pre_hook(|i| HookOutcome {
            updated_input: Some(if i.tool_input["content"] == "bad" {
                json!({"path": 1})
            } else {
                json!({"path": "rewritten", "content": "c"})
            }),
            additional_context: Some("remember: hooks ran".into()),
            ..HookOutcome::default()
        }))
        .build()
        .expect("pipeline");
    let out = call(
        &p,
        ctx(),
        "needs_args",
        json!({"path": "orig", "content": "x"}),
    )
    .await;
    assert_eq!(out.output.for_llm, "rewritten=c\n\nremember: hooks ran");
    let out = call(
        &p,
        ctx(),
        "needs_args",
        json!({"path": "orig", "content": "bad"}),
    )
    .await;
    assert_eq!(out.failed_stage, Some(FailedStage::Validation));
    assert!(
        out.output
            .for_llm
            .starts_with("a PreToolUse hook rewrote the input"),
        "{}",
        out.output.for_llm
    );
}

#[tokio::test]
async fn step5_shell_command_hooks_follow_claude_code_exit_codes() {
    let mut hooks = Hooks::default();
    let block = CommandHook::new("cat >/dev/null; echo 'rm is not allowed here' >&2; exit 2");
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(Some("exec"), Arc::new(block)),
    );
    let rewrite = CommandHook::new(
        r#"input=$(cat); case "$input" in *'"tool_name":"needs_args"'*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"path":"from-shell","content":"ok"}}}';; esac"#,
    );
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(Some("needs_args"), Arc::new(rewrite)),
    );
    let broken = CommandHook::new("exit 1");
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(Some("datetime"), Arc::new(broken)),
    );
    let p = Pipeline::builder(registry())
        .hooks(hooks)
        .build()
        .expect("pipeline");
    let bypass = ctx_with(|c| c.permission_mode = PermissionMode::BypassPermissions);
    let out = call(&p, Arc::clone(&bypass), "exec", json!({})).await;
    assert_eq!(
        out.output.for_llm,
        "PreToolUse hook blocked exec: rm is not allowed here"
    );
    let out = call(
        &p,
        Arc::clone(&bypass),
        "needs_args",
        json!({"path": "a", "content": "b"}),
    )
    .await;
    assert_eq!(out.output.for_llm, "from-shell=ok");
    let out = call(&p, bypass, "datetime", json!({})).await;
    assert_eq!(
        out.failed_stage, None,
        "exit codes other than 2 are non-blocking"
    );
}

#[tokio::test]
async fn step6_permission_modes() {
    let p = pipeline();
    let run = |mode: PermissionMode, tool: &'static str| {
        let p = &p;
        async move {
            call(p, ctx_with(|c| c.permission_mode = mode), tool, json!({}))
                .await
                .failed_stage
        }
    };
    use PermissionMode::*;
    let table = [
        (Default, "datetime", None),
        (Default, "write_file", Some(FailedStage::Permission)),
        (Default, "exec", Some(FailedStage::Permission)),
        (AcceptEdits, "write_file", None),
        (AcceptEdits, "exec", Some(FailedStage::Permission)),
        (Plan, "read_file", None),
        (Plan, "write_file", Some(FailedStage::Permission)),
        (DontAsk, "datetime", None),
        (DontAsk, "write_file", Some(FailedStage::Permission)),
        (BypassPermissions, "exec", None),
        (BypassPermissions, "spawn", None),
    ];
    for (mode, tool, expect) in table {
        assert_eq!(run(mode, tool).await, expect, "{mode:?} {tool}");
    }
    let out = call(
        &p,
        ctx_with(|c| c.permission_mode = Plan),
        "write_file",
        json!({}),
    )
    .await;
    assert!(
        out.output.for_llm.contains("not allowed in plan mode"),
        "{}",
        out.output.for_llm
    );
    let out = call(&p, ctx(), "exec", json!({})).await;
    assert!(
        out.output.for_llm.contains("no interactive approver"),
        "{}",
        out.output.for_llm
    );
}

#[tokio::test]
async fn step6_ask_goes_to_the_approver_and_auto_allow_skips_it() {
    let approver = Arc::new(StaticApprover::allowing(["exec"]));
    let p = Pipeline::builder(registry())
        .approver(Arc::clone(&approver) as Arc<dyn Approver>)
        .auto_allow(["write_file"])
        .build()
        .expect("pipeline");
    assert_eq!(call(&p, ctx(), "exec", json!({})).await.failed_stage, None);
    assert_eq!(
        call(&p, ctx(), "spawn", json!({})).await.failed_stage,
        Some(FailedStage::Permission)
    );
    assert_eq!(
        call(&p, ctx(), "write_file", json!({})).await.failed_stage,
        None
    );
    assert_eq!(approver.asked(), vec!["exec", "spawn"]);
    let dont_ask = ctx_with(|c| c.permission_mode = PermissionMode::DontAsk);
    assert_eq!(
        call(&p, dont_ask, "exec", json!({})).await.failed_stage,
        Some(FailedStage::Permission)
    );
    assert_eq!(approver.asked().len(), 2, "dontAsk never asks");
}

#[tokio::test]
async fn step6_checker_rules_decide_before_the_mode() {
    struct DenyWrites;
    impl PermissionChecker for DenyWrites {
        fn check(&self, request: &PermissionRequest<'_>) -> Option<Decision> {
            match request.spec.name.as_str() {
                "exec" => Some(Decision::Allow),
                "datetime" => Some(Decision::Deny("rule: no clocks".into())),
                _ => None,
            }
        }
    }
    let p = Pipeline::builder(registry())
        .permission_checker(Arc::new(DenyWrites))
        .build()
        .expect("pipeline");
    assert_eq!(call(&p, ctx(), "exec", json!({})).await.failed_stage, None);
    assert_eq!(
        call(&p, ctx(), "datetime", json!({})).await.output.for_llm,
        "rule: no clocks"
    );
}

#[tokio::test]
async fn step7_panics_become_error_results() {
    let out = call(&pipeline(), ctx(), "panics", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Panic));
    assert!(
        out.output.for_llm.contains("boom in tool"),
        "{}",
        out.output.for_llm
    );
}

#[tokio::test]
async fn step7_concurrent_panics_do_not_disturb_other_calls() {
    let p = Arc::new(pipeline());
    let handles: Vec<_> = (0..32)
        .map(|i| {
            let p = Arc::clone(&p);
            tokio::spawn(async move {
                let c = ctx_with(|c| c.session_key = format!("s{i}"));
                let name = if i % 2 == 0 { "panics" } else { "datetime" };
                (i, call(&p, c, name, json!({})).await.failed_stage)
            })
        })
        .collect();
    for h in handles {
        let (i, stage) = h.await.expect("task");
        assert_eq!(
            stage,
            if i % 2 == 0 {
                Some(FailedStage::Panic)
            } else {
                None
            }
        );
    }
}

#[tokio::test]
async fn step7_deadline_and_cancellation() {
    let p = Pipeline::builder(registry())
        .default_timeout(Duration::from_millis(100))
        .build()
        .expect("pipeline");
    let out = call(&p, ctx(), "sleeps", json!({})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Timeout));
    assert!(
        out.output.for_llm.contains("timed out after 0.1s"),
        "{}",
        out.output.for_llm
    );

    let p = pipeline();
    let caller_deadline =
        ctx_with(|c| c.deadline = Some(Instant::now() + Duration::from_millis(200)));
    assert_eq!(
        call(&p, caller_deadline, "sleeps", json!({}))
            .await
            .failed_stage,
        Some(FailedStage::Timeout)
    );

    let c = ctx();
    let token = c.cancel.clone();
    let task = tokio::spawn({
        let p = Arc::new(pipeline());
        async move { call(&p, c, "sleeps", json!({})).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    token.cancel();
    let out = task.await.expect("task");
    assert_eq!(out.failed_stage, Some(FailedStage::Cancelled));
}

#[tokio::test]
async fn step7_output_is_capped_with_a_marker() {
    let p = Pipeline::builder(registry())
        .max_output_bytes(4096)
        .build()
        .expect("pipeline");
    let out = call(&p, ctx(), "huge", json!({})).await;
    assert!(
        out.output.for_llm.len() < 4096 + 400,
        "{}",
        out.output.for_llm.len()
    );
    assert!(out.output.for_llm.contains("output truncated by Talon"));
}

#[tokio::test]
async fn step8_failure_hooks_fire_for_every_error_result() {
    let failures = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let successes = Arc::new(Mutex::new(Vec::<String>::new()));
    let (f2, s2) = (Arc::clone(&failures), Arc::clone(&successes));
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::PostToolUseFailure,
        HookMatcher::new(
            None,
            Arc::new(FnHook(move |i: &HookInput| {
                f2.lock()
                    .expect("lock")
                    .push((i.tool_name.clone(), i.error.clone().unwrap_or_default()));
                HookOutcome {
                    additional_context: Some("failure noted".into()),
                    ..HookOutcome::default()
                }
            })),
        ),
    );
    hooks.add(
        HookEvent::PostToolUse,
        HookMatcher::new(
            Some("datetime"),
            Arc::new(FnHook(move |i: &HookInput| {
                s2.lock().expect("lock").push(
                    i.tool_response
                        .as_ref()
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                );
                HookOutcome {
                    suppress_output: true,
                    ..HookOutcome::default()
                }
            })),
        ),
    );
    let p = Pipeline::builder(registry())
        .hooks(hooks)
        .build()
        .expect("pipeline");
    for (name, args) in [
        ("nope", json!({})),
        ("needs_args", json!({})),
        ("panics", json!({})),
        ("fails", json!({})),
        ("exec", json!({})),
    ] {
        let out = call(&p, ctx(), name, args).await;
        assert!(out.output.is_error);
        assert!(
            out.output.for_llm.ends_with("failure noted"),
            "{name}: {}",
            out.output.for_llm
        );
    }
    let names: Vec<String> = failures
        .lock()
        .expect("lock")
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(names, vec!["nope", "needs_args", "panics", "fails", "exec"]);
    let out = call(&p, ctx(), "datetime", json!({})).await;
    assert!(out.output.silent && out.output.for_user.is_none());
    assert_eq!(*successes.lock().expect("lock"), vec!["datetime ran"]);
}

#[tokio::test]
async fn step9_scrubs_llm_user_and_deliverable_and_error_echoes() {
    let p = pipeline();
    let out = call(&p, ctx(), "leaks", json!({})).await;
    assert_eq!(out.output.for_llm, "key [REDACTED]");
    assert_eq!(out.output.for_user.as_deref(), Some("user sees [REDACTED]"));
    assert_eq!(out.output.deliverable.as_deref(), Some("[REDACTED]"));
    // A secret the model put in a tool name is not echoed back.
    let out = call(
        &p,
        ctx(),
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        json!({}),
    )
    .await;
    assert!(
        !out.output.for_llm.contains("ghp_"),
        "{}",
        out.output.for_llm
    );
    // The per-request bag applies.
    let c = ctx();
    c.scrub_bag.add("datetime ran");
    assert_eq!(
        call(&p, c, "datetime", json!({})).await.output.for_llm,
        "[REDACTED]"
    );
    let off = Pipeline::builder(registry())
        .scrub_enabled(false)
        .build()
        .expect("pipeline");
    assert!(
        call(&off, ctx(), "leaks", json!({}))
            .await
            .output
            .for_llm
            .contains("sk-")
    );
}

#[tokio::test]
async fn step10_events_and_audit() {
    #[derive(Default)]
    struct Sink(Mutex<Vec<AuditRecord>>);
    impl AuditSink for Sink {
        fn record(&self, record: AuditRecord) {
            self.0.lock().expect("lock").push(record);
        }
    }
    let sink = Arc::new(Sink::default());
    let p = Pipeline::builder(registry())
        .audit(Arc::clone(&sink) as Arc<dyn AuditSink>)
        .build()
        .expect("pipeline");
    let mut events = p.events().subscribe();
    call(&p, ctx(), "datetime", json!({"text": "a"})).await;
    call(&p, ctx(), "exec", json!({})).await;
    let mut got = Vec::new();
    while let Ok(e) = events.try_recv() {
        got.push(e);
    }
    assert!(matches!(&got[0], ToolEvent::Started { tool, .. } if &**tool == "datetime"));
    assert!(
        matches!(&got[1], ToolEvent::Finished { tool, is_error: false, .. } if &**tool == "datetime")
    );
    assert!(
        matches!(&got[2], ToolEvent::Finished { tool, is_error: true, .. } if &**tool == "exec"),
        "refused calls have no Started: {got:?}"
    );
    let records = sink.0.lock().expect("lock");
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].stage, Some("permission"));
    assert_eq!(records[0].args_digest, digest(&json!({"text": "a"})));
}

#[tokio::test]
async fn definitions_in_three_formats_are_sorted() {
    let p = pipeline();
    let openai = p.definitions(&ctx(), WireFormat::OpenAi);
    let names: Vec<&str> = openai
        .iter()
        .filter_map(|d| d["function"]["name"].as_str())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let anthropic = p.definitions(&ctx(), WireFormat::Anthropic);
    assert!(anthropic[0].get("input_schema").is_some());
    let mcp = p.definitions(&ctx(), WireFormat::Mcp);
    let exec = mcp.iter().find(|d| d["name"] == "exec").expect("exec");
    assert_eq!(exec["annotations"]["openWorldHint"], true);
    assert_eq!(exec["inputSchema"]["type"], "object");
}

#[test]
fn hooks_are_object_safe() {
    fn assert_hook<H: Hook>() {}
    assert_hook::<CommandHook>();
}

#[tokio::test]
async fn a_broken_schema_is_reported_at_call_time() {
    struct Broken;
    impl crate::tool::Tool for Broken {
        type Input = Value;
        fn spec(&self) -> crate::tool::ToolSpec {
            crate::tool::ToolSpec::new("broken", "bad schema", SideEffect::None)
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"x": {"type": "no-such-type"}}})
        }
        async fn execute(&self, _call: crate::tool::Authorized<Value>) -> ToolOutput {
            ToolOutput::text("unreachable")
        }
    }
    let registry = registry();
    registry
        .register(Broken)
        .expect("registration is cheap and lazy");
    let p = Pipeline::builder(registry).build().expect("pipeline");
    let out = call(&p, ctx(), "broken", json!({"x": 1})).await;
    assert_eq!(out.failed_stage, Some(FailedStage::Validation));
    assert!(
        out.output.for_llm.contains("has an invalid input schema"),
        "{}",
        out.output.for_llm
    );
}

/// A tool that logs a credential while it runs.
struct Chatty;

impl crate::tool::Tool for Chatty {
    type Input = Value;

    fn spec(&self) -> crate::tool::ToolSpec {
        crate::tool::ToolSpec::new("chatty", "logs", SideEffect::None)
    }

    async fn execute(&self, call: crate::tool::Authorized<Value>) -> ToolOutput {
        call.ctx().log(
            crate::context::LogLevel::Info,
            json!({"token ghp_abcdefghijklmnopqrstuvwxyz0123456789": ["ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}),
        );
        ToolOutput::text("done")
    }
}

/// What a tool logs while it runs reaches the caller scrubbed like its output.
#[tokio::test]
async fn step9_log_messages_are_scrubbed() {
    let registry = Registry::new();
    registry.register(Chatty).expect("registers");
    let p = Pipeline::builder(Arc::new(registry))
        .build()
        .expect("pipeline");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let c = ctx_with(|c| {
        c.log = Some(crate::context::LogSink(Arc::new(move |message| {
            sink.lock().expect("lock").push(message);
        })));
    });
    assert!(!call(&p, c, "chatty", json!({})).await.output.is_error);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 1);
    let text = seen[0].data.to_string();
    assert!(!text.contains("ghp_"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
}

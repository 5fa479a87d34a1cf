//! Issue 21: the permission step's analysis of a shell script argument is the one the checker,
//! the approver and the tool use; the script is analysed once per call.

use std::sync::atomic::AtomicUsize;

use serde_json::json;

use super::*;
use crate::hooks::{FnHook, HookInput, HookMatcher, HookOutcome};
use crate::permission::PermissionRequest;
use crate::script::ScriptAnalyzer;
use crate::tool::{Authorized, SideEffect, Tool, ToolSpec};

/// Counts its analyses; each is a distinct object naming its number and script.
#[derive(Default)]
struct Counting(AtomicUsize);

impl ScriptAnalyzer for Counting {
    fn analyze(&self, script: &str) -> Arc<dyn std::any::Any + Send + Sync> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Arc::new(format!("analysis {n} of {script}"))
    }
}

/// Where an analysis object lives, to compare identities.
fn address(analysis: Option<&String>) -> Option<usize> {
    analysis.map(|a| std::ptr::from_ref(a) as usize)
}

/// Who saw which analysis object: the checker, the approver, the tool.
#[derive(Default)]
struct Seen(Mutex<Vec<(&'static str, Option<usize>)>>);

impl Seen {
    fn record(&self, who: &'static str, request: &PermissionRequest<'_>) {
        let command = request.input.get("command").and_then(Value::as_str);
        let analysis = request
            .script
            .zip(command)
            .and_then(|(s, c)| s.get::<String>(c));
        self.0.lock().expect("lock").push((who, address(analysis)));
    }
}

/// Asks for every call, so the approver sees the request too.
struct AsksAlways(Arc<Seen>);

impl PermissionChecker for AsksAlways {
    fn check(&self, request: &PermissionRequest<'_>) -> Option<Decision> {
        self.0.record("checker", request);
        Some(Decision::Ask("shell".into()))
    }
}

struct Allows(Arc<Seen>);

impl Approver for Allows {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        _reason: &'a str,
    ) -> futures::future::BoxFuture<'a, Approval> {
        self.0.record("approver", request);
        Box::pin(async { Approval::Allow })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ShellInput {
    command: String,
}

/// Declares `command` a shell script (or not) and reports the analysis it received.
struct ShellLike {
    name: &'static str,
    declares: bool,
    seen: Arc<Seen>,
}

impl Tool for ShellLike {
    type Input = ShellInput;

    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(self.name, "Runs a script.", SideEffect::None);
        if self.declares {
            spec.with_shell_script_arg("command")
        } else {
            spec
        }
    }

    async fn execute(&self, call: Authorized<ShellInput>) -> ToolOutput {
        let analysis = call
            .script()
            .and_then(|s| s.get::<String>(&call.input().command));
        self.seen
            .0
            .lock()
            .expect("lock")
            .push(("tool", address(analysis)));
        ToolOutput::text(format!("{analysis:?}"))
    }
}

fn shell_pipeline(analyzer: Arc<Counting>, seen: &Arc<Seen>, hooks: Hooks) -> Pipeline {
    let r = Registry::new();
    for (name, declares) in [("shell", true), ("plain", false)] {
        r.register(ShellLike {
            name,
            declares,
            seen: Arc::clone(seen),
        })
        .expect("register");
    }
    Pipeline::builder(Arc::new(r))
        .script_analyzer(analyzer)
        .permission_checker(Arc::new(AsksAlways(Arc::clone(seen))))
        .approver(Arc::new(Allows(Arc::clone(seen))))
        .hooks(hooks)
        .build()
        .expect("pipeline")
}

fn take(seen: &Seen) -> Vec<(&'static str, Option<usize>)> {
    std::mem::take(&mut *seen.0.lock().expect("lock"))
}

#[tokio::test]
async fn h21_arch_command_analysis_is_carried_to_the_checker_the_approver_and_the_tool() {
    let analyzer = Arc::new(Counting::default());
    let seen = Arc::new(Seen::default());
    let p = shell_pipeline(Arc::clone(&analyzer), &seen, Hooks::default());

    let out = call(&p, ctx(), "shell", json!({"command": "ls -l"})).await;
    assert_eq!(out.failed_stage, None, "{}", out.output.for_llm);
    assert_eq!(out.output.for_llm, "Some(\"analysis 1 of ls -l\")");
    assert_eq!(analyzer.0.load(Ordering::SeqCst), 1, "analysed once");
    let seen_by = take(&seen);
    let who: Vec<_> = seen_by.iter().map(|(who, _)| *who).collect();
    assert_eq!(who, ["checker", "approver", "tool"]);
    let object = seen_by[0].1;
    assert!(object.is_some(), "the checker received the analysis");
    assert!(
        seen_by.iter().all(|(_, at)| *at == object),
        "one analysis object, not a copy or a second parse: {seen_by:?}"
    );

    // Each call is analysed once, afresh.
    let out = call(&p, ctx(), "shell", json!({"command": "ls -l"})).await;
    assert_eq!(out.output.for_llm, "Some(\"analysis 2 of ls -l\")");
    take(&seen);

    // A tool that declares no shell script argument gets no analysis, and none is made.
    let out = call(&p, ctx(), "plain", json!({"command": "ls"})).await;
    assert_eq!(out.output.for_llm, "None");
    assert_eq!(analyzer.0.load(Ordering::SeqCst), 2);
    assert!(take(&seen).iter().all(|(_, at)| at.is_none()));
}

#[tokio::test]
async fn h21_arch_command_analysis_is_carried_for_the_command_a_hook_rewrote() {
    let mut hooks = Hooks::default();
    hooks.add(
        HookEvent::PreToolUse,
        HookMatcher::new(
            None,
            Arc::new(FnHook(|_: &HookInput| HookOutcome {
                updated_input: Some(json!({"command": "rm -rf /"})),
                ..HookOutcome::default()
            })),
        ),
    );
    let analyzer = Arc::new(Counting::default());
    let seen = Arc::new(Seen::default());
    let p = shell_pipeline(Arc::clone(&analyzer), &seen, hooks);
    let out = call(&p, ctx(), "shell", json!({"command": "ls"})).await;
    // Permission was decided on, and the tool runs, what the hook made of the command.
    assert_eq!(out.output.for_llm, "Some(\"analysis 1 of rm -rf /\")");
    assert_eq!(analyzer.0.load(Ordering::SeqCst), 1);
    let seen_by = take(&seen);
    assert!(seen_by[0].1.is_some());
    assert!(seen_by.iter().all(|(_, at)| *at == seen_by[0].1));
}

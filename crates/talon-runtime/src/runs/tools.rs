//! The tools that start and manage child runs, registered by the runtime that owns the runner
//! (no slot filled in later), in both dialects over the same runs:
//! - GoClaw's `subagents` (spawn, run, list, cancel, steer, wait) and `spawn` (alias
//!   `sessions_spawn`);
//! - Claude Code's `Agent` (alias `Task`): general-purpose, or the read-only Explore and Plan;
//!   `run_in_background` spawns.
//!
//! A subagent is the caller's own agent (another agent is delegation's, with its rules). Its
//! tools are the caller's effective set (the policy engine applies the subagent and leaf deny
//! lists at the child's depth, so it is never wider). Every action that names a run acts only
//! on the caller's own children — "all" and "last" included — never another session's or
//! tenant's. A result is written by a model the caller does not control: it arrives fenced.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::registry::RegistryError;
use talon_core::visible::visible;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::RunRecord;

use super::{ChildOverrides, ChildSpec, one_line, result_output};
use crate::runner::Runner;

/// How long `wait` waits by default, and at most.
const WAIT_DEFAULT: u64 = 60;
const WAIT_MAX: u64 = 600;

/// Why a background run cannot start from a conversation that is not stored.
pub(super) const NOWHERE_TO_ANNOUNCE: &str = "this conversation is not stored, so a background \
     result would have nowhere to go: run it and wait for it instead (subagents action run, \
     Agent without run_in_background, delegate with mode sync)";

/// How long a steered run is given to stop before its replacement starts.
const STEER_SETTLE: Duration = Duration::from_millis(500);

/// Input of [`Subagents`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentsInput {
    /// spawn: start a child on `task` in the background (its result is announced to you when it
    /// ends). run: start one and wait for its answer. list: your children. cancel: stop `id`
    /// ("all": every running child, "last": the newest). steer: replace running child `id` with
    /// one given `message` as well. wait: wait for `id` and get its result.
    pub action: String,
    /// spawn, run: what the child should do, with everything it needs (it starts without this
    /// conversation).
    #[serde(default)]
    pub task: Option<String>,
    /// cancel, steer, wait: the run id, or "last" for your newest run (cancel also takes
    /// "all").
    #[serde(default)]
    pub id: Option<String>,
    /// steer: the new instruction.
    #[serde(default)]
    pub message: Option<String>,
    /// wait: seconds to wait at most (default 60, at most 600).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// spawn, run: "fresh" (default: the child sees only its task) or "fork" (it also sees
    /// this conversation so far).
    #[serde(default)]
    pub context: Option<String>,
}

/// GoClaw's `subagents` tool.
pub struct Subagents {
    runner: Runner,
}

impl Tool for Subagents {
    type Input = SubagentsInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "subagents",
            "Run child agents. spawn starts one on a task in the background and returns its run \
             id (its result is announced to you when it ends); run starts one and waits for its \
             answer; list shows your children; cancel stops one (id, \"all\" or \"last\"); steer \
             replaces a running child with one given a new message; wait waits for one. A child \
             starts fresh with only its task (say everything it needs), has at most your tools, \
             and cannot start children of its own.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .in_group("sessions")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<SubagentsInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let runner = &self.runner;
        match input.action.as_str() {
            "spawn" | "run" => {
                let Some(task) = task(input.task.as_deref()) else {
                    return ToolOutput::own_error(
                        "task is empty: say what the subagent should do, with everything it needs to know",
                    );
                };
                let agent = ctx.agent_key.clone().unwrap_or_default();
                let background = input.action == "spawn";
                let mode = match context_mode(input.context.as_deref()) {
                    Ok(mode) => mode,
                    Err(e) => return ToolOutput::own_error(e),
                };
                let how = Start {
                    background,
                    mode,
                    ..Start::default()
                };
                start(runner, ctx, &agent, task, how, |_| true).await
            }
            "list" => list(runner, ctx).await,
            "cancel" => cancel(runner, ctx, input.id.as_deref()).await,
            "steer" => steer(runner, ctx, input.id.as_deref(), input.message.as_deref()).await,
            "wait" => {
                let secs = input.timeout_seconds.unwrap_or(WAIT_DEFAULT).min(WAIT_MAX);
                wait(runner, ctx, input.id.as_deref(), Duration::from_secs(secs)).await
            }
            other => ToolOutput::own_error(format!(
                "action {} is not known; use spawn, run, list, cancel, steer or wait",
                visible(other)
            )),
        }
    }
}

/// Input of [`Spawn`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnInput {
    /// What the child should do, with everything it needs (it starts without this
    /// conversation unless `context` is "fork").
    pub task: String,
    /// "fresh" (default: the child sees only its task) or "fork" (it also sees this
    /// conversation so far).
    #[serde(default)]
    pub context: Option<String>,
}

/// GoClaw's `spawn` (alias `sessions_spawn`): `subagents` with action spawn.
pub struct Spawn {
    runner: Runner,
}

impl Tool for Spawn {
    type Input = SpawnInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "spawn",
            "Start a subagent on a task in the background and return its run id at once; its \
             result is announced to you when it ends. It starts fresh with only the task (say \
             everything it needs) and has at most your tools. Manage it with subagents.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .in_group("sessions")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<SpawnInput>) -> ToolOutput {
        let ctx = call.ctx();
        let Some(task) = task(Some(&call.input().task)) else {
            return ToolOutput::own_error(
                "task is empty: say what the subagent should do, with everything it needs to know",
            );
        };
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let mode = match context_mode(call.input().context.as_deref()) {
            Ok(mode) => mode,
            Err(e) => return ToolOutput::own_error(e),
        };
        let how = Start {
            background: true,
            mode,
            ..Start::default()
        };
        start(&self.runner, ctx, &agent, task, how, |_| true).await
    }
}

fn task(task: Option<&str>) -> Option<&str> {
    task.filter(|t| !t.trim().is_empty())
}

/// `context`'s mode: `fresh` unless the caller asks for `fork`.
fn context_mode(context: Option<&str>) -> Result<&'static str, String> {
    match context.unwrap_or("fresh") {
        "fresh" => Ok("fresh"),
        "fork" => Ok("fork"),
        other => Err(format!(
            "context {} is not known; use fresh (the task only) or fork (with this conversation)",
            visible(other)
        )),
    }
}

/// How a child starts: in the background or waited for, fresh or forked, and what a custom
/// agent definition narrows.
#[derive(Debug, Clone, Default)]
struct Start {
    background: bool,
    mode: &'static str,
    overrides: ChildOverrides,
}

/// Starts a child of `agent` on `task` with the caller's tools that `keep` keeps: waited for
/// (its result, fenced) or in the background (its id). A forked child's task carries the
/// caller's conversation so far.
async fn start(
    runner: &Runner,
    ctx: &CallContext,
    agent: &str,
    task: &str,
    how: Start,
    keep: impl Fn(&ToolSpec) -> bool,
) -> ToolOutput {
    let background = how.background;
    if background && !runner.is_stored_session(&ctx.session_key).await {
        return ToolOutput::own_error(NOWHERE_TO_ANNOUNCE);
    }
    let forked;
    let task = if how.mode == "fork" {
        let conversation = runner
            .conversation_so_far(ctx, &ctx.session_key, "assistant", "fork")
            .await;
        forked = format!("# The conversation so far\n\n{conversation}\n\n# Your task\n\n{task}");
        forked.as_str()
    } else {
        task
    };
    let tools: Vec<String> = runner
        .engine()
        .tool_specs(ctx)
        .await
        .into_iter()
        .filter(|spec| keep(spec))
        .map(|spec| spec.name)
        .collect();
    // A definition's mode applies only where stricter than the caller's: `start_child`
    // narrows every spec to its caller's authority.
    let overrides = how.overrides;
    let spec = ChildSpec {
        agent,
        task,
        tools,
        origin: "subagent",
        background,
        over_link: None,
        target_load: None,
        context_mode: how.mode,
        overrides,
    };
    let run = match runner.start_child(ctx, &spec, None).await {
        Ok(run) => run,
        Err(refused) => return ToolOutput::own_error(refused.to_string()),
    };
    let launched = format!(
        "Started subagent {} in the background. Its result will be announced to you when it \
         ends; use subagents (wait, cancel, steer, list) or TaskOutput / TaskStop with this id \
         to manage it.",
        run.id
    );
    run_started(runner, ctx, run, background.then_some(launched)).await
}

/// Runs a child that was just created: in the background (`launched`: what the caller is told
/// at once) or waited for (its result, fenced).
pub(super) async fn run_started(
    runner: &Runner,
    ctx: &CallContext,
    run: RunRecord,
    launched: Option<String>,
) -> ToolOutput {
    if let Some(launched) = launched {
        runner.launch(run);
        return ToolOutput::own(launched);
    }
    let ending = runner.await_child(run.clone(), &ctx.cancel).await;
    result_output(&run, ending.status, &ending.text)
}

/// The result of the caller's ended child `run`, taken from the outbox so it is not announced
/// again (`wait`, `TaskOutput`), or why there is none to take.
pub(super) async fn take_result(runner: &Runner, run: &RunRecord) -> ToolOutput {
    match runner
        .store()
        .take_delivery(&run.parent_session, &run.id)
        .await
    {
        Ok(Some(delivery)) => result_output(run, delivery.status, &delivery.result),
        Ok(None) => ToolOutput::own(format!(
            "{} ended ({}); its result was given to you already (or is being announced now).",
            run.id,
            run.status.as_str()
        )),
        Err(e) => ToolOutput::own_error(format!("cannot read the result of {}: {e}", run.id)),
    }
}

/// The caller's children: those started by its run (or, for a person's turn, its session).
pub(super) async fn children(
    runner: &Runner,
    ctx: &CallContext,
) -> Result<Vec<RunRecord>, ToolOutput> {
    runner
        .store()
        .child_runs(ctx.run.run_id.as_deref(), &ctx.session_key)
        .await
        .map_err(|e| ToolOutput::own_error(format!("cannot list your runs: {e}")))
}

/// The caller's child `id`.
pub(super) async fn own_child(
    runner: &Runner,
    ctx: &CallContext,
    id: Option<&str>,
) -> Result<RunRecord, ToolOutput> {
    let Some(id) = id.filter(|id| !id.trim().is_empty()) else {
        return Err(ToolOutput::own_error(
            "id is missing: give the run id that spawn returned (subagents action list shows them)",
        ));
    };
    // Newest first: "last" is the first.
    children(runner, ctx)
        .await?
        .into_iter()
        .find(|run| run.id == id || id == "last")
        .ok_or_else(|| {
            ToolOutput::own_error(format!(
                "no run {} of yours; subagents action list shows your runs",
                visible(id)
            ))
        })
}

async fn list(runner: &Runner, ctx: &CallContext) -> ToolOutput {
    let runs = match children(runner, ctx).await {
        Ok(runs) => runs,
        Err(e) => return e,
    };
    if runs.is_empty() {
        return ToolOutput::own("You have started no runs.");
    }
    let lines: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{} {} ({}, {} tokens in / {} out): {}",
                r.id,
                r.status.as_str(),
                r.agent_key,
                r.input_tokens,
                r.output_tokens,
                one_line(&r.task, 100)
            )
        })
        .collect();
    ToolOutput::text(lines.join("\n"))
}

async fn cancel(runner: &Runner, ctx: &CallContext, id: Option<&str>) -> ToolOutput {
    let targets: Vec<RunRecord> = match id {
        Some("all") | Some("last") => {
            let live = match children(runner, ctx).await {
                Ok(runs) => runs.into_iter().filter(|r| r.status.is_live()),
                Err(e) => return e,
            };
            // Newest first: "last" is the first.
            if id == Some("last") {
                live.take(1).collect()
            } else {
                live.collect()
            }
        }
        id => match own_child(runner, ctx, id).await {
            Ok(run) if run.status.is_live() => vec![run],
            Ok(run) => {
                return ToolOutput::own_error(format!(
                    "run {} has ended already ({})",
                    run.id,
                    run.status.as_str()
                ));
            }
            Err(e) => return e,
        },
    };
    if targets.is_empty() {
        return ToolOutput::own("None of your runs is running: nothing to cancel.");
    }
    let mut cancelled = Vec::new();
    for run in &targets {
        match runner.cancel_run(&run.id).await {
            Ok(_) => cancelled.push(run.id.as_str()),
            Err(e) => return ToolOutput::own_error(e.to_string()),
        }
    }
    ToolOutput::own(format!(
        "Cancelled {} run(s): {}. They stop within a second, wherever they run.",
        cancelled.len(),
        cancelled.join(", ")
    ))
}

async fn steer(
    runner: &Runner,
    ctx: &CallContext,
    id: Option<&str>,
    message: Option<&str>,
) -> ToolOutput {
    let Some(message) = message.filter(|m| !m.trim().is_empty()) else {
        return ToolOutput::own_error("message is empty: say what the run should do now");
    };
    let old = match own_child(runner, ctx, id).await {
        Ok(run) => run,
        Err(e) => return e,
    };
    let task = format!(
        "{}\n\nNew instruction from your parent: {message}",
        old.task
    );
    let overrides = match ChildOverrides::of(&old) {
        Ok(overrides) => overrides,
        Err(e) => return ToolOutput::own_error(format!("{} cannot be steered: {e}", old.id)),
    };
    let spec = ChildSpec {
        agent: &old.agent_key,
        task: &task,
        tools: old.tools.clone(),
        origin: "subagent",
        background: true,
        over_link: None,
        target_load: None,
        context_mode: "fresh",
        overrides,
    };
    // The replacement takes the old run's slot in the transaction that ends it.
    let new = match runner.start_child(ctx, &spec, Some(&old.id)).await {
        Ok(run) => run,
        Err(refused) => return ToolOutput::own_error(refused.to_string()),
    };
    if let Err(e) = runner.cancel_run(&old.id).await {
        tracing::warn!(run = %old.id, error = %e, "cannot stop a steered run");
    }
    tokio::time::sleep(STEER_SETTLE).await;
    runner.launch(new.clone());
    ToolOutput::own(format!(
        "Steered: {} was stopped and {} started in its place with your message; its result \
         will be announced to you.",
        old.id, new.id
    ))
}

async fn wait(
    runner: &Runner,
    ctx: &CallContext,
    id: Option<&str>,
    timeout: Duration,
) -> ToolOutput {
    let run = match own_child(runner, ctx, id).await {
        Ok(run) => run,
        Err(e) => return e,
    };
    let run = match runner.wait_run(&run.id, timeout).await {
        Ok(run) => run,
        Err(e) => return ToolOutput::own_error(e.to_string()),
    };
    if run.status.is_live() {
        return ToolOutput::own(format!(
            "{} is still {} after {} s; wait again, or cancel it.",
            run.id,
            run.status.as_str(),
            timeout.as_secs()
        ));
    }
    take_result(runner, &run).await
}

/// Input of [`AgentTool`] (Claude Code's `Agent`, formerly `Task`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AgentInput {
    /// A short (3-5 word) description of the task.
    pub description: String,
    /// The task for the agent to perform: everything it needs, since it starts without this
    /// conversation.
    pub prompt: String,
    /// The type of agent: general-purpose (your tools), Explore (read-only, to search and read
    /// the codebase), Plan (read-only, to design an implementation plan), or the name of a
    /// custom agent defined in .claude/agents/.
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// The model to run the agent on: sonnet, opus or haiku (or another name the operator
    /// configured) runs it on the model configured for that name; otherwise, or with inherit,
    /// it runs on your own model.
    #[serde(default)]
    pub model: Option<String>,
    /// Run in the background: returns the agent's id at once, and its result is announced to
    /// you when it ends.
    #[serde(default)]
    pub run_in_background: Option<bool>,
}

/// Claude Code's `Agent` tool over the same runs as `subagents`.
pub struct AgentTool {
    runner: Runner,
}

impl Tool for AgentTool {
    type Input = AgentInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Agent",
            "Launch a new agent to handle a task on its own and return its final answer (or, \
             with run_in_background, its id at once; the result is announced when it ends). \
             subagent_type general-purpose has your tools; Explore and Plan only read; a custom \
             agent from .claude/agents/ has the tools its definition names. The \
             agent starts fresh: the prompt must hold everything it needs. It cannot launch \
             agents itself.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .same_as("subagents")
        .in_group("sessions")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<AgentInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        if input.prompt.trim().is_empty() {
            return ToolOutput::own_error(
                "prompt is empty: say what the agent should do, with everything it needs to know",
            );
        }
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let task = format!("{}\n\n{}", input.description.trim(), input.prompt);
        let background = input.run_in_background == Some(true);
        let kind = input.subagent_type.as_deref().unwrap_or("general-purpose");
        let read_only = match kind {
            "general-purpose" => false,
            "Explore" | "Plan" => true,
            name => {
                let requested = input.model.as_deref();
                return custom(
                    &self.runner,
                    ctx,
                    &agent,
                    name,
                    &task,
                    background,
                    requested,
                )
                .await;
            }
        };
        let how = Start {
            background,
            mode: "fresh",
            overrides: ChildOverrides {
                model: self.runner.child_model(input.model.as_deref()),
                ..ChildOverrides::default()
            },
        };
        start(&self.runner, ctx, &agent, &task, how, |spec| {
            !read_only || spec.side_effect.is_read_only()
        })
        .await
    }
}

/// Runs the custom agent `name` (`.claude/agents/<file>.md`, see [`super::custom_agents`]) on
/// `task`: its instructions before the task, its tools within the caller's, its permission mode
/// and turns only where stricter.
async fn custom(
    runner: &Runner,
    ctx: &CallContext,
    agent: &str,
    name: &str,
    task: &str,
    background: bool,
    requested_model: Option<&str>,
) -> ToolOutput {
    let defined = runner.custom_agents(ctx).await;
    let Some(definition) = defined.iter().find(|a| a.name == name) else {
        let mut known = vec!["general-purpose", "Explore", "Plan"];
        known.extend(defined.iter().map(|a| a.name.as_str()));
        return ToolOutput::own_error(format!(
            "subagent_type {} is not known; use one of: {}",
            visible(name),
            known.join(", ")
        ));
    };
    let instructed = if definition.instructions.is_empty() {
        task.to_string()
    } else {
        format!(
            "# Your role: {}\n\n{}\n\n# Your task\n\n{task}",
            definition.name, definition.instructions
        )
    };
    let how = Start {
        background,
        mode: "fresh",
        overrides: ChildOverrides {
            // A definition in the workspace narrows, never widens (`start` keeps it no looser
            // than the caller's).
            permission_mode: definition.permission_mode,
            // The call's model first, as Claude Code does, then the definition's; either only
            // through the operator's names.
            model: runner
                .child_model(requested_model)
                .or_else(|| runner.child_model(definition.model.as_deref())),
            max_requests: definition.max_turns,
            ..ChildOverrides::default()
        },
    };
    start(runner, ctx, agent, &instructed, how, |spec| {
        definition.allows(&spec.name)
    })
    .await
}

impl Runner {
    /// The provider model a child asking for `requested` runs on: the one `[subagents] models`
    /// maps that name to; `None` (its parent agent's model) for `inherit`, no name, or a name
    /// the operator did not configure.
    pub(crate) fn child_model(&self, requested: Option<&str>) -> Option<String> {
        self.subagent_policy()
            .models
            .get(requested?.trim())
            .cloned()
    }

    /// Registers the tools that start runs on this runner (both dialects).
    pub fn register_run_tools(&self, registry: &Registry) -> Result<(), RegistryError> {
        let runner = || self.clone();
        registry.register(Subagents { runner: runner() })?;
        registry.register(Spawn { runner: runner() })?;
        registry.register(AgentTool { runner: runner() })?;
        self.register_delegation_tools(registry)
    }

    /// Whether `session` is a stored session (a background result can be delivered to it).
    pub(crate) async fn is_stored_session(&self, session: &str) -> bool {
        matches!(self.store().session(session).await, Ok(Some(_)))
    }
}

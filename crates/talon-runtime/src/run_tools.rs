//! Tools that start agent runs, registered by the runtime that owns the runner (no slot filled
//! in later): GoClaw's `subagents` with `action: "run"` runs a child agent on a task and
//! returns its answer.
//!
//! Every child is a row in the store's run record ([`talon_store::RunRecord`]): created only
//! within the limits (live runs per tenant, per parent, depth; counted by the store across
//! gateways, refused in the seeds' words), run in a fresh session of its own with at most its
//! parent's tools (the parent's effective set, minus the subagent and leaf deny lists, which the
//! policy engine applies at the child's depth), and ended with the status that tells what
//! happened (`limit_reached` at the iteration cap, `failed` for an empty answer, `cancelled`).
//! Its answer is written by a model the caller does not control, so it reaches the caller fenced
//! as untrusted. A run `run` waits for is delivered here, at once, not again in a later turn.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_agent::TurnStop;
use talon_core::{Authorized, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::{NewRun, RunLimits, RunStatus};

use crate::agent_runs::{ChildTurn, Runner, TurnRequest};

/// How long a gateway holds a run without renewing it (the run supervisor that renews leases
/// and takes over runs of dead gateways comes with asynchronous runs).
const LEASE_MS: i64 = 10 * 60 * 1000;

/// How often a running child looks at its run's cancel flag.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Input of [`Subagents`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubagentsInput {
    /// `run`: start a child agent on `task` and wait for its answer.
    pub action: String,
    /// What the child should do: everything it needs, since it starts without this
    /// conversation.
    #[serde(default)]
    pub task: Option<String>,
}

/// The `subagents` tool.
pub struct Subagents {
    runner: Runner,
}

impl Tool for Subagents {
    type Input = SubagentsInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "subagents",
            "Run a subagent: action \"run\" starts a child agent on a task and waits for its \
             answer. The child starts fresh with only the task (say everything it needs), has \
             at most your tools, and cannot start children of its own.",
            SideEffect::Spawns,
        )
        .in_group("sessions")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<SubagentsInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        if input.action != "run" {
            return ToolOutput::error(format!(
                "action {} is not supported; use \"run\"",
                talon_core::visible::visible(&input.action)
            ));
        }
        let Some(task) = input.task.as_deref().filter(|t| !t.trim().is_empty()) else {
            return ToolOutput::error(
                "task is empty: say what the subagent should do, with everything it needs to know",
            );
        };
        // A subagent is the caller's own agent; another agent is delegation's, with its rules.
        let agent = ctx.agent_key.clone().unwrap_or_default();
        run_child(&self.runner, ctx, &agent, task, |_| true).await
    }
}

/// Runs a child agent on `task` as a run in the store (see the module docs), with the caller's
/// tools that `keep` keeps; the answer or why there is none, fenced as untrusted.
async fn run_child(
    runner: &Runner,
    ctx: &talon_core::CallContext,
    agent: &str,
    task: &str,
    keep: impl Fn(&ToolSpec) -> bool,
) -> ToolOutput {
    let policy = runner.subagent_policy();
    let limits = RunLimits {
        max_concurrent: i64::from(policy.max_concurrent),
        max_depth: i64::from(policy.max_spawn_depth),
        max_children: i64::from(policy.max_children_per_agent),
    };
    let store = runner.store();
    // The child's session is the user's, under the agent that runs it.
    let session_prefix = Runner::session_key(agent, "subagent", ctx.user.as_deref(), "");
    let new = NewRun {
        parent: None,
        parent_session: &ctx.session_key,
        session_prefix: &session_prefix,
        agent,
        tenant: ctx.tenant.as_deref().unwrap_or_default(),
        user: ctx.user.as_deref().unwrap_or_default(),
        origin: "subagent",
        context_mode: "fresh",
        task,
        owner: runner.instance(),
        lease_until: i64::try_from(talon_core::waiting::unix_ms(std::time::SystemTime::now()))
            .unwrap_or(i64::MAX)
            .saturating_add(LEASE_MS),
    };
    let run = match store.create_run(&new, limits).await {
        Ok(run) => run,
        Err(refused) => return ToolOutput::error(refused.to_string()),
    };
    // The child's tools: never more than the caller's.
    let parent_tools: Vec<String> = runner
        .tool_specs(ctx)
        .await
        .into_iter()
        .filter(|spec| keep(spec))
        .map(|spec| spec.name)
        .collect();
    let cancel = ctx.cancel.child_token();
    // A cancel requested anywhere (another gateway, `talon runs cancel`) is a durable flag
    // on the run: watched while the child runs.
    let watch = {
        let (store, id, cancel) = (store.clone(), run.id.clone(), cancel.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CANCEL_POLL).await;
                match store.run(&id).await {
                    Ok(Some(run)) if run.cancel_requested => {
                        cancel.cancel();
                        return;
                    }
                    Ok(Some(run)) if !run.status.is_live() => return,
                    _ => {}
                }
            }
        })
    };
    let ran = runner
        .run(
            TurnRequest {
                agent: Some(agent),
                user: ctx.user.as_deref(),
                session: Some(run.session_key.clone()),
                history: Vec::new(),
                prompt: task.to_string(),
                channel: "subagent",
                client: None,
                permission_mode: Some(ctx.permission_mode),
                cancel,
                api: Default::default(),
                child: Some(ChildTurn {
                    spawn_depth: ctx.spawn_depth + 1,
                    tool_allow: parent_tools,
                }),
            },
            &|_| {},
        )
        .await;
    watch.abort();
    let (status, text, usage) = match &ran {
        Ok(ran) => {
            let usage = (
                i64::try_from(ran.outcome.usage.input_tokens).unwrap_or(i64::MAX),
                i64::try_from(ran.outcome.usage.output_tokens).unwrap_or(i64::MAX),
            );
            let (status, text) = ending(&ran.outcome.stop, &ran.outcome.text);
            (status, text, usage)
        }
        Err(e) => (
            RunStatus::Failed,
            format!("the run could not start: {e}"),
            (0, 0),
        ),
    };
    // Delivered here, now: the outbox row is written as delivered.
    if let Err(e) = store.finish_run(&run.id, status, &text, usage, true).await {
        tracing::warn!(run = %run.id, error = %e, "cannot record the end of a run");
    }
    let head = format!("subagent {} ({}) {}", run.id, agent, status.as_str());
    let output = if status == RunStatus::Completed {
        ToolOutput::text(format!("{head}:\n{text}"))
    } else {
        ToolOutput::error(format!("{head}: {text}"))
    };
    output.with_origin(format!("subagent {}", run.id))
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
    /// the codebase) or Plan (read-only, to design an implementation plan).
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// Accepted for compatibility; the agent's own model is used.
    #[serde(default)]
    pub model: Option<String>,
    /// Run in the background. Not available yet: agents run in the foreground.
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
            "Launch a new agent to handle a task on its own and return its final answer. \
             subagent_type general-purpose has your tools; Explore and Plan only read. The \
             agent starts fresh: the prompt must hold everything it needs. It cannot launch \
             agents itself.",
            SideEffect::Spawns,
        )
        .same_as("subagents")
        .in_group("sessions")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<AgentInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        if input.run_in_background == Some(true) {
            return ToolOutput::error(
                "run_in_background is not available yet: call Agent without it, and it returns the agent's answer",
            );
        }
        if input.prompt.trim().is_empty() {
            return ToolOutput::error(
                "prompt is empty: say what the agent should do, with everything it needs to know",
            );
        }
        let read_only = match input.subagent_type.as_deref().unwrap_or("general-purpose") {
            "general-purpose" => false,
            "Explore" | "Plan" => true,
            other => {
                return ToolOutput::error(format!(
                    "subagent_type {} is not known; use general-purpose, Explore or Plan",
                    talon_core::visible::visible(other)
                ));
            }
        };
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let task = format!("{}\n\n{}", input.description.trim(), input.prompt);
        run_child(&self.runner, ctx, &agent, &task, |spec| {
            !read_only || spec.side_effect.is_read_only()
        })
        .await
    }
}

/// The run's status and what the caller is told, from how its turn ended: only a real answer
/// is `completed`.
fn ending(stop: &TurnStop, text: &str) -> (RunStatus, String) {
    match stop {
        TurnStop::Final if text.trim().is_empty() => (
            RunStatus::Failed,
            "the subagent ended without an answer".to_string(),
        ),
        TurnStop::Final | TurnStop::MaxTokens => (RunStatus::Completed, text.to_string()),
        TurnStop::IterationCap | TurnStop::TokenBudget | TurnStop::LoopDetected(_) => (
            RunStatus::LimitReached,
            format!(
                "stopped by a limit before finishing ({}); what it had so far: {text}",
                crate::agent_runs::stop_label(stop)
            ),
        ),
        TurnStop::Cancelled => (RunStatus::Cancelled, "cancelled".to_string()),
        TurnStop::Refusal => (RunStatus::Failed, "the model declined the task".to_string()),
        TurnStop::PromptBlocked(why) | TurnStop::Failed(why) => (RunStatus::Failed, why.clone()),
        TurnStop::ClientTools => (
            RunStatus::Failed,
            "the subagent called a tool nobody runs".to_string(),
        ),
    }
}

impl Runner {
    /// Registers the tools that start runs on this runner (both dialects).
    pub fn register_run_tools(&self, registry: &Registry) -> Result<(), String> {
        registry
            .register(Subagents {
                runner: self.clone(),
            })
            .map_err(|e| e.to_string())?;
        registry
            .register(AgentTool {
                runner: self.clone(),
            })
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_real_answer_is_completed() {
        assert_eq!(ending(&TurnStop::Final, "42").0, RunStatus::Completed);
        assert_eq!(ending(&TurnStop::Final, "  ").0, RunStatus::Failed);
        assert_eq!(
            ending(&TurnStop::IterationCap, "half").0,
            RunStatus::LimitReached
        );
        assert_eq!(ending(&TurnStop::Cancelled, "").0, RunStatus::Cancelled);
    }
}

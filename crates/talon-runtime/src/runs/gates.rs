//! Quality gates (seed 000 §11): checks an agent's operator puts on output before it reaches
//! anyone — in the agent's settings, `"quality_gates": [{"event", "type", "command" | "agent",
//! "block_on_failure", "max_retries"}]`, on three events:
//! - `delegation.completed`: a delegation the agent started has answered;
//! - `subagent.completed`: a subagent of the agent has answered;
//! - `agent.final`: the agent's own final answer to a person.
//!
//! Evaluators: `command` runs a shell command through the pipeline's `exec` (so in the exec
//! sandbox, under the agent's policy), the output on its standard input; exit 0 passes and its
//! output is the feedback otherwise. `agent` asks a reviewer agent (a run of origin `gate`),
//! whose answer starts with APPROVED or REJECTED: feedback. With `block_on_failure`, a failing
//! output is sent back with the feedback as a revision prompt, at most `max_retries` times; a
//! gate's own runs (and evaluate-loop rounds) skip gates, so a review is never reviewed.

use std::sync::Arc;

use serde::Deserialize;
use talon_core::CallContext;
use talon_core::pipeline::ToolCall;
use talon_store::RunStatus;

use talon_store::RunRecord;
use tokio_util::sync::CancellationToken;

use super::budget::Remaining;
use super::evaluate::{Verdict, verdict};
use super::{ChildOverrides, ChildSpec, Ending};
use crate::agent_runs::{Ran, RunError, TurnRequest};
use crate::runner::Runner;
use talon_agent::TurnStop;

/// One gate, as the agent's settings hold it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    pub event: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub block_on_failure: bool,
    #[serde(default)]
    pub max_retries: u32,
}

/// The events a gate can be on.
pub const EVENTS: [&str; 3] = ["subagent.completed", "delegation.completed", "agent.final"];

/// What is wrong with an agent's `max_delegation_load` or `quality_gates` (the settings'
/// writer's to fix).
#[derive(Debug, thiserror::Error)]
pub enum AgentSettingsError {
    #[error("max_delegation_load must be a whole number of at least 1, not {0}")]
    DelegationLoad(serde_json::Value),
    /// `quality_gates` is not a list of gates.
    #[error("quality_gates: {0}")]
    Gates(#[source] serde_json::Error),
    #[error("quality_gates[{index}].event {event:?} is not one of {}", EVENTS.join(", "))]
    Event { index: usize, event: String },
    #[error("quality_gates[{index}].type {kind:?} is not command or agent")]
    Kind { index: usize, kind: String },
    /// A gate without the command or agent its type needs.
    #[error("quality_gates[{index}]: a {kind} gate needs \"{kind}\"")]
    Evaluator { index: usize, kind: String },
}

/// Checks the parts of an agent's settings that the run layer reads — `quality_gates` and
/// `max_delegation_load` — so a mistake is refused where the settings are written, not found
/// (as a gate that never runs) when a run needs them.
pub fn check_agent_settings(settings: &serde_json::Value) -> Result<(), AgentSettingsError> {
    if let Some(load) = settings.get("max_delegation_load")
        && load.as_i64().is_none_or(|n| n < 1)
    {
        return Err(AgentSettingsError::DelegationLoad(load.clone()));
    }
    let Some(gates) = settings.get("quality_gates") else {
        return Ok(());
    };
    let gates: Vec<Gate> =
        serde_json::from_value(gates.clone()).map_err(AgentSettingsError::Gates)?;
    for (index, gate) in gates.iter().enumerate() {
        if !EVENTS.contains(&gate.event.as_str()) {
            return Err(AgentSettingsError::Event {
                index,
                event: gate.event.clone(),
            });
        }
        let named = match gate.kind.as_str() {
            "command" => gate.command.as_deref(),
            "agent" => gate.agent.as_deref(),
            other => {
                return Err(AgentSettingsError::Kind {
                    index,
                    kind: other.to_string(),
                });
            }
        };
        if named.is_none_or(|n| n.trim().is_empty()) {
            return Err(AgentSettingsError::Evaluator {
                index,
                kind: gate.kind.clone(),
            });
        }
    }
    Ok(())
}

/// What a gate said of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    Pass,
    Fail(String),
}

impl Runner {
    /// The gates `agent` has on `event` (a settings value that does not parse is no gate, and
    /// is logged).
    pub(crate) async fn gates(&self, agent: &str, event: &str) -> Vec<Gate> {
        let Ok(Some(record)) = self.store().agent(agent).await else {
            return Vec::new();
        };
        let settings: serde_json::Value =
            serde_json::from_str(&record.settings).unwrap_or_default();
        let Some(gates) = settings.get("quality_gates") else {
            return Vec::new();
        };
        match serde_json::from_value::<Vec<Gate>>(gates.clone()) {
            Ok(gates) => gates.into_iter().filter(|g| g.event == event).collect(),
            Err(e) => {
                tracing::warn!(agent, error = %e, "the agent's quality_gates do not parse; no gate runs");
                Vec::new()
            }
        }
    }

    /// Whether a gate on `agent`'s own answers blocks it (then the answer is held until judged).
    pub(crate) async fn blocking_final_gates(&self, agent: &str) -> bool {
        self.gates(agent, "agent.final")
            .await
            .iter()
            .any(|gate| gate.block_on_failure)
    }

    /// Judges `output` by `gate`, as the agent of `ctx`.
    pub(crate) async fn judge(&self, ctx: &CallContext, gate: &Gate, output: &str) -> Judgement {
        match gate.kind.as_str() {
            "command" => self.judge_by_command(ctx, gate, output).await,
            // Boxed: a reviewer's run goes through the runner again (a gate's runs skip gates,
            // so this recursion is one level deep).
            "agent" => Box::pin(self.judge_by_agent(ctx, gate, output)).await,
            other => Judgement::Fail(format!(
                "quality gate type {other:?} is not known (use command or agent)"
            )),
        }
    }

    async fn judge_by_command(&self, ctx: &CallContext, gate: &Gate, output: &str) -> Judgement {
        let Some(command) = gate.command.as_deref().filter(|c| !c.trim().is_empty()) else {
            return Judgement::Fail("the command gate names no command".into());
        };
        // The output goes to the command's standard input through a here-document whose
        // delimiter nobody can guess (so the output cannot end it early).
        let delimiter = format!("TALON_GATE_{}", uuid::Uuid::new_v4().simple());
        // Grouped, so the whole command (a pipeline, a `||` list) reads it.
        let script = format!("{{ {command}\n}} <<'{delimiter}'\n{output}\n{delimiter}\n");
        let call = ToolCall {
            name: "exec".into(),
            arguments: serde_json::json!({"command": script}),
            tool_use_id: None,
        };
        let outcome = self.pipeline().call(Arc::new(ctx.clone()), call).await;
        if outcome.output.is_error {
            Judgement::Fail(outcome.output.for_llm)
        } else {
            Judgement::Pass
        }
    }

    async fn judge_by_agent(&self, ctx: &CallContext, gate: &Gate, output: &str) -> Judgement {
        let Some(reviewer) = gate.agent.as_deref().filter(|a| !a.trim().is_empty()) else {
            return Judgement::Fail("the agent gate names no agent".into());
        };
        let task = format!(
            "Review this output before it is delivered.\n\n{}\n\nAnswer APPROVED if it is fit \
             to deliver; otherwise answer REJECTED: followed by what must change.",
            talon_core::untrusted::wrap("quality_gate", reviewer, output)
        );
        let tools = match self
            .engine()
            .own_tool_names(reviewer, ctx.user.as_deref(), ctx.spawn_depth + 1)
            .await
        {
            Ok(tools) => tools,
            Err(e) => return Judgement::Fail(format!("the reviewer cannot run: {e}")),
        };
        let spec = ChildSpec {
            agent: reviewer,
            task: &task,
            tools,
            origin: "gate",
            background: false,
            over_link: None,
            target_load: None,
            context_mode: "fresh",
            overrides: ChildOverrides::default(),
        };
        let run = match self.start_child(ctx, &spec, None).await {
            Ok(run) => run,
            Err(refused) => return Judgement::Fail(format!("the reviewer cannot run: {refused}")),
        };
        let ending = self.await_child(run.clone(), &ctx.cancel).await;
        if ending.status != RunStatus::Completed {
            return Judgement::Fail(format!(
                "the reviewer did not answer ({}): {}",
                ending.status.as_str(),
                ending.text
            ));
        }
        match verdict(&ending.text) {
            Verdict::Approved => Judgement::Pass,
            Verdict::Rejected(feedback) => Judgement::Fail(feedback),
        }
    }
}

impl Runner {
    /// Applies the parent agent's gates on a completed child `run` (`subagent.completed`,
    /// `delegation.completed`; a gate's own runs and evaluate-loop rounds have none): the
    /// child's ending once it passes, after revisions the gates asked for, or `failed` when a
    /// blocking gate still rejects it.
    pub(crate) async fn gate_child(
        &self,
        run: &RunRecord,
        mut ending: Ending,
        cancel: &CancellationToken,
        overrides: &ChildOverrides,
        budget: Remaining,
    ) -> Ending {
        let event = match run.origin.as_str() {
            "subagent" => "subagent.completed",
            "delegation" => "delegation.completed",
            _ => return ending,
        };
        let gates = self.gates(&run.parent_agent, event).await;
        if gates.is_empty() {
            return ending;
        }
        // The gates run as the parent agent, in the parent's session.
        let user = (!run.user_id.is_empty()).then_some(run.user_id.as_str());
        let mut ctx = match self
            .engine()
            .context(Some(&run.parent_agent), user, "gate")
            .await
        {
            Ok(ctx) => ctx,
            Err(e) => {
                ending.status = RunStatus::Failed;
                ending.text = format!("its quality gates cannot run: {e}");
                return ending;
            }
        };
        ctx.session_key = run.parent_session.clone();
        ctx.spawn_depth = u32::try_from(run.depth - 1).unwrap_or(0);
        ctx.run = talon_core::events::RunRef {
            run_id: (!run.parent_id.is_empty()).then(|| run.parent_id.as_str().into()),
            parent_run_id: None,
        };
        ctx.cancel = cancel.clone();
        let mut revisions = 0;
        loop {
            let Some((gate, feedback)) = self.first_failure(&ctx, &gates, &ending.text).await
            else {
                return ending;
            };
            if !gate.block_on_failure {
                ending.text = format!(
                    "{}\n\n[a quality gate that does not block found: {feedback}]",
                    ending.text
                );
                return ending;
            }
            if revisions >= gate.max_retries {
                ending.status = RunStatus::Failed;
                ending.text = format!(
                    "it did not pass its quality gate after {revisions} revision(s): {feedback}\nIts last answer:\n{}",
                    ending.text
                );
                return ending;
            }
            revisions += 1;
            let used = ending.usage;
            ending = self
                .child_turn(
                    run,
                    (revision_prompt(&feedback), Vec::new()),
                    cancel,
                    overrides,
                    budget,
                )
                .await;
            ending.usage.input_tokens += used.input_tokens;
            ending.usage.output_tokens += used.output_tokens;
            ending.usage.model_requests += used.model_requests;
            if ending.status != RunStatus::Completed {
                return ending;
            }
        }
    }

    /// The first of `gates` that rejects `output`, with its feedback.
    pub(crate) async fn first_failure<'g>(
        &self,
        ctx: &CallContext,
        gates: &'g [Gate],
        output: &str,
    ) -> Option<(&'g Gate, String)> {
        for gate in gates {
            if let Judgement::Fail(feedback) = self.judge(ctx, gate, output).await {
                return Some((gate, feedback));
            }
        }
        None
    }
}

/// What a person's turn needs to be sent again for revision (`agent.final`).
pub(crate) struct Resend<'a> {
    pub user: Option<String>,
    pub channel: &'a str,
    pub client: Option<talon_core::ClientHandle>,
    pub permission_mode: Option<talon_core::permission::PermissionMode>,
    pub cancel: CancellationToken,
}

impl Runner {
    /// Applies the agent's `agent.final` gates to the answer of a person's turn: the turn as it
    /// ran once its answer passes, after revisions in the same session; a blocking gate that
    /// still rejects it ends the turn `failed` without the answer (whose text
    /// [`Runner::run`] held back: a person never sees a rejected draft).
    pub(crate) async fn gate_final(
        &self,
        mut ran: Ran,
        resend: Resend<'_>,
        events: &(dyn Fn(talon_agent::RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        if ran.outcome.stop != TurnStop::Final || ran.outcome.text.trim().is_empty() {
            return Ok(ran);
        }
        let gates = self.gates(&ran.agent, "agent.final").await;
        let Some(session) = ran.session.clone().filter(|_| !gates.is_empty()) else {
            return Ok(ran);
        };
        let mut ctx = self
            .engine()
            .context(Some(&ran.agent), resend.user.as_deref(), resend.channel)
            .await?;
        ctx.session_key = session.clone();
        ctx.cancel = resend.cancel.clone();
        let mut revisions = 0;
        loop {
            let Some((gate, feedback)) = self.first_failure(&ctx, &gates, &ran.outcome.text).await
            else {
                return Ok(ran);
            };
            if !gate.block_on_failure {
                tracing::info!(agent = %ran.agent, %feedback, "a quality gate that does not block found a problem");
                return Ok(ran);
            }
            if revisions >= gate.max_retries {
                ran.outcome.stop = TurnStop::Failed(format!(
                    "the answer did not pass its quality gate after {revisions} revision(s): {feedback}"
                ));
                ran.outcome.text.clear();
                return Ok(ran);
            }
            revisions += 1;
            let agent = ran.agent.clone();
            ran = self
                .run_turn(
                    TurnRequest {
                        agent: Some(&agent),
                        user: resend.user.as_deref(),
                        session: Some(session.clone()),
                        history: Vec::new(),
                        prompt: revision_prompt(&feedback),
                        channel: resend.channel,
                        client: resend.client.clone(),
                        permission_mode: resend.permission_mode,
                        cancel: resend.cancel.clone(),
                        api: Default::default(),
                        child: None,
                        delivering: Vec::new(),
                        origin: None,
                    },
                    events,
                )
                .await?;
            if ran.outcome.stop != TurnStop::Final {
                return Ok(ran);
            }
        }
    }
}

/// The prompt that sends an output back for revision with a gate's feedback.
pub(crate) fn revision_prompt(feedback: &str) -> String {
    format!(
        "Your answer did not pass review. The reviewer's feedback:\n{feedback}\n\nRevise your \
         answer to address it, and answer with the revised version."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_are_read_from_the_agents_settings() {
        let settings = serde_json::json!([
            {"event": "agent.final", "type": "command", "command": "grep -q ok", "block_on_failure": true, "max_retries": 2},
            {"event": "delegation.completed", "type": "agent", "agent": "qa"}
        ]);
        let gates: Vec<Gate> = serde_json::from_value(settings).unwrap();
        assert_eq!(gates[0].max_retries, 2);
        assert!(gates[0].block_on_failure);
        assert_eq!(gates[1].agent.as_deref(), Some("qa"));
        assert!(!gates[1].block_on_failure);
    }

    #[test]
    fn settings_with_a_broken_gate_are_refused_with_the_reason() {
        let check = |v: serde_json::Value| check_agent_settings(&v).map_err(|e| e.to_string());
        assert!(check(serde_json::json!({"name": "x"})).is_ok());
        assert!(check(serde_json::json!({"max_delegation_load": 2})).is_ok());
        assert!(
            check(serde_json::json!({"max_delegation_load": 0}))
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            check(serde_json::json!({"quality_gates": [{"event": "done", "type": "agent", "agent": "qa"}]}))
                .unwrap_err()
                .contains("agent.final")
        );
        assert!(
            check(
                serde_json::json!({"quality_gates": [{"event": "agent.final", "type": "command"}]})
            )
            .unwrap_err()
            .contains("needs \"command\"")
        );
        assert!(
            check(serde_json::json!({"quality_gates": [{"event": "agent.final", "type": "agent", "agnet": "qa"}]}))
                .unwrap_err()
                .contains("agnet")
        );
    }
}

//! Running agent turns for every entry point (`talon chat`, the HTTP API): the caller bound to
//! its agent, the agent's model, the session's history from the store, the turn saved whole when
//! it ends. One place, so the CLI and HTTP cannot drift apart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use talon_agent::{Agent, Message, RunEvent, TurnOutcome, TurnStop};
use talon_core::{CallContext, Callers, Pipeline, RunKind};
use talon_store::Store;
use tokio_util::sync::CancellationToken;

use crate::chat_config::agent_model;
use crate::config::Config;

/// Why a turn could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request or the configuration is wrong (an unknown agent, no provider).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error("{0}")]
    Store(String),
}

/// Where a turn runs and what it remembers.
pub struct TurnRequest<'a> {
    /// The agent (default: the configured default agent).
    pub agent: Option<&'a str>,
    /// The end user, if the entry point knows one.
    pub user: Option<&'a str>,
    /// `Some`: a stored session, continued and saved. `None`: only `history`, nothing saved
    /// (OpenAI-style clients that send the whole conversation every time).
    pub session: Option<String>,
    pub history: Vec<Message>,
    pub prompt: String,
    /// The channel type in the context (`cli`, `http`).
    pub channel: &'a str,
    /// Who answers the tools' questions to the user (AskUserQuestion), if anyone can.
    pub client: Option<talon_core::ClientHandle>,
    /// The permission mode, when the entry point chooses one (`talon chat --permission-mode`).
    pub permission_mode: Option<talon_core::permission::PermissionMode>,
    pub cancel: CancellationToken,
}

/// A finished turn and the session it ran in.
pub struct Ran {
    pub outcome: TurnOutcome,
    pub agent: String,
    /// The stored session's key, when there was one.
    pub session: Option<String>,
    /// The session's previous turn never finished (its process died).
    pub previous_interrupted: bool,
}

/// Runs turns; cheap to clone.
#[derive(Clone)]
pub struct Runner {
    config: Arc<Config>,
    pipeline: Arc<Pipeline>,
    template: Arc<CallContext>,
    callers: Callers,
    store: Store,
    agents: Arc<Mutex<HashMap<String, Arc<BuiltAgent>>>>,
}

/// An agent's loop and the API key to scrub from what it shows.
struct BuiltAgent {
    agent: Agent,
    api_key: Option<String>,
}

impl Runner {
    pub fn new(
        config: Config,
        pipeline: Arc<Pipeline>,
        template: CallContext,
        callers: Callers,
        store: Store,
    ) -> Self {
        Self {
            config: Arc::new(config),
            pipeline,
            template: Arc::new(template),
            callers,
            store,
            agents: Arc::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The session key for `chat` of `agent` on `channel` (GoClaw's shape: agent, channel,
    /// peer kind, chat).
    pub fn session_key(agent: &str, channel: &str, chat: &str) -> String {
        format!("agent:{agent}:{channel}:direct:{chat}")
    }

    /// The context of a turn: the caller bound to its agent and workspace.
    pub async fn context(
        &self,
        agent: Option<&str>,
        user: Option<&str>,
        channel: &str,
    ) -> Result<CallContext, RunError> {
        let mut ctx = (*self.template).clone();
        ctx.channel_type = Some(channel.to_string());
        ctx.peer_kind = Some("direct".into());
        ctx.run_kind = RunKind::Interactive;
        ctx.scrub_bag = Default::default();
        self.callers
            .bind(&mut ctx, agent, user)
            .await
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        Ok(ctx)
    }

    /// The agent's loop over its model, built once per agent.
    async fn agent(&self, key: &str) -> Result<Arc<BuiltAgent>, RunError> {
        if let Some(agent) = self
            .agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
        {
            return Ok(Arc::clone(agent));
        }
        let model = agent_model(&self.config, &self.config.providers, &self.store, key)
            .await
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        let built = Arc::new(BuiltAgent {
            agent: Agent::new(Arc::clone(&self.pipeline), model.provider, model.config),
            api_key: model.api_key,
        });
        self.agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_string(), Arc::clone(&built));
        Ok(built)
    }

    /// Checks that `agent` has a usable model configuration.
    pub async fn check_model(&self, agent: &str) -> Result<(), RunError> {
        self.agent(agent).await.map(|_| ())
    }

    /// Runs one turn: binds the caller, loads the session, runs the loop, saves the turn.
    pub async fn run(
        &self,
        request: TurnRequest<'_>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let mut ctx = self
            .context(request.agent, request.user, request.channel)
            .await?;
        let agent_key = ctx.agent_key.clone().unwrap_or_default();
        let built = self.agent(&agent_key).await?;
        let (agent, api_key) = (&built.agent, &built.api_key);
        if let Some(key) = api_key {
            ctx.scrub_bag.add(key.clone());
        }
        ctx.provider = Some(agent.provider_name().to_string());
        ctx.cancel = request.cancel;
        ctx.client = request.client;
        if let Some(mode) = request.permission_mode {
            ctx.permission_mode = mode;
        }
        let mut history = request.history;
        let mut start = None;
        let mut summary = None;
        if let Some(session) = &request.session {
            ctx.session_key = session.clone();
            let (earlier, live) = self.live_history(agent, session, events).await?;
            summary = earlier;
            history = live;
            start = Some(self.store.begin_turn(session, &agent_key).await.map_err(
                |e| match e {
                    talon_store::StoreError::Invalid { .. } => RunError::Invalid(e.to_string()),
                    e => RunError::Store(e.to_string()),
                },
            )?);
        } else {
            ctx.session_key = format!("{}:stateless", request.channel);
        }
        let mut prompt = request.prompt;
        if start.is_some_and(|s| s.turn == 1)
            && let Some(context) = agent.session_start(&ctx).await
        {
            prompt = format!("{context}\n\n{prompt}");
        }
        let mut system = self
            .system_prompt(
                agent.config().system.as_deref(),
                &agent_key,
                ctx.user.as_deref(),
            )
            .await?;
        if let Some(summary) = summary {
            let earlier = format!("# Earlier in this session (summary)\n\n{summary}");
            system = Some(match system {
                Some(s) => format!("{s}\n\n{earlier}"),
                None => earlier,
            });
        }
        let bus = self.pipeline.events();
        let started = std::time::Instant::now();
        bus.run_started(&ctx.session_key, &agent_key, request.channel);
        let session_key = ctx.session_key.clone();
        let outcome = agent
            .run_turn_with(
                system.as_deref(),
                Arc::new(ctx),
                &history,
                Message::user(prompt),
                events,
            )
            .await;
        bus.run_finished(
            &session_key,
            &agent_key,
            stop_label(&outcome.stop),
            outcome.iterations,
            started.elapsed(),
        );
        if let (Some(session), Some(start)) = (&request.session, start) {
            let messages: Vec<String> = outcome
                .messages
                .iter()
                .filter_map(|m| serde_json::to_string(m).ok())
                .collect();
            let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.store
                .finish_turn(
                    session,
                    start.turn,
                    &messages,
                    stop_label(&outcome.stop),
                    to_i64(outcome.usage.input_tokens),
                    to_i64(outcome.usage.output_tokens),
                )
                .await
                .map_err(|e| {
                    RunError::Store(format!("the turn ran but could not be saved: {e}"))
                })?;
        }
        Ok(Ran {
            outcome,
            agent: agent_key,
            session: request.session,
            previous_interrupted: start.is_some_and(|s| s.previous_interrupted),
        })
    }

    /// The system prompt: the configured one, then the agent's context files for this user
    /// (GoClaw's order: SOUL, IDENTITY, AGENTS, TOOLS, USER, BOOTSTRAP, then the rest by name).
    async fn system_prompt(
        &self,
        configured: Option<&str>,
        agent: &str,
        user: Option<&str>,
    ) -> Result<Option<String>, RunError> {
        let files = self
            .store
            .context_files(agent, user.unwrap_or_default(), &[])
            .await
            .map_err(|e| RunError::Store(format!("cannot read {agent}'s context files: {e}")))?;
        Ok(compose_system_prompt(configured, files))
    }

    /// What a turn of `session` is given: the summary of its compacted part, if any, and the
    /// messages after it. When those near the model's context window, the oldest turns are
    /// summarised first (a failed summary only logs: the turn runs on the full history).
    async fn live_history(
        &self,
        agent: &Agent,
        session: &str,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<(Option<String>, Vec<Message>), RunError> {
        let record = self
            .store
            .session(session)
            .await
            .map_err(|e| RunError::Store(format!("cannot read session {session}: {e}")))?;
        let (mut summary, after) =
            record.map_or((String::new(), 0), |r| (r.summary, r.summary_through));
        let stored = self
            .store
            .session_messages_after(session, after)
            .await
            .map_err(|e| RunError::Store(format!("cannot read session {session}: {e}")))?;
        let mut seqs = Vec::with_capacity(stored.len());
        let mut live = Vec::with_capacity(stored.len());
        for (seq, m) in &stored {
            seqs.push(*seq);
            live.push(parse_message(session, m)?);
        }
        let config = agent.config();
        if let Some(window) = config.context_window {
            let threshold = (window as f64 * config.compact_at) as u64;
            let keep = (window as f64 * config.compact_at / 2.0) as u64;
            if talon_agent::compact::estimate_tokens(&live) > threshold
                && let Some(cut) = talon_agent::compact::cut_point(&live, keep)
            {
                let previous = (!summary.is_empty()).then_some(summary.as_str());
                match agent.summarize(previous, &live[..cut]).await {
                    Ok(new) if !new.is_empty() => {
                        self.store
                            .compact_session(session, seqs[cut - 1], &new)
                            .await
                            .map_err(|e| {
                                RunError::Store(format!("cannot compact {session}: {e}"))
                            })?;
                        summary = new;
                        live.drain(..cut);
                        events(RunEvent::Compacted { messages: cut });
                    }
                    Ok(_) => {
                        tracing::warn!(session, "the model gave an empty summary; not compacted")
                    }
                    Err(e) => {
                        tracing::warn!(session, error = %e, "compaction failed; the turn runs on the whole history")
                    }
                }
            }
        }
        Ok(((!summary.is_empty()).then_some(summary), live))
    }

    /// A stored session's messages.
    pub async fn history(&self, session: &str) -> Result<Vec<Message>, RunError> {
        let stored = self
            .store
            .session_messages(session, None)
            .await
            .map_err(|e| RunError::Store(format!("cannot read session {session}: {e}")))?;
        stored.iter().map(|m| parse_message(session, m)).collect()
    }
}

impl Runner {
    /// Makes `sessions_send` run its turns with this runner.
    pub fn serve_sessions_send(&self, slot: &talon_tools::sessions::SenderSlot) {
        slot.set(Arc::new(self.clone()));
    }
}

impl talon_tools::sessions::SessionSender for Runner {
    fn send<'a>(
        &'a self,
        ctx: &'a CallContext,
        session_key: &'a str,
        text: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let ran = self
                .run(
                    TurnRequest {
                        agent: ctx.agent_key.as_deref(),
                        user: ctx.user.as_deref(),
                        session: Some(session_key.to_string()),
                        history: Vec::new(),
                        prompt: text.to_string(),
                        channel: "session",
                        client: None,
                        permission_mode: None,
                        // Cancelling the sending call cancels the turn it started.
                        cancel: ctx.cancel.child_token(),
                    },
                    &|_| {},
                )
                .await
                .map_err(|e| e.to_string())?;
            match ran.outcome.stop {
                TurnStop::Failed(why) => Err(format!("the turn failed: {why}")),
                TurnStop::PromptBlocked(why) => Err(format!("the message was refused: {why}")),
                TurnStop::Cancelled => Err("the turn was cancelled".into()),
                _ => Ok(ran.outcome.text),
            }
        })
    }
}

/// One stored message.
fn parse_message(session: &str, stored: &str) -> Result<Message, RunError> {
    serde_json::from_str(stored).map_err(|e| {
        RunError::Store(format!(
            "session {session} holds a message this version cannot read ({e})"
        ))
    })
}

/// Context files in the order GoClaw puts them in the system prompt.
const CONTEXT_ORDER: &[&str] = &[
    "SOUL.md",
    "IDENTITY.md",
    "AGENTS.md",
    "TOOLS.md",
    "USER.md",
    "BOOTSTRAP.md",
];

/// `configured`, then each non-empty context file under its name; `None` when all are empty.
fn compose_system_prompt(
    configured: Option<&str>,
    mut files: Vec<(String, String)>,
) -> Option<String> {
    let rank = |name: &str| {
        CONTEXT_ORDER
            .iter()
            .position(|n| *n == name)
            .unwrap_or(CONTEXT_ORDER.len())
    };
    files.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.0.cmp(&b.0)));
    let mut parts: Vec<String> = configured
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    for (name, content) in files {
        if !content.trim().is_empty() {
            parts.push(format!("# {name}\n\n{}", content.trim_end()));
        }
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The label stored with a finished turn.
pub fn stop_label(stop: &TurnStop) -> &'static str {
    match stop {
        TurnStop::Final => "final",
        TurnStop::MaxTokens => "max_tokens",
        TurnStop::Refusal => "refusal",
        TurnStop::IterationCap => "iteration_cap",
        TurnStop::TokenBudget => "token_budget",
        TurnStop::LoopDetected(_) => "loop_detected",
        TurnStop::PromptBlocked(_) => "prompt_blocked",
        TurnStop::Cancelled => "cancelled",
        TurnStop::Failed(_) => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_files_follow_the_configured_prompt_in_goclaw_order() {
        let files = vec![
            ("AGENTS.md".to_string(), "agents".to_string()),
            ("NOTES.md".to_string(), "notes".to_string()),
            ("SOUL.md".to_string(), "soul\n".to_string()),
            ("EMPTY.md".to_string(), "  ".to_string()),
            ("DELEGATION.md".to_string(), "delegation".to_string()),
        ];
        let prompt = compose_system_prompt(Some("Be brief."), files).unwrap_or_default();
        assert_eq!(
            prompt,
            "Be brief.\n\n# SOUL.md\n\nsoul\n\n# AGENTS.md\n\nagents\n\n# DELEGATION.md\n\ndelegation\n\n# NOTES.md\n\nnotes"
        );
        assert_eq!(compose_system_prompt(None, Vec::new()), None);
        assert_eq!(compose_system_prompt(Some(" "), Vec::new()), None);
    }
}

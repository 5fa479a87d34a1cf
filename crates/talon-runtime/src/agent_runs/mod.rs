//! Running agent turns for every entry point (`talon chat`, the HTTP API, channels, child runs).
//!
//! Two layers, so a newcomer knows where a feature goes:
//!
//! - [`TurnEngine`] (`engine`): one agent turn, start to end. It owns the agents' loops, the
//!   sessions' history and the turns running in this process, and knows no service.
//! - [`Runner`]: the engine with the services that start turns on it — child runs
//!   ([`crate::runs`]: subagents, delegation, evaluate rounds, gates, handoff), teams
//!   ([`crate::teams`]), scheduled jobs ([`crate::cron`]) and channels ([`crate::channels`]).
//!   Each service is a module with its tools, its HTTP routes, its typed operations and its
//!   error enum; they share the run service's one way to start a run
//!   ([`crate::runs::authority`]). A new kind of work is a new service module, not a new field
//!   of the engine.

use std::sync::Arc;

use talon_agent::{Message, RunEvent, TurnOptions, TurnOutcome, TurnStop};
use talon_core::questions::Questions;
use talon_core::{CallContext, Callers, Pipeline};
use talon_store::Store;
use tokio_util::sync::CancellationToken;

pub mod engine;
mod history;
mod modes;
mod prompt;
mod running;
use crate::config::Config;
pub use engine::TurnEngine;
pub(crate) use engine::TurnSections;

/// Why a turn could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request or the configuration is wrong (no provider, a bad session key).
    #[error("{0}")]
    Invalid(String),
    /// The request names an agent that does not exist (the message says how to create it).
    #[error("{0}")]
    UnknownAgent(String),
    /// The store failed.
    #[error("{0}")]
    Store(String),
    /// The database cannot be reached now; the same request may succeed later (HTTP: 503 with
    /// `Retry-After`).
    #[error("{0}; the database cannot be reached now, try again shortly")]
    Unavailable(String),
}

/// A store failure while doing `what`: [`RunError::Unavailable`] when the database could not be
/// reached, [`RunError::Store`] otherwise.
pub(crate) fn store_failed(what: impl std::fmt::Display, e: talon_store::StoreError) -> RunError {
    if e.is_unavailable() {
        RunError::Unavailable(format!("{what}: {e}"))
    } else {
        RunError::Store(format!("{what}: {e}"))
    }
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
    /// What an API client adds to the turn.
    pub api: ApiTurn,
    /// Set when the turn is a child run's: how deep it is and the tools it may have (never
    /// more than its parent's).
    pub child: Option<ChildTurn>,
    /// The runs whose results the prompt shows (an announcement): marked delivered in the
    /// transaction that saves the turn, so they reach the session exactly once.
    pub delivering: Vec<String>,
    /// The chat a channel brought this turn from (the inbound loop), if one did.
    pub origin: Option<ChannelOrigin>,
}

/// Where a channel's message came from: put in the turn's context, where `message` reads it
/// (replies are pinned to it) and the policy reads the allow list (the final intersection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelOrigin {
    /// The channel's name (`[channels.<name>]`).
    pub channel: String,
    /// The chat, then `/` and the forum topic when there is one.
    pub chat: String,
    /// `direct` or `group`.
    pub peer_kind: String,
    /// The only tools the chat's or topic's configuration allows, if it sets any.
    pub tool_allow: Option<Vec<String>>,
}

/// A child run's turn (see [`crate::run_tools`]).
#[derive(Debug, Clone, Default)]
pub struct ChildTurn {
    /// 1 for a run a person's turn started.
    pub spawn_depth: u32,
    /// The parent's effective tool set: the child's is never wider.
    pub tool_allow: Vec<String>,
    /// The run this turn is, and its parent run, named on the turn's events.
    pub run: talon_core::events::RunRef,
    /// What is left of its root run's budget: model requests and tokens.
    pub max_requests: Option<u32>,
    pub token_budget: Option<u64>,
    /// The model its definition names (on the agent's provider), if any.
    pub model: Option<String>,
    /// A scheduled job's run (origin `cron`): its calls are [`RunKind::Scheduled`], not
    /// [`RunKind::Subagent`], so tools that treat scheduled work apart can tell.
    pub scheduled: bool,
    /// The messages its turn had when its gateway stopped (the turn's checkpoint): the turn
    /// continues from them, with no new prompt, instead of starting again from its task.
    pub resume_from: Vec<Message>,
}

/// What an API client (`/v1/chat/completions`, `/v1/messages`) adds to a turn.
#[derive(Debug, Default)]
pub struct ApiTurn {
    /// The client's system or developer messages, after the agent's own system prompt (which
    /// they add to, never replace).
    pub system: Option<String>,
    /// Images shown with the prompt.
    pub images: Vec<talon_agent::message::Image>,
    /// No prompt: the history ends in the results of tools the client ran, and the model
    /// continues from them.
    pub resume: bool,
    /// The client's tools and sampling settings.
    pub options: TurnOptions,
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

/// The turn engine and the services that run on it; cheap to clone. Entry points hold one.
#[derive(Clone)]
pub struct Runner {
    engine: TurnEngine,
    /// The child runs this process runs and announces (see [`crate::runs`]).
    pub(crate) runs: Arc<crate::runs::RunState>,
    /// The embedding model (remembering its candidates' vectors), for ranking delegation
    /// targets by meaning; `None`: by words only.
    pub(crate) embedder: Option<talon_embed::CachedEmbedder>,
    /// The configured chat channels: scheduled jobs deliver results through them.
    pub(crate) channels: crate::channels::Channels,
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
            engine: TurnEngine::new(config, pipeline, template, callers, store),
            runs: Arc::default(),
            embedder: None,
            channels: crate::channels::Channels::default(),
        }
    }

    /// Tools' questions in turns whose entry point gives no client of its own wait in
    /// `questions` (answered over `/v1/questions`).
    pub fn with_questions(mut self, questions: Arc<Questions>) -> Self {
        self.engine.set_questions(questions);
        self
    }

    /// Jobs deliver results to chats of `channels`.
    pub fn with_channels(mut self, channels: crate::channels::Channels) -> Self {
        self.channels = channels;
        self
    }

    /// Lists `skills` (name and description) in every turn's system prompt.
    pub fn with_skills(mut self, skills: talon_tools::skills::catalog::Skills) -> Self {
        self.engine.set_skills(skills);
        self
    }

    /// Ranks delegation targets by meaning as well as words, with `embedder`.
    pub fn with_embedder(mut self, embedder: Arc<dyn talon_embed::Embedder>) -> Self {
        self.embedder = Some(talon_embed::CachedEmbedder::new(embedder));
        self
    }

    /// The turn engine the services run their turns on.
    pub fn engine(&self) -> &TurnEngine {
        &self.engine
    }

    pub fn store(&self) -> &Store {
        self.engine.store()
    }

    /// The pipeline every call of its turns goes through.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        self.engine.pipeline()
    }

    /// `[subagents]`: the limits and deny lists of child runs.
    pub fn subagent_policy(&self) -> &talon_core::policy::SubagentPolicy {
        self.engine.subagent_policy()
    }

    /// Runs one turn: binds the caller, loads the session, runs the loop, saves the turn. A
    /// person's turn in a chat that was handed off runs as the agent it was handed to, in that
    /// agent's session for the chat ([`crate::runs::handoff`]).
    pub async fn run(
        &self,
        request: TurnRequest<'_>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let route = match (&request.session, &request.child) {
            (Some(session), None) if request.delivering.is_empty() => {
                self.route(request.channel, session, request.user).await
            }
            _ => None,
        };
        let request = match &route {
            Some(route) => TurnRequest {
                agent: Some(&route.target_agent),
                session: Some(route.target_session.clone()),
                ..request
            },
            None => request,
        };
        // A person's turn in a stored session passes the agent's `agent.final` gates.
        let gated = request.child.is_none()
            && request.delivering.is_empty()
            && request.session.is_some()
            && !request.api.resume;
        let retry = gated.then(|| crate::runs::gates::Resend {
            user: request.user.map(str::to_string),
            channel: request.channel,
            client: request.client.clone(),
            permission_mode: request.permission_mode,
            cancel: request.cancel.clone(),
        });
        let Some(retry) = retry else {
            return self.run_turn(request, events).await;
        };
        // An answer a blocking gate judges is not shown before it passes: its text is held
        // (tool activity still shows) and given once, judged; a rejected draft is never seen.
        let agent = request
            .agent
            .unwrap_or(self.engine.default_agent())
            .to_string();
        if !self.blocking_final_gates(&agent).await {
            let ran = self.run_turn(request, events).await?;
            return self.gate_final(ran, retry, events).await;
        }
        let holding = |event: RunEvent| {
            if !matches!(event, RunEvent::Text { .. }) {
                events(event);
            }
        };
        let ran = self.run_turn(request, &holding).await?;
        let ran = self.gate_final(ran, retry, &holding).await?;
        if ran.outcome.stop == talon_agent::TurnStop::Final && !ran.outcome.text.is_empty() {
            events(RunEvent::Text {
                text: ran.outcome.text.clone(),
            });
        }
        Ok(ran)
    }

    /// One turn on the engine, with what the services add to its system prompt.
    pub(crate) async fn run_turn(
        &self,
        request: TurnRequest<'_>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        self.engine.turn(request, self, events).await
    }
}

impl TurnSections for Runner {
    async fn files(&self, agent: &str, user: Option<&str>) -> Vec<(&'static str, String)> {
        let mut files = Vec::new();
        // Generated for an agent with delegation targets.
        if let Some(delegation) = self.delegation_file(agent, user).await {
            files.push(("DELEGATION.md", delegation));
        }
        // The lead of a team sees TEAM.md (members see it only in the runs of team work).
        if let Some(team) = self.team_file(agent, user.unwrap_or_default()).await {
            files.push(("TEAM.md", team));
        }
        files
    }

    async fn session_note(&self, session: &str) -> Option<String> {
        self.live_children_note(session).await
    }
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
        TurnStop::ClientTools => "client_tools",
    }
}

//! Running agent turns for every entry point (`talon chat`, the HTTP API, channels, child runs).
//!
//! [`TurnEngine`] (`engine`) runs one agent turn, start to end. It owns the agents' loops, the
//! sessions' history and the turns running in this process, and knows no service: the services
//! ([`crate::runner::Runner`]) start turns on it and add to a turn's system prompt through
//! [`TurnSections`]. This module holds what a turn is asked to do ([`TurnRequest`]) and what it
//! answers ([`Ran`], [`RunError`]).

use talon_agent::{Message, TurnOptions, TurnOutcome, TurnStop};
use tokio_util::sync::CancellationToken;

pub mod engine;
mod history;
mod modes;
mod prompt;
mod running;
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

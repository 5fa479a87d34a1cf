//! The per-call context: an immutable value handed to the pipeline and, read-only, to the tool.
//!
//! GoClaw threads these values through `context.Context` keys; Talon makes them one typed value
//! so a tool cannot forget a key and an entry point cannot forget to set one (the session key is
//! required by the constructor). Tools are shared across concurrent calls and read everything
//! call-specific from here.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::permission::PermissionMode;

/// The agent a call runs as when its entry point names none. Talon creates it in the store on
/// first start, so memory and context files always have an owner (`[agents] default` in the
/// binary's configuration can name another).
pub const DEFAULT_AGENT: &str = "default";

/// Why a run exists; tools and policy may behave differently for background runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// A user-facing conversation turn.
    #[default]
    Interactive,
    /// A heartbeat or notification run.
    Notification,
    /// A subagent's result being announced to its parent.
    Announce,
    /// A subagent's own turn (a child run).
    Subagent,
    /// A run on behalf of another agent (delegation, teams).
    Delegation,
    /// A scheduled (cron) run.
    Scheduled,
    /// A direct call from an API client (HTTP invoke, MCP, CLI).
    Api,
}

/// Secret values known only to one request (for example credentials injected into one command).
///
/// Shared between the context and the tool so a tool can register a value it just used; the
/// pipeline scrubs them from that call's output without adding them to the global list, so one
/// tenant's secrets never leak into another tenant's scrub list.
#[derive(Debug, Default, Clone)]
pub struct ScrubBag(Arc<RwLock<Vec<String>>>);

impl ScrubBag {
    /// Values shorter than this are ignored: they would redact ordinary words.
    pub const MIN_LEN: usize = 6;

    /// Adds a value to scrub from this request's output.
    pub fn add(&self, value: impl Into<String>) {
        let value = value.into();
        if value.len() < Self::MIN_LEN {
            return;
        }
        if let Ok(mut values) = self.0.write()
            && !values.contains(&value)
        {
            values.push(value);
        }
    }

    /// A snapshot of the values registered so far.
    pub fn values(&self) -> Vec<String> {
        self.0.read().map(|v| v.clone()).unwrap_or_default()
    }

    /// True when nothing has been registered (the common case; lets the scrubber skip work).
    pub fn is_empty(&self) -> bool {
        self.0.read().map(|v| v.is_empty()).unwrap_or(true)
    }
}

/// Everything a call needs to know about who is calling, from where, and under which limits.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// Key for rate limiting and per-session tool state; every entry point must supply one.
    pub session_key: String,
    /// Channel instance name (for example `telegram-main`).
    pub channel: Option<String>,
    /// Channel type (`telegram`, `http`, `mcp`, `cli`, …); some tools exist only for some types.
    pub channel_type: Option<String>,
    /// Conversation id within the channel.
    pub chat_id: Option<String>,
    /// `direct` or `group`.
    pub peer_kind: Option<String>,
    /// Composite local key such as `-100123:topic:42`.
    pub local_key: Option<String>,
    /// Key selecting the sandbox instance; defaults to the session key.
    pub sandbox_key: Option<String>,
    /// Root directory file and shell tools are confined to.
    pub workspace: Option<PathBuf>,
    /// The agent on whose behalf the call runs (selects the agent's policy).
    pub agent_key: Option<String>,
    /// LLM provider of the running agent (selects provider policy overrides).
    pub provider: Option<String>,
    /// The model the running agent's turn uses (the Config tool reports it).
    pub model: Option<String>,
    /// End user the agent serves.
    pub user: Option<String>,
    /// Tenant the user belongs to.
    pub tenant: Option<String>,
    /// 0 for a top-level agent; n for a subagent n levels down.
    pub spawn_depth: u32,
    /// Why this run exists.
    pub run_kind: RunKind,
    /// The stored run (a subagent, a delegation) this turn is, and the run that started it:
    /// named on every event of the turn.
    pub run: crate::events::RunRef,
    /// What the person said to start this turn (not yet in the stored history while the turn
    /// runs): a handoff passes it on with the conversation.
    pub turn_prompt: Option<std::sync::Arc<str>>,
    /// Claude Code permission mode for this call.
    pub permission_mode: PermissionMode,
    /// The mode an approved plan (`ExitPlanMode`) returns to: the mode in force before plan
    /// mode, never looser than the configured one. Entry points set it with the mode; the
    /// agent loop keeps it when the model enters plan mode.
    pub mode_after_plan: PermissionMode,
    /// Per-request tool allow list (for example a forum topic's tools); intersected last.
    pub tool_allow: Option<Arc<[String]>>,
    /// Cancelled when the caller gives up (client disconnect, parent abort).
    pub cancel: CancellationToken,
    /// Absolute deadline for the call, if the caller has one.
    pub deadline: Option<Instant>,
    /// Values to scrub from this request's output only.
    pub scrub_bag: ScrubBag,
    /// Path of the conversation transcript, reported to hooks as `transcript_path`.
    pub transcript_path: Option<PathBuf>,
    /// Where a long tool's progress goes (an MCP client that sent a `progressToken`).
    pub progress: Option<ProgressSink>,
    /// The caller's own client, when it can answer questions for its user (MCP elicitation).
    pub client: Option<ClientHandle>,
    /// Who answers this call's approvals.
    pub ask_via: AskVia,
    /// The entry point's tool dialect, when the configuration names none (`None`: both).
    pub dialect: Option<crate::policy::Dialect>,
    /// Where a running tool's log messages go (an MCP client's `notifications/message`); the
    /// pipeline scrubs them like the output.
    pub log: Option<LogSink>,
}

/// Who answers a call's approvals (see [`crate::approvals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AskVia {
    /// Talon's approvals broker: the terminal, `/v1/approvals`, the CLI.
    #[default]
    Broker,
    /// The caller's MCP client: asked through elicitation when it supports it; otherwise the
    /// call is refused at once, naming the setting that allows it. Nobody else sees the
    /// request, so it never waits for an answer that cannot come.
    McpClient {
        /// The client asks its user before each tool call (Claude Code does), which answers
        /// what a tool's risk alone would ask; rules and hooks that ask still ask.
        confirms_calls: bool,
    },
}

impl AskVia {
    /// Whether the caller's client confirmed the call with its user already.
    pub fn client_confirmed(self) -> bool {
        matches!(
            self,
            AskVia::McpClient {
                confirms_calls: true
            }
        )
    }
}

/// The boxed answer of [`ClientRequests::elicit`].
pub type ClientFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, String>> + Send>>;

/// Requests a tool may pass to the caller's own client, as the protocol's JSON (so the core
/// needs no MCP types).
pub trait ClientRequests: Send + Sync {
    /// Sends `elicitation/create` with `params` and returns the client's result.
    fn elicit(&self, params: serde_json::Value) -> ClientFuture;
}

/// A shared [`ClientRequests`].
#[derive(Clone)]
pub struct ClientHandle(pub Arc<dyn ClientRequests>);

impl std::fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientHandle")
    }
}

/// One progress report of a running tool (MCP's `notifications/progress`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProgressUpdate {
    /// Increases with each report.
    pub progress: f64,
    /// The value `progress` reaches when done, if known.
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Severity of a tool's log message (the syslog levels MCP logging uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// One log message of a running tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogMessage {
    pub level: LogLevel,
    /// What happened: a string or any JSON value.
    pub data: serde_json::Value,
}

/// Receives a call's log messages; cheap to clone.
#[derive(Clone)]
pub struct LogSink(pub Arc<dyn Fn(LogMessage) + Send + Sync>);

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogSink")
    }
}

/// Receives a call's progress reports; cheap to clone.
#[derive(Clone)]
pub struct ProgressSink(pub Arc<dyn Fn(ProgressUpdate) + Send + Sync>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

impl CallContext {
    /// The call belongs to a run (a subagent, a delegation, a team member, a scheduled job)
    /// rather than a person's or an API client's own turn.
    pub fn is_run(&self) -> bool {
        self.run.run_id.is_some()
            || matches!(
                self.run_kind,
                RunKind::Subagent | RunKind::Delegation | RunKind::Scheduled
            )
    }

    /// A context with the required session key and defaults for everything else.
    pub fn new(session_key: impl Into<String>) -> Self {
        Self {
            session_key: session_key.into(),
            channel: None,
            channel_type: None,
            chat_id: None,
            peer_kind: None,
            local_key: None,
            sandbox_key: None,
            workspace: None,
            agent_key: None,
            provider: None,
            model: None,
            user: None,
            tenant: None,
            spawn_depth: 0,
            run_kind: RunKind::default(),
            run: Default::default(),
            turn_prompt: None,
            permission_mode: PermissionMode::default(),
            mode_after_plan: PermissionMode::default(),
            tool_allow: None,
            progress: None,
            client: None,
            ask_via: AskVia::default(),
            dialect: None,
            log: None,
            cancel: CancellationToken::new(),
            deadline: None,
            scrub_bag: ScrubBag::default(),
            transcript_path: None,
        }
    }

    /// Passes a running tool's progress to whoever asked for it (nothing when no one did).
    pub fn report_progress(&self, update: ProgressUpdate) {
        if let Some(sink) = &self.progress {
            (sink.0)(update);
        }
    }

    /// Passes a running tool's log message to whoever listens (nothing when no one does).
    pub fn log(&self, level: LogLevel, data: impl Into<serde_json::Value>) {
        if let Some(sink) = &self.log {
            (sink.0)(LogMessage {
                level,
                data: data.into(),
            });
        }
    }

    /// The sandbox key, falling back to the session key as GoClaw does.
    pub fn sandbox_key(&self) -> &str {
        self.sandbox_key.as_deref().unwrap_or(&self.session_key)
    }
}

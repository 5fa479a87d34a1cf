//! Tool events (start, end with elapsed time) for entry points to subscribe to, and the audit
//! sink the store implements later.
//!
//! The bus keeps a bounded ring of events for its subscribers: at most [`EVENT_BACKLOG`] events,
//! and a progress report's message (the one part of an event a bridged server writes freely)
//! at most [`MAX_PROGRESS_MESSAGE_BYTES`], so a stalled subscriber holds little however fast a
//! server reports. A subscriber that falls behind loses the oldest events and is told how many
//! (`GET /v1/events` sends a `lagged` notice).
//!
//! Every event names the user of the call or turn it belongs to ([`ToolEvent::user`], `user` in
//! its JSON; `null`: one naming no user), because several users share one `talon serve` and a
//! subscriber must see only its own user's runs, tool calls and questions (issue 22 item 4's
//! class).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;

/// One tool event. Strings are shared (`Arc<str>`) so publishing allocates nothing per field.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolEvent {
    /// A call passed every check and its tool started.
    #[serde(rename = "tool_started")]
    Started {
        call_id: u64,
        tool: Arc<str>,
        session_key: Arc<str>,
        agent_key: Option<Arc<str>>,
        user: Option<Arc<str>>,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A call ended (including calls refused before execution).
    #[serde(rename = "tool_finished")]
    Finished {
        call_id: u64,
        tool: Arc<str>,
        session_key: Arc<str>,
        agent_key: Option<Arc<str>>,
        user: Option<Arc<str>>,
        is_error: bool,
        #[serde(with = "duration_ms")]
        elapsed: Duration,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A running tool reported progress.
    #[serde(rename = "tool_progress")]
    Progress {
        tool: Arc<str>,
        session_key: Arc<str>,
        agent_key: Option<Arc<str>>,
        user: Option<Arc<str>>,
        #[serde(flatten)]
        update: crate::context::ProgressUpdate,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A call waits for a person's approval.
    ApprovalRequested {
        request: Arc<crate::approvals::PendingApproval>,
    },
    /// A pending approval was answered (or timed out, as a denial).
    ApprovalResolved {
        id: Arc<str>,
        tool: Arc<str>,
        session_key: Arc<str>,
        agent_key: Option<Arc<str>>,
        user: Option<Arc<str>>,
        /// `allow_once`, `allow_always` or `deny`.
        decision: &'static str,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A tool asks the user and waits for an answer over HTTP (`/v1/questions`).
    QuestionAsked {
        request: Arc<crate::questions::PendingQuestion>,
    },
    /// A question was answered (`accept`, `decline` or `cancel`).
    QuestionAnswered {
        id: Arc<str>,
        session_key: Arc<str>,
        agent_key: Option<Arc<str>>,
        user: Option<Arc<str>>,
        action: &'static str,
        #[serde(flatten)]
        run: RunRef,
    },
    /// An agent turn began (the agent runtime).
    RunStarted {
        session_key: Arc<str>,
        agent_key: Arc<str>,
        user: Option<Arc<str>>,
        /// The entry point: `cli`, `http`, `session`.
        channel: Arc<str>,
        #[serde(flatten)]
        run: RunRef,
    },
    /// An agent turn ended.
    RunFinished {
        session_key: Arc<str>,
        agent_key: Arc<str>,
        user: Option<Arc<str>>,
        /// Why: `final`, `cancelled`, `failed`, `loop_detected`, …
        stop: &'static str,
        iterations: u32,
        #[serde(with = "duration_ms")]
        elapsed: Duration,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A run (a subagent, a delegation) was started for a session's turn or another run.
    ChildRunStarted {
        /// The session the run's result goes to.
        session_key: Arc<str>,
        agent_key: Arc<str>,
        user: Option<Arc<str>>,
        /// `subagent`, `delegation`, …
        origin: Arc<str>,
        /// Its task, cut to a line's length.
        task: Arc<str>,
        /// Whether the caller waits for it (`false`: it runs in the background).
        background: bool,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A run ended: `completed`, `failed`, `cancelled`, `limit_reached`, `timed_out`, `lost`.
    ChildRunFinished {
        session_key: Arc<str>,
        agent_key: Arc<str>,
        user: Option<Arc<str>>,
        status: &'static str,
        input_tokens: i64,
        output_tokens: i64,
        #[serde(flatten)]
        run: RunRef,
    },
    /// A conversation was handed to another agent (or handed back: `reason` "cleared").
    Handoff {
        /// The chat's session.
        session_key: Arc<str>,
        from_agent: Arc<str>,
        to_agent: Arc<str>,
        user: Option<Arc<str>>,
        reason: Arc<str>,
    },
    /// A team's board or mailbox changed (`change`: `task_created`, `task_claimed`,
    /// `task_completed`, `task_failed`, `task_cancelled`, `message_sent`).
    Team {
        /// The lead's conversation the task or message belongs to (for a message, the
        /// sender's).
        session_key: Arc<str>,
        team: Arc<str>,
        /// Who acted: the lead, a member, or `talon` (the server dispatching).
        agent_key: Arc<str>,
        user: Option<Arc<str>>,
        change: &'static str,
        /// The task (0 for a message).
        task_id: i64,
        /// The task's subject, or the message's recipient ("*" for everyone).
        subject: Arc<str>,
    },
}

/// The turn a run event is about: its session, agent, user and run.
#[derive(Debug, Clone, Copy)]
pub struct TurnIds<'a> {
    pub session_key: &'a str,
    pub agent_key: &'a str,
    pub user: Option<&'a str>,
    pub run: &'a RunRef,
}

/// Which agent run an event belongs to: `run_id` is the run (a subagent, a delegation) whose
/// turn or call it is, `parent_run_id` the run that started that one; both `null` for a
/// person's own turn (and `parent_run_id` for a run a person's turn started).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunRef {
    pub run_id: Option<Arc<str>>,
    pub parent_run_id: Option<Arc<str>>,
}

impl ToolEvent {
    /// Every [`kind`](Self::kind), for subscribers that filter by kind and must refuse an
    /// unknown one.
    pub const KINDS: [&'static str; 13] = [
        "handoff",
        "team",
        "run_started",
        "run_finished",
        "child_run_started",
        "child_run_finished",
        "tool_started",
        "tool_finished",
        "tool_progress",
        "approval_requested",
        "approval_resolved",
        "question_asked",
        "question_answered",
    ];

    /// The event's name on the wire (SSE `event:`, the JSON's `type`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Started { .. } => "tool_started",
            Self::Finished { .. } => "tool_finished",
            Self::Progress { .. } => "tool_progress",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalResolved { .. } => "approval_resolved",
            Self::QuestionAsked { .. } => "question_asked",
            Self::QuestionAnswered { .. } => "question_answered",
            Self::RunStarted { .. } => "run_started",
            Self::RunFinished { .. } => "run_finished",
            Self::ChildRunStarted { .. } => "child_run_started",
            Self::ChildRunFinished { .. } => "child_run_finished",
            Self::Handoff { .. } => "handoff",
            Self::Team { .. } => "team",
        }
    }

    /// The session the event belongs to.
    pub fn session_key(&self) -> &str {
        match self {
            Self::Started { session_key, .. }
            | Self::Finished { session_key, .. }
            | Self::Progress { session_key, .. }
            | Self::ApprovalResolved { session_key, .. }
            | Self::QuestionAnswered { session_key, .. }
            | Self::RunStarted { session_key, .. }
            | Self::RunFinished { session_key, .. }
            | Self::ChildRunStarted { session_key, .. }
            | Self::ChildRunFinished { session_key, .. }
            | Self::Handoff { session_key, .. }
            | Self::Team { session_key, .. } => session_key,
            Self::ApprovalRequested { request } => &request.session,
            Self::QuestionAsked { request } => &request.session,
        }
    }

    /// The user of the call or turn the event belongs to (`None`: it named no user).
    pub fn user(&self) -> Option<&str> {
        match self {
            Self::Started { user, .. }
            | Self::Finished { user, .. }
            | Self::Progress { user, .. }
            | Self::ApprovalResolved { user, .. }
            | Self::QuestionAnswered { user, .. }
            | Self::RunStarted { user, .. }
            | Self::RunFinished { user, .. }
            | Self::ChildRunStarted { user, .. }
            | Self::ChildRunFinished { user, .. }
            | Self::Handoff { user, .. }
            | Self::Team { user, .. } => user.as_deref(),
            Self::ApprovalRequested { request } => request.user.as_deref(),
            Self::QuestionAsked { request } => request.user.as_deref(),
        }
    }

    /// The agent the event belongs to, when there is one.
    pub fn agent_key(&self) -> Option<&str> {
        match self {
            Self::Started { agent_key, .. }
            | Self::Finished { agent_key, .. }
            | Self::Progress { agent_key, .. }
            | Self::ApprovalResolved { agent_key, .. }
            | Self::QuestionAnswered { agent_key, .. } => agent_key.as_deref(),
            Self::RunStarted { agent_key, .. }
            | Self::RunFinished { agent_key, .. }
            | Self::ChildRunStarted { agent_key, .. }
            | Self::ChildRunFinished { agent_key, .. }
            | Self::Team { agent_key, .. } => Some(agent_key),
            Self::Handoff { from_agent, .. } => Some(from_agent),
            Self::ApprovalRequested { request } => request.agent.as_deref(),
            Self::QuestionAsked { request } => request.agent.as_deref(),
        }
    }
}

mod duration_ms {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }
}

/// Events a subscriber may fall behind by before it loses the oldest: enough for bursts (a turn
/// with many parallel calls and their progress), small enough that a subscriber that stopped
/// reading holds about a megabyte (each event is a few hundred bytes; a progress message at most
/// [`MAX_PROGRESS_MESSAGE_BYTES`]).
pub const EVENT_BACKLOG: usize = 1024;

/// The longest progress message kept or passed on, in bytes. Progress messages are status lines
/// ("step 3 of 10: indexing"); a bridged server once sent megabytes in each, and the event ring
/// and every queue toward a client kept them (issue 22 item 9). Longer ones are cut, marked "…".
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

impl crate::context::ProgressUpdate {
    /// This report with its message cut to [`MAX_PROGRESS_MESSAGE_BYTES`] (at a character
    /// boundary, ending in "…"). Every queue of progress reports keeps them bounded this way.
    #[must_use]
    pub fn bounded(mut self) -> Self {
        cut_progress_message(&mut self.message);
        self
    }
}

/// Cuts a progress message to [`MAX_PROGRESS_MESSAGE_BYTES`] (see [`ProgressUpdate::bounded`]).
///
/// [`ProgressUpdate::bounded`]: crate::context::ProgressUpdate::bounded
fn cut_progress_message(message: &mut Option<String>) {
    if let Some(message) = message
        && message.len() > MAX_PROGRESS_MESSAGE_BYTES
    {
        let mut end = MAX_PROGRESS_MESSAGE_BYTES - '…'.len_utf8();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
}

/// A fan-out of [`ToolEvent`]s. Slow subscribers lose old events rather than slow the pipeline.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<ToolEvent>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(EVENT_BACKLOG)
    }
}

impl EventBus {
    /// A bus keeping up to `capacity` undelivered events per subscriber.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        Self { sender }
    }

    /// A new subscription, receiving events published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ToolEvent> {
        self.sender.subscribe()
    }

    /// True when someone listens (lets the pipeline skip building events).
    pub fn has_subscribers(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Announces that an agent turn of `user` began. The agent runtime's only way onto the bus:
    /// tool and approval events come from the pipeline alone.
    pub fn run_started(&self, turn: &TurnIds<'_>, channel: &str) {
        if self.has_subscribers() {
            self.publish(ToolEvent::RunStarted {
                session_key: Arc::from(turn.session_key),
                agent_key: Arc::from(turn.agent_key),
                user: turn.user.map(Arc::from),
                channel: Arc::from(channel),
                run: turn.run.clone(),
            });
        }
    }

    /// Announces what the runtime does with runs: a child run starting or ending, a handoff
    /// (the runtime's, like [`EventBus::run_started`]; other kinds are not taken here).
    pub fn run_event(&self, event: ToolEvent) {
        if matches!(
            event,
            ToolEvent::ChildRunStarted { .. }
                | ToolEvent::ChildRunFinished { .. }
                | ToolEvent::Handoff { .. }
                | ToolEvent::Team { .. }
        ) && self.has_subscribers()
        {
            self.publish(event);
        }
    }

    /// Announces that an agent turn ended, and why.
    pub fn run_finished(
        &self,
        turn: &TurnIds<'_>,
        stop: &'static str,
        iterations: u32,
        elapsed: Duration,
    ) {
        if self.has_subscribers() {
            self.publish(ToolEvent::RunFinished {
                session_key: Arc::from(turn.session_key),
                agent_key: Arc::from(turn.agent_key),
                user: turn.user.map(Arc::from),
                stop,
                iterations,
                elapsed,
                run: turn.run.clone(),
            });
        }
    }

    pub(crate) fn publish(&self, mut event: ToolEvent) {
        if let ToolEvent::Progress { update, .. } = &mut event {
            cut_progress_message(&mut update.message);
        }
        // No subscriber is not an error.
        let _ = self.sender.send(event);
    }
}

/// One audited call, as the store will persist it.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub tool: Arc<str>,
    pub session_key: Arc<str>,
    pub agent_key: Option<Arc<str>>,
    pub user: Option<String>,
    /// Stable digest of the (final) arguments, so identical calls can be correlated without
    /// storing the arguments themselves.
    pub args_digest: String,
    pub is_error: bool,
    pub duration: Duration,
    /// Why the call failed before execution, if it did.
    pub stage: Option<&'static str>,
}

/// Where audit records go; the storage issue implements this over the database.
pub trait AuditSink: Send + Sync {
    fn record(&self, record: AuditRecord);
}

/// FNV-1a (64-bit) of `bytes` as 16 hex digits: stable across runs and platforms and cheap. Used
/// for audit argument digests and token-derived session keys, where the point is correlation
/// without storing the value; it is not a cryptographic hash.
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<ToolEvent> {
        let text = |s: &str| Arc::<str>::from(s);
        vec![
            ToolEvent::Started {
                call_id: 1,
                tool: text("t"),
                session_key: text("s"),
                agent_key: None,
                user: None,
                run: RunRef::default(),
            },
            ToolEvent::Finished {
                call_id: 1,
                tool: text("t"),
                session_key: text("s"),
                agent_key: None,
                user: None,
                is_error: false,
                elapsed: Duration::from_millis(3),
                run: RunRef::default(),
            },
            ToolEvent::Progress {
                tool: text("t"),
                session_key: text("s"),
                agent_key: None,
                user: None,
                update: crate::context::ProgressUpdate {
                    progress: 1.0,
                    total: None,
                    message: None,
                },
                run: RunRef::default(),
            },
            ToolEvent::ApprovalRequested {
                request: Arc::new(crate::approvals::PendingApproval {
                    id: "apr-1".into(),
                    tool: "t".into(),
                    agent: None,
                    session: "s".into(),
                    user: None,
                    summary: String::new(),
                    reason: String::new(),
                    always: None,
                    requested_at: 0,
                    expires_at: 0,
                    run: RunRef::default(),
                }),
            },
            ToolEvent::ApprovalResolved {
                id: text("apr-1"),
                tool: text("t"),
                session_key: text("s"),
                agent_key: None,
                user: None,
                decision: "deny",
                run: RunRef::default(),
            },
            ToolEvent::QuestionAsked {
                request: Arc::new(crate::questions::PendingQuestion {
                    id: "q-1".into(),
                    session: "s".into(),
                    agent: None,
                    user: None,
                    message: "?".into(),
                    requested_schema: serde_json::json!({}),
                    requested_at: 0,
                    expires_at: 0,
                    run: RunRef::default(),
                }),
            },
            ToolEvent::QuestionAnswered {
                id: text("q-1"),
                session_key: text("s"),
                agent_key: None,
                user: None,
                action: "cancel",
                run: RunRef::default(),
            },
            ToolEvent::RunStarted {
                session_key: text("s"),
                agent_key: text("a"),
                user: None,
                channel: text("http"),
                run: RunRef::default(),
            },
            ToolEvent::RunFinished {
                session_key: text("s"),
                agent_key: text("a"),
                user: None,
                stop: "final",
                iterations: 1,
                elapsed: Duration::from_millis(3),
                run: RunRef {
                    run_id: Some(text("run-1")),
                    parent_run_id: None,
                },
            },
            ToolEvent::ChildRunStarted {
                session_key: text("s"),
                agent_key: text("a"),
                user: None,
                origin: text("subagent"),
                task: text("t"),
                background: true,
                run: RunRef::default(),
            },
            ToolEvent::ChildRunFinished {
                session_key: text("s"),
                agent_key: text("a"),
                user: None,
                status: "completed",
                input_tokens: 1,
                output_tokens: 2,
                run: RunRef::default(),
            },
            ToolEvent::Handoff {
                session_key: text("s"),
                from_agent: text("a"),
                to_agent: text("b"),
                user: None,
                reason: text("billing"),
            },
            ToolEvent::Team {
                session_key: text("s"),
                team: text("alpha"),
                agent_key: text("lead"),
                user: None,
                change: "task_created",
                task_id: 1,
                subject: text("research"),
            },
        ]
    }

    #[test]
    fn kinds_list_every_event_as_its_json_names_it() {
        let events = one_of_each();
        let kinds: Vec<&str> = events.iter().map(ToolEvent::kind).collect();
        assert_eq!(kinds.len(), ToolEvent::KINDS.len());
        for kind in ToolEvent::KINDS {
            assert!(kinds.contains(&kind), "no event has the kind {kind}");
        }
        for event in &events {
            let json = serde_json::to_value(event).expect("serializes");
            assert_eq!(json["type"], event.kind(), "{json}");
        }
    }

    /// Issue 22 item 9: a subscriber that stopped reading held every progress report in full
    /// (1 GB from one server). It now holds at most [`EVENT_BACKLOG`] events with short
    /// messages, and learns how many it lost.
    #[test]
    fn h22_9_a_stalled_subscriber_holds_a_bounded_backlog() {
        let bus = EventBus::default();
        let mut stalled = bus.subscribe();
        let huge = "p".repeat(1024 * 1024);
        let published = EVENT_BACKLOG * 3;
        for n in 0..published {
            bus.publish(ToolEvent::Progress {
                tool: Arc::from("mcp__s__t"),
                session_key: Arc::from("s"),
                agent_key: None,
                user: None,
                update: crate::context::ProgressUpdate {
                    progress: n as f64,
                    total: None,
                    message: Some(huge.clone()),
                },
                run: RunRef::default(),
            });
        }
        let Err(broadcast::error::TryRecvError::Lagged(missed)) = stalled.try_recv() else {
            panic!("the subscriber was not told it fell behind");
        };
        let mut held = 0;
        let mut bytes = 0;
        while let Ok(event) = stalled.try_recv() {
            let ToolEvent::Progress { update, .. } = event else {
                panic!("unexpected event");
            };
            let message = update.message.unwrap_or_default();
            assert!(
                message.len() <= MAX_PROGRESS_MESSAGE_BYTES,
                "{}",
                message.len()
            );
            assert!(message.ends_with('…'));
            bytes += message.len();
            held += 1;
        }
        assert_eq!(held, EVENT_BACKLOG);
        assert_eq!(missed + held as u64, published as u64);
        assert!(bytes <= EVENT_BACKLOG * MAX_PROGRESS_MESSAGE_BYTES);
    }

    #[test]
    fn progress_messages_are_cut_at_a_character_boundary() {
        let update = |message: &str| crate::context::ProgressUpdate {
            progress: 1.0,
            total: None,
            message: Some(message.to_string()),
        };
        assert_eq!(update("short").bounded(), update("short"));
        let cut = update(&"é".repeat(MAX_PROGRESS_MESSAGE_BYTES))
            .bounded()
            .message
            .unwrap_or_default();
        assert!(cut.len() <= MAX_PROGRESS_MESSAGE_BYTES && cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }
}

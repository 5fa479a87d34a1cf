//! Pending approvals: the [`Approver`] that asks a person and waits.
//!
//! When the pipeline's permission step says "ask", [`Approvals`] records a pending request,
//! announces it on the event bus ([`ToolEvent::ApprovalRequested`]), hands it to an optional
//! interactive [`Prompter`] (a terminal), and waits for whichever answer comes first: the
//! prompter's, or one given through [`Approvals::resolve`] (the gateway's `POST /v1/approvals`,
//! the CLI). No answer within the timeout ([`DEFAULT_TIMEOUT`], two minutes) is a denial, so a
//! forgotten request never runs later by surprise.
//!
//! A call from an MCP client ([`AskVia::McpClient`]) is asked of that client through
//! elicitation, never of the broker: its user is the one at the client, and nobody watching
//! `/v1/approvals` could know the call is theirs. A client that cannot be asked gets a refusal
//! at once naming the settings that allow the call (see `client`). A request whose caller went
//! away (a closed session, a cancelled turn) is withdrawn and counts as denied.
//!
//! A request belongs to the user of the call that made it: [`Approvals::pending`] and
//! [`Approvals::resolve`] see only that user's (several users share one `talon serve`).
//!
//! "Allow always" is remembered through [`Remember`]: for shell commands that is the whole
//! normalised command, per agent, in the store — never a program name.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::context::AskVia;
use crate::events::{EventBus, ToolEvent};
use crate::permission::{Approval, Approver, PermissionRequest};
use crate::waiting::{Owned, WaitingRoom, unix_ms};

/// How long a request waits for an answer before it counts as denied.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Requests waiting at once; more are denied at once rather than pile up.
pub const MAX_PENDING: usize = 256;

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Resolution {
    /// Run this call.
    AllowOnce,
    /// Run this call, and remember the answer for the same request from the same agent.
    AllowAlways,
    /// Refuse, with an optional reason for the model.
    Deny {
        #[serde(default)]
        reason: Option<String>,
    },
}

impl Resolution {
    /// `allow_once`, `allow_always`, `deny`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowAlways => "allow_always",
            Self::Deny { .. } => "deny",
        }
    }
}

/// One waiting request, as shown to whoever answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingApproval {
    pub id: String,
    pub tool: String,
    pub agent: Option<String>,
    pub session: String,
    /// The user of the call (`None`: the call named no user); only they see and answer it.
    pub user: Option<String>,
    /// What would run (the command line for shell tools, the arguments otherwise).
    pub summary: String,
    /// Why the call needs approval.
    pub reason: String,
    /// What "allow always" would remember, when it can remember anything.
    pub always: Option<String>,
    /// Unix milliseconds.
    pub requested_at: u64,
    /// Unix milliseconds after which it counts as denied.
    pub expires_at: u64,
    /// The run (a subagent, a delegation) whose call it is.
    #[serde(flatten)]
    pub run: crate::events::RunRef,
}

impl Owned for PendingApproval {
    fn owner(&self) -> Option<&str> {
        self.user.as_deref()
    }
}

/// Why [`Approvals::resolve`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "no pending approval {0:?} of this user (it was answered, timed out, or never existed); list the user's pending approvals for their ids"
    )]
    Unknown(String),
    #[error("approval {0:?} cannot be allowed always: there is nothing to remember for this call")]
    CannotRemember(String),
}

/// Remembers "allow always" answers, and says what such an answer would cover.
pub trait Remember: Send + Sync {
    /// What "allow always" would remember for this request (`None`: nothing can be).
    fn always_key(&self, request: &PermissionRequest<'_>) -> Option<String>;

    /// Stores `key` as always allowed for `agent`.
    fn remember<'a>(&'a self, agent: Option<&'a str>, key: &'a str) -> BoxFuture<'a, ()>;
}

/// Asks a person interactively (a terminal prompt). Resolves to `None` when it cannot ask.
pub trait Prompter: Send + Sync {
    fn prompt(&self, request: PendingApproval) -> BoxFuture<'static, Option<Resolution>>;
}

/// The approvals broker (see the module docs).
pub struct Approvals {
    pending: WaitingRoom<PendingApproval, Resolution>,
    events: EventBus,
    timeout: Duration,
    remember: Option<Arc<dyn Remember>>,
    prompter: Option<Arc<dyn Prompter>>,
    /// Nobody can answer (no terminal, no approvals API): refuse at once instead of waiting.
    unattended: bool,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("pending", &self.pending.len())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The call as one line for a person: the `command` argument when there is one, else the JSON.
fn summary_of(request: &PermissionRequest<'_>) -> String {
    match request.input.get("command").and_then(|c| c.as_str()) {
        Some(command) => command.to_string(),
        None => request.input.to_string(),
    }
}

impl Approvals {
    /// A broker announcing on `events`, with the default timeout and nobody to prompt.
    pub fn new(events: EventBus) -> Self {
        Self {
            pending: WaitingRoom::new(MAX_PENDING),
            events,
            timeout: DEFAULT_TIMEOUT,
            remember: None,
            prompter: None,
            unattended: false,
        }
    }

    /// How long requests wait.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Where "allow always" answers go.
    pub fn with_remember(mut self, remember: Arc<dyn Remember>) -> Self {
        self.remember = Some(remember);
        self
    }

    /// Says nobody can answer here (a one-shot command without a terminal): requests are
    /// refused at once, with what to change, rather than after the timeout.
    pub fn unattended(mut self) -> Self {
        self.unattended = true;
        self
    }

    /// Who is asked interactively, besides [`Approvals::resolve`].
    pub fn with_prompter(mut self, prompter: Arc<dyn Prompter>) -> Self {
        self.prompter = Some(prompter);
        self
    }

    /// The requests of `user`'s calls waiting now, oldest first (`None`: of calls naming no
    /// user).
    pub fn pending(&self, user: Option<&str>) -> Vec<PendingApproval> {
        let mut list = self.pending.requests(user);
        list.sort_by_key(|r| r.requested_at);
        list
    }

    /// Answers `user`'s request `id`; another user's is [`ResolveError::Unknown`].
    pub fn resolve(
        &self,
        id: &str,
        user: Option<&str>,
        resolution: Resolution,
    ) -> Result<PendingApproval, ResolveError> {
        let always = resolution == Resolution::AllowAlways;
        self.pending
            .answer(id, user, resolution, |request| {
                if always && request.always.is_none() {
                    return Err(ResolveError::CannotRemember(id.to_string()));
                }
                Ok(())
            })?
            .ok_or_else(|| ResolveError::Unknown(id.to_string()))
    }

    async fn ask(&self, request: &PermissionRequest<'_>, reason: &str) -> Approval {
        let tool = request.spec.name.clone();
        // An MCP client's call is asked at the terminal when the operator chose that
        // (`talon mcp --tty-approvals`), else of the client.
        let via_client =
            matches!(request.ctx.ask_via, AskVia::McpClient { .. }) && self.prompter.is_none();
        if via_client && request.ctx.client.is_none() {
            return Approval::Deny(client::cannot_ask(&tool, reason));
        }
        if self.unattended && !via_client {
            return Approval::Deny(format!(
                "permission denied: {tool} needs approval ({reason}) and nobody can approve it \
                 here (no terminal to ask at, no approvals API). Do not retry the same call; \
                 tell the user, who can allow it in the configuration or run interactively."
            ));
        }
        let now = SystemTime::now();
        let id = format!("apr-{}", uuid::Uuid::new_v4().simple());
        let always = self.remember.as_ref().and_then(|r| r.always_key(request));
        let pending = PendingApproval {
            id: id.clone(),
            tool: tool.clone(),
            agent: request.ctx.agent_key.clone(),
            session: request.ctx.session_key.clone(),
            user: request.ctx.user.clone(),
            summary: summary_of(request),
            reason: reason.to_string(),
            always,
            requested_at: unix_ms(now),
            expires_at: unix_ms(now + self.timeout),
            run: request.ctx.run.clone(),
        };
        let resolution = if let (true, Some(handle)) = (via_client, &request.ctx.client) {
            // The caller's MCP client asks its user; nobody else sees the request.
            self.events.publish(ToolEvent::ApprovalRequested {
                request: Arc::new(pending.clone()),
            });
            let asked = client::ask(handle, &pending);
            tokio::select! {
                resolution = asked => resolution,
                () = request.ctx.cancel.cancelled() => withdrawn(),
                () = tokio::time::sleep(self.timeout) => unanswered(self.timeout),
            }
        } else {
            let Some(ticket) = self.pending.admit(id.clone(), pending.clone()) else {
                return Approval::Deny(format!(
                    "permission denied: {tool} needs approval ({reason}) and {MAX_PENDING} requests are already waiting; try again later"
                ));
            };
            self.events.publish(ToolEvent::ApprovalRequested {
                request: Arc::new(pending.clone()),
            });
            let prompted = self.prompter.as_ref().map(|p| p.prompt(pending.clone()));
            let cancel = request.ctx.cancel.clone();
            let elsewhere = async {
                tokio::select! {
                    Some(answer) = async {
                        match prompted {
                            Some(prompt) => prompt.await,
                            None => std::future::pending().await,
                        }
                    } => Some(answer),
                    // The caller went away (its session closed): the request is withdrawn,
                    // so nobody approves a call that can no longer run.
                    () = cancel.cancelled() => Some(withdrawn()),
                }
            };
            ticket
                .wait(self.timeout, elsewhere)
                .await
                .unwrap_or_else(|| unanswered(self.timeout))
        };
        self.events.publish(ToolEvent::ApprovalResolved {
            id: id.clone().into(),
            tool: tool.clone().into(),
            session_key: pending.session.as_str().into(),
            agent_key: pending.agent.as_deref().map(Into::into),
            user: pending.user.as_deref().map(Into::into),
            decision: resolution.as_str(),
            run: pending.run.clone(),
        });
        match resolution {
            Resolution::AllowOnce => Approval::Allow,
            Resolution::AllowAlways => {
                if let (Some(remember), Some(key)) = (&self.remember, &pending.always) {
                    remember
                        .remember(request.ctx.agent_key.as_deref(), key)
                        .await;
                }
                Approval::Allow
            }
            Resolution::Deny { reason: why } => Approval::Deny(format!(
                "permission denied: {tool} was not approved ({}). Do not retry the same call; \
                 ask the user, or take another approach.",
                why.unwrap_or_else(|| "a person refused it".into())
            )),
        }
    }
}

/// The answer for a request whose caller went away.
fn withdrawn() -> Resolution {
    Resolution::Deny {
        reason: Some("the session closed before anyone answered; the request was withdrawn".into()),
    }
}

/// The answer for a request nobody answered in time.
fn unanswered(timeout: Duration) -> Resolution {
    Resolution::Deny {
        reason: Some(format!("nobody answered within {}s", timeout.as_secs())),
    }
}

impl Approver for Approvals {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(self.ask(request, reason))
    }
}

mod client;
#[cfg(test)]
mod tests;

//! Who a call runs as and where its files live: one resolution shared by every entry point.
//!
//! GoClaw's entry points each fill the call context their own way, so a call through one of them
//! could run without an agent (and write `MEMORY.md` to disk) or in the server's own directory.
//! Talon's entry points (`talon mcp`, `talon tool call`, the gateway's HTTP and MCP routes) all
//! go through [`Callers::bind`]: the agent named by the caller, else the entry point's, else the
//! configured default; refused when the store does not know it; and the workspace that agent and
//! user get under the configured [`Workspaces`] rule.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::CallContext;
use crate::workspace::Workspaces;

/// The agents that exist, as the store knows them. Implemented by the binary over its store, so
/// this crate stays free of storage.
pub trait AgentDirectory: Send + Sync {
    /// Whether an agent with this key exists. `Err` carries the storage error's message.
    fn exists<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, String>>;
}

/// Why a call could not be given an agent or a workspace.
#[derive(Debug, thiserror::Error)]
pub enum CallerError {
    /// The agent is not in the store.
    #[error(
        "agent {agent:?} does not exist; create it with `talon agents create {agent}`, or name no agent to run as {default:?}"
    )]
    UnknownAgent { agent: String, default: String },
    /// The store could not be asked.
    #[error("cannot look up agent {agent:?}: {message}")]
    Directory { agent: String, message: String },
    /// The per-agent workspace directory could not be created.
    #[error("cannot create the workspace of agent {agent:?}: {source}")]
    Workspace {
        agent: String,
        source: std::io::Error,
    },
}

/// Binds calls to an agent, a user and a workspace. Cheap to clone.
#[derive(Clone)]
pub struct Callers {
    workspaces: Workspaces,
    default_agent: Arc<str>,
    directory: Arc<dyn AgentDirectory>,
    /// Agents already seen to exist. Agents are never deleted while Talon runs, so a positive
    /// answer can be kept and the store is asked once per agent, not once per call.
    known: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callers")
            .field("workspaces", &self.workspaces)
            .field("default_agent", &self.default_agent)
            .finish_non_exhaustive()
    }
}

impl Callers {
    /// Calls that name no agent run as `default_agent`, which must exist in `directory`.
    pub fn new(
        workspaces: Workspaces,
        default_agent: impl Into<String>,
        directory: Arc<dyn AgentDirectory>,
    ) -> Self {
        Self {
            workspaces,
            default_agent: Arc::from(default_agent.into()),
            directory,
            known: Arc::default(),
        }
    }

    /// The agent calls run as when nobody names one.
    pub fn default_agent(&self) -> &str {
        &self.default_agent
    }

    /// The workspace rule.
    pub fn workspaces(&self) -> &Workspaces {
        &self.workspaces
    }

    /// The agent a call runs as: `requested`, else the one already in `ctx` (the entry point's
    /// `--agent`), else the default; an error when the store does not know it.
    pub async fn agent(
        &self,
        ctx: &CallContext,
        requested: Option<&str>,
    ) -> Result<String, CallerError> {
        let agent = requested
            .filter(|a| !a.is_empty())
            .or(ctx.agent_key.as_deref())
            .unwrap_or(&self.default_agent)
            .to_string();
        if self.is_known(&agent) {
            return Ok(agent);
        }
        match self.directory.exists(&agent).await {
            Ok(true) => {
                if let Ok(mut known) = self.known.lock() {
                    known.insert(agent.clone());
                }
                Ok(agent)
            }
            Ok(false) => Err(CallerError::UnknownAgent {
                agent,
                default: self.default_agent.to_string(),
            }),
            Err(message) => Err(CallerError::Directory { agent, message }),
        }
    }

    fn is_known(&self, agent: &str) -> bool {
        self.known.lock().is_ok_and(|known| known.contains(agent))
    }

    /// Sets the call's agent, user and workspace (see [`Callers::agent`] and
    /// [`Workspaces::resolve`]). `user` replaces the context's user when given.
    pub async fn bind(
        &self,
        ctx: &mut CallContext,
        agent: Option<&str>,
        user: Option<&str>,
    ) -> Result<(), CallerError> {
        let agent = self.agent(ctx, agent).await?;
        if let Some(user) = user.filter(|u| !u.is_empty()) {
            ctx.user = Some(user.to_string());
        }
        let workspace = self
            .workspaces
            .resolve(&agent, ctx.user.as_deref())
            .map_err(|source| CallerError::Workspace {
                agent: agent.clone(),
                source,
            })?;
        ctx.workspace = Some(workspace);
        ctx.agent_key = Some(agent);
        Ok(())
    }
}

/// `part` (a user or a name a caller chose) made safe to sit between the `:` of a session key
/// (`%` and `:` escaped), so no two users' keys can coincide. Every entry point that puts a user
/// into a key uses this one rule.
pub fn key_part(part: &str) -> String {
    part.replace('%', "%25").replace(':', "%3A")
}

/// A fixed set of agents, for tests and for entry points without a store.
#[derive(Debug, Default, Clone)]
pub struct FixedAgents(pub HashSet<String>);

impl FixedAgents {
    /// A directory knowing exactly `keys`.
    pub fn of<I: IntoIterator<Item = S>, S: Into<String>>(keys: I) -> Self {
        Self(keys.into_iter().map(Into::into).collect())
    }
}

impl AgentDirectory for FixedAgents {
    fn exists<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(std::future::ready(Ok(self.0.contains(key))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callers(root: &std::path::Path) -> Callers {
        Callers::new(
            Workspaces::PerAgentUser(root.to_path_buf()),
            "default",
            Arc::new(FixedAgents::of(["default", "ops"])),
        )
    }

    #[tokio::test]
    async fn named_agent_wins_then_entry_point_then_default() {
        let dir = std::env::temp_dir().join(format!("talon-callers-{}", std::process::id()));
        let callers = callers(&dir);
        let mut ctx = CallContext::new("s");
        callers.bind(&mut ctx, None, None).await.expect("default");
        assert_eq!(ctx.agent_key.as_deref(), Some("default"));
        assert_eq!(ctx.workspace, Some(dir.join("default/_shared")));

        let mut ctx = CallContext::new("s");
        ctx.agent_key = Some("ops".into());
        callers
            .bind(&mut ctx, None, Some("bob"))
            .await
            .expect("ops");
        assert_eq!(ctx.agent_key.as_deref(), Some("ops"));
        assert_eq!(ctx.user.as_deref(), Some("bob"));
        assert_eq!(ctx.workspace, Some(dir.join("ops/bob")));

        callers
            .bind(&mut ctx, Some("default"), None)
            .await
            .expect("named");
        assert_eq!(ctx.agent_key.as_deref(), Some("default"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn unknown_agents_are_refused_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("talon-callers-u-{}", std::process::id()));
        let callers = callers(&dir);
        let mut ctx = CallContext::new("s");
        let err = callers
            .bind(&mut ctx, Some("ghost"), None)
            .await
            .expect_err("unknown");
        let text = err.to_string();
        assert!(text.contains("\"ghost\" does not exist"), "{text}");
        assert!(text.contains("talon agents create ghost"), "{text}");
        assert!(ctx.workspace.is_none() && ctx.agent_key.is_none());
        assert!(!dir.join("ghost").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

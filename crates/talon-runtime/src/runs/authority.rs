//! A run's authority: what the turn that starts a run may pass on to it. It is computed once
//! from the caller, in [`Runner::try_start_child`] — the one function every run kind starts
//! through (subagents, delegations, evaluate rounds, gate reviews, team members, scheduled
//! jobs, steered replacements) — and every child spec is narrowed to it there before its row is
//! written. Whatever a call site asked for, the run stored can only be narrower:
//!
//! - its permission mode is the caller's or stricter;
//! - its model is one `[subagents.models]` maps to (a name the operator listed), or none;
//! - a subagent's tools are among the caller's offered tools (a delegation, a team member or a
//!   scheduled job runs with its own agent's tools one level down, computed by its service);
//! - its request cap is never above what the caller's own run may still make;
//! - it belongs to the caller's user and tenant, under the caller's run and session: the row
//!   is written from the authority's identity, never from what a call site passes.
//!
//! The fields are private: the only way to get a narrower spec is [`Authority::narrow`], and
//! there is no way to widen one.

use std::collections::BTreeSet;

use talon_core::CallContext;
use talon_core::permission::PermissionMode;

use super::{ChildOverrides, ChildSpec};
use crate::runner::Runner;

/// What a caller may pass on to the runs it starts (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Authority {
    /// The caller's offered tools; `None` for a run that takes its own agent's (a delegation, a
    /// team member, a gate review, a scheduled job), whose service computes them.
    tools: Option<BTreeSet<String>>,
    permission_mode: PermissionMode,
    models: BTreeSet<String>,
    max_requests: Option<u32>,
    identity: Identity,
}

/// Whose a run is: the caller's user and tenant (`""`: none), and where it hangs — the
/// caller's run (none for a person's turn), session and agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Identity {
    pub user: String,
    pub tenant: String,
    pub parent_run: Option<String>,
    pub parent_session: String,
    pub parent_agent: String,
}

impl Identity {
    fn of(ctx: &CallContext) -> Self {
        Self {
            user: ctx.user.clone().unwrap_or_default(),
            tenant: ctx.tenant.clone().unwrap_or_default(),
            parent_run: ctx.run.run_id.as_deref().map(str::to_string),
            parent_session: ctx.session_key.to_string(),
            parent_agent: ctx.agent_key.clone().unwrap_or_default(),
        }
    }
}

/// A child spec's tools and settings once narrowed to its caller's authority, with the
/// identity its row is written under.
#[derive(Debug, Clone, PartialEq)]
pub struct Narrowed {
    pub tools: Vec<String>,
    pub overrides: ChildOverrides,
    pub identity: Identity,
}

impl Authority {
    /// The authority of the caller `ctx` over a run of `origin`: the tools offered to it now
    /// (when the run takes the caller's), its permission mode, the provider models
    /// `[subagents.models]` allows, and its own run's request cap (none for a person's turn; a
    /// run's as it was stored).
    pub(crate) async fn of_caller(runner: &Runner, ctx: &CallContext, origin: &str) -> Self {
        let max_requests = match ctx.run.run_id.as_deref() {
            Some(id) => match runner.store().run(id).await {
                Ok(Some(run)) => ChildOverrides::of(&run).ok().and_then(|o| o.max_requests),
                _ => None,
            },
            None => None,
        };
        let tools = if runs_with_own_tools(origin) {
            None
        } else {
            Some(runner.engine().tool_names(ctx).await.into_iter().collect())
        };
        Self {
            tools,
            permission_mode: ctx.permission_mode,
            models: runner.subagent_policy().models.values().cloned().collect(),
            max_requests,
            identity: Identity::of(ctx),
        }
    }

    /// `spec` narrowed to this authority (see the module docs).
    pub fn narrow(&self, spec: &ChildSpec<'_>) -> Narrowed {
        let tools = match &self.tools {
            Some(caller) => spec
                .tools
                .iter()
                .filter(|tool| caller.contains(*tool))
                .cloned()
                .collect(),
            None => spec.tools.clone(),
        };
        let mut overrides = spec.overrides.clone();
        overrides.permission_mode = Some(
            overrides
                .permission_mode
                .map_or(self.permission_mode, |m| m.stricter(self.permission_mode)),
        );
        overrides.model = overrides.model.filter(|m| self.models.contains(m));
        overrides.max_requests = match (overrides.max_requests, self.max_requests) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Narrowed {
            tools,
            overrides,
            identity: self.identity.clone(),
        }
    }
}

/// The origins whose runs take their own agent's tools rather than the caller's.
fn runs_with_own_tools(origin: &str) -> bool {
    matches!(origin, "delegation" | "evaluate" | "team" | "cron" | "gate")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(tools: Option<&[&str]>) -> Authority {
        Authority {
            tools: tools.map(|t| t.iter().map(|t| t.to_string()).collect()),
            permission_mode: PermissionMode::Default,
            models: ["small-1".to_string()].into(),
            max_requests: Some(3),
            identity: Identity {
                user: "alice".into(),
                tenant: "acme".into(),
                parent_run: Some("run-1".into()),
                parent_session: "s".into(),
                parent_agent: "default".into(),
            },
        }
    }

    fn spec(tools: &[&str], overrides: ChildOverrides) -> ChildSpec<'static> {
        ChildSpec {
            agent: "default",
            task: "t",
            tools: tools.iter().map(|t| t.to_string()).collect(),
            origin: "subagent",
            background: true,
            over_link: None,
            target_load: None,
            context_mode: "fresh",
            overrides,
        }
    }

    /// Issue 36: whatever a call site asks for, the stored run is never wider than its caller.
    #[test]
    fn h36_a_child_spec_is_only_ever_narrowed() {
        let wide = ChildOverrides {
            permission_mode: Some(PermissionMode::BypassPermissions),
            model: Some("gpt-priciest".into()),
            max_requests: Some(50),
            ..ChildOverrides::default()
        };
        let narrowed = authority(Some(&["read_file", "exec"]))
            .narrow(&spec(&["read_file", "gateway", "exec"], wide));
        assert_eq!(narrowed.tools, ["read_file", "exec"]);
        assert_eq!(
            narrowed.overrides.permission_mode,
            Some(PermissionMode::Default)
        );
        assert_eq!(narrowed.overrides.model, None);
        assert_eq!(narrowed.overrides.max_requests, Some(3));
        assert_eq!(
            (
                narrowed.identity.user.as_str(),
                narrowed.identity.tenant.as_str()
            ),
            ("alice", "acme"),
            "the run is the caller's user's, in the caller's tenant"
        );
        // Stricter and listed settings stay; a delegation keeps its own agent's tools.
        let strict = ChildOverrides {
            permission_mode: Some(PermissionMode::Plan),
            model: Some("small-1".into()),
            max_requests: Some(2),
            ..ChildOverrides::default()
        };
        let narrowed = authority(None).narrow(&spec(&["write_file"], strict));
        assert_eq!(narrowed.tools, ["write_file"]);
        assert_eq!(
            narrowed.overrides.permission_mode,
            Some(PermissionMode::Plan)
        );
        assert_eq!(narrowed.overrides.model.as_deref(), Some("small-1"));
        assert_eq!(narrowed.overrides.max_requests, Some(2));
    }
}

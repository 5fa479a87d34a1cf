//! Who may use a bridged server: the one place a call's grants are decided.
//!
//! A server with `require_grant` is usable only by an agent or user holding an enabled grant
//! for it; any server's grants still restrict the subjects they name. Every grant that
//! concerns the call (the agent's and the user's) must let the tool through: a disabled grant
//! refuses the server, a tool in `deny` is refused even when `allow` names it, and an empty
//! `allow` lets every tool through. Grants are read for each call, so a change takes effect on
//! the next one.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use crate::tool::Bridged;
use crate::{Bridge, ServerConfig};

/// One grant as far as a decision needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `agent "name"` or `user "id"`, for messages.
    pub subject: String,
    pub enabled: bool,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// Who is calling.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    pub agent: Option<&'a str>,
    pub user: Option<&'a str>,
}

/// The boxed future [`Access::grants`] returns.
pub type GrantsFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<Grant>, String>> + Send + 'a>>;

/// Where grants come from (the store, in Talon).
pub trait Access: Send + Sync + 'static {
    /// The grants of `server` that concern `caller`; an error when they cannot be read (the
    /// call is then refused, never let through).
    fn grants<'a>(&'a self, server: &'a str, caller: Caller<'a>) -> GrantsFuture<'a>;
}

/// Whether `caller` may use `tool` (a raw tool name; `None` for the server's resources) of
/// `server`, given the grants that concern the caller. `Err` says why not, in words the model
/// can act on.
pub fn decide(
    server: &str,
    require_grant: bool,
    grants: &[Grant],
    tool: Option<&str>,
) -> Result<(), String> {
    if grants.is_empty() {
        return if require_grant {
            Err(format!(
                "MCP server {server:?} may be used only with a grant, and neither this agent nor this user has one. Ask an administrator to grant access (`talon mcp-servers grant {server} --agent NAME`), or file a request with `talon mcp-servers request {server}`."
            ))
        } else {
            Ok(())
        };
    }
    for grant in grants {
        if !grant.enabled {
            return Err(format!(
                "MCP server {server:?} is disabled for {}.",
                grant.subject
            ));
        }
        let Some(tool) = tool else { continue };
        if grant.deny.iter().any(|t| t == tool) {
            return Err(format!(
                "tool {tool:?} of MCP server {server:?} is denied to {}.",
                grant.subject
            ));
        }
        if !grant.allow.is_empty() && !grant.allow.iter().any(|t| t == tool) {
            return Err(format!(
                "tool {tool:?} of MCP server {server:?} is not among the tools granted to {} ({}).",
                grant.subject,
                grant.allow.join(", ")
            ));
        }
    }
    Ok(())
}

/// A caller's grants, read at most once per server: the one check behind a call, the tool
/// listings and `mcp_tool_search`, so what a caller is shown is exactly what it may call.
/// Grants that cannot be read refuse (and hide) the server's tools.
pub(crate) struct Permits<'a> {
    source: Option<Arc<dyn Access>>,
    caller: Caller<'a>,
    read: BTreeMap<String, Result<Vec<Grant>, String>>,
}

impl<'a> Permits<'a> {
    /// The permits of the caller in `ctx`; without a `source` every caller is let through.
    pub(crate) fn new(source: Option<Arc<dyn Access>>, ctx: &'a talon_core::CallContext) -> Self {
        Self {
            source,
            caller: Caller {
                agent: ctx.agent_key.as_deref(),
                user: ctx.user.as_deref(),
            },
            read: BTreeMap::new(),
        }
    }

    /// Whether the caller may use `tool` (a raw name; `None` for resources) of the server
    /// `config` describes; `Err` says why not ([`decide`]).
    pub(crate) async fn check(
        &mut self,
        config: &ServerConfig,
        tool: Option<&str>,
    ) -> Result<(), String> {
        let Some(source) = &self.source else {
            return Ok(());
        };
        let server = config.name.as_str();
        if !self.read.contains_key(server) {
            let read = source
                .grants(server, self.caller)
                .await
                .map_err(|e| format!("cannot check access to MCP server {server:?}: {e}"));
            self.read.insert(server.to_string(), read);
        }
        match self.read.get(server) {
            Some(Ok(grants)) => decide(server, config.require_grant, grants, tool),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("cannot check access to MCP server {server:?}")),
        }
    }

    /// The tools among `tools` the caller may use.
    pub(crate) async fn visible<'t>(&mut self, tools: Vec<&'t Bridged>) -> Vec<&'t Bridged> {
        let mut kept = Vec::with_capacity(tools.len());
        for tool in tools {
            if self
                .check(&tool.link.config, Some(&tool.listed.name))
                .await
                .is_ok()
            {
                kept.push(tool);
            }
        }
        kept
    }
}

/// [`Bridge::offer_filter`].
pub(crate) struct GrantFilter(pub(crate) Weak<Bridge>);

impl talon_core::pipeline::OfferFilter for GrantFilter {
    fn retain<'a>(
        &'a self,
        ctx: &'a talon_core::CallContext,
        tools: Vec<Arc<talon_core::registry::RegisteredTool>>,
    ) -> talon_core::pipeline::OfferFuture<'a> {
        Box::pin(async move {
            let Some(bridge) = self.0.upgrade() else {
                return tools;
            };
            let Some(source) = bridge.access.clone() else {
                return tools;
            };
            // Each bridged tool's server and raw name, by its offered name.
            let bridged: BTreeMap<String, (Arc<crate::link::Link>, String)> = bridge
                .catalog
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .tools
                .values()
                .flatten()
                .map(|t| (t.name.clone(), (Arc::clone(&t.link), t.listed.name.clone())))
                .collect();
            let mut permits = Permits::new(Some(source), ctx);
            let mut kept = Vec::with_capacity(tools.len());
            for tool in tools {
                let allowed = match bridged.get(tool.spec().name.as_str()) {
                    Some((link, raw)) => permits.check(&link.config, Some(raw)).await.is_ok(),
                    None => true,
                };
                if allowed {
                    kept.push(tool);
                }
            }
            kept
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(enabled: bool, allow: &[&str], deny: &[&str]) -> Grant {
        Grant {
            subject: "agent \"a\"".into(),
            enabled,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn deny_wins_and_empty_allow_means_all() {
        assert!(decide("s", false, &[], Some("t")).is_ok());
        assert!(decide("s", true, &[], Some("t")).is_err());
        assert!(decide("s", true, &[grant(true, &[], &[])], Some("t")).is_ok());
        assert!(decide("s", true, &[grant(false, &[], &[])], Some("t")).is_err());
        assert!(decide("s", false, &[grant(false, &[], &[])], None).is_err());
        let both = grant(true, &["t"], &["t"]);
        assert!(
            decide("s", true, &[both], Some("t"))
                .unwrap_err()
                .contains("denied")
        );
        let only_u = grant(true, &["u"], &[]);
        assert!(decide("s", true, std::slice::from_ref(&only_u), Some("t")).is_err());
        assert!(decide("s", true, std::slice::from_ref(&only_u), Some("u")).is_ok());
        // Resources need an enabled grant, not a tool.
        assert!(decide("s", true, std::slice::from_ref(&only_u), None).is_ok());
        // Every grant that concerns the call must agree (the agent's and the user's).
        assert!(decide("s", true, &[only_u, grant(true, &[], &["u"])], Some("u")).is_err());
    }
}

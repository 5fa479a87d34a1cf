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

use crate::Bridge;

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
            // Which server and raw name each offered bridged tool has.
            let bridged: BTreeMap<String, (String, String, bool)> = {
                let catalog = bridge
                    .catalog
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                catalog
                    .tools
                    .values()
                    .flatten()
                    .map(|t| {
                        (
                            t.name.clone(),
                            (
                                t.link.name().to_string(),
                                t.listed.name.clone(),
                                t.link.config.require_grant,
                            ),
                        )
                    })
                    .collect()
            };
            let caller = Caller {
                agent: ctx.agent_key.as_deref(),
                user: ctx.user.as_deref(),
            };
            let mut grants: BTreeMap<String, Option<Vec<Grant>>> = BTreeMap::new();
            let mut kept = Vec::with_capacity(tools.len());
            for tool in tools {
                let Some((server, raw, require)) = bridged.get(tool.spec().name.as_str()) else {
                    kept.push(tool);
                    continue;
                };
                if !grants.contains_key(server) {
                    let read = source.grants(server, caller).await.ok();
                    grants.insert(server.clone(), read);
                }
                // Unreadable grants hide the tool, as a call would be refused.
                let allowed = grants
                    .get(server)
                    .and_then(Option::as_ref)
                    .is_some_and(|g| decide(server, *require, g, Some(raw)).is_ok());
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

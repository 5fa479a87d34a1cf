//! Tools offered only where they can do something. Every model request carries the definitions
//! of the tools offered, so a tool no call of this agent could use only costs context: the team
//! tools (the `teams` group their specs declare) are offered to an agent on a team, the
//! delegation tools (`delegation`: delegate, delegate_search, evaluate_loop, handoff) to an agent
//! with an agent link, and a tool for the operator alone ([`talon_core::ToolSpec::operator_only`],
//! the `gateway` tool) to a turn of the operator ([`crate::gateway_tool::operator`]). Nothing
//! else changes: a call to one of them is refused by the tool itself ("you are not on any
//! team"), as before.

use std::sync::Arc;

use talon_core::CallContext;
use talon_core::pipeline::{OfferFilter, OfferFuture};
use talon_core::registry::RegisteredTool;
use talon_store::Store;

/// Narrows the offered tools to those relevant to the caller's agent, after `next` (the
/// bridge's grants) when there is one.
pub struct Relevant {
    pub store: Store,
    pub next: Option<Arc<dyn OfferFilter>>,
    /// `[gateway] operators`.
    pub operators: Arc<[String]>,
}

fn in_group(tool: &RegisteredTool, group: &str) -> bool {
    tool.spec().groups.iter().any(|g| g == group)
}

impl OfferFilter for Relevant {
    fn retain<'a>(
        &'a self,
        ctx: &'a CallContext,
        tools: Vec<Arc<RegisteredTool>>,
    ) -> OfferFuture<'a> {
        Box::pin(async move {
            let mut tools = match &self.next {
                Some(next) => next.retain(ctx, tools).await,
                None => tools,
            };
            let agent = ctx.agent_key.as_deref().unwrap_or_default();
            let offers = |group: &str| tools.iter().any(|t| in_group(t, group));
            // A store that cannot answer keeps the tools offered (they check for themselves).
            let on_team = !offers("teams") || self.store.on_a_team(agent).await.unwrap_or(true);
            let linked = !offers("delegation")
                || self
                    .store
                    .delegation_links(agent)
                    .await
                    .map_or(true, |links| !links.is_empty());
            let operator = crate::gateway_tool::operator(ctx, &self.operators).is_ok();
            tools.retain(|t| {
                (on_team || !in_group(t, "teams"))
                    && (linked || !in_group(t, "delegation"))
                    && (operator || !t.spec().operator_only)
            });
            tools
        })
    }
}

//! Memory tools (group `memory`): `memory_get` and `memory_search` over the store's memory
//! documents. Scope: the call's agent ([`talon_core::DEFAULT_AGENT`] when none) and user (global memory when none);
//! a user sees their own documents and the agent's global ones.

pub mod hybrid;
pub mod memory_get;
pub mod memory_search;

use talon_core::CallContext;

/// The agent and user a call's memory belongs to.
pub fn scope(ctx: &CallContext) -> (String, String) {
    (
        ctx.agent_key
            .clone()
            .unwrap_or_else(|| talon_core::DEFAULT_AGENT.into()),
        ctx.user.clone().unwrap_or_default(),
    )
}

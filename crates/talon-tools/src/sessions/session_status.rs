//! `session_status`: the state of the session the call runs in.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

/// Input of [`SessionStatus`] (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionStatusInput {}

/// The `session_status` tool.
#[derive(Debug, Clone)]
pub struct SessionStatus {
    pub store: Store,
}

impl Tool for SessionStatus {
    type Input = SessionStatusInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "session_status",
            "Show the current session: its key, agent, state, turns so far and tokens used.",
            SideEffect::None,
        )
        .in_group("sessions")
    }

    async fn execute(&self, call: Authorized<SessionStatusInput>) -> ToolOutput {
        let ctx = call.ctx();
        match super::owned(&self.store, ctx, &ctx.session_key).await {
            Ok(Some(s)) => {
                ToolOutput::text(format!("{}\nagent: {}", super::describe(&s), s.agent_key))
            }
            Ok(None) => ToolOutput::text(format!(
                "session {} is not stored (a one-off call or a stateless request); agent: {}",
                ctx.session_key,
                super::agent(ctx)
            )),
            Err(e) => ToolOutput::error(format!("sessions are unavailable: {e}")),
        }
    }
}

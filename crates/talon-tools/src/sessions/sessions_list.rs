//! `sessions_list`: the agent's sessions, most recently active first.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

/// Input of [`SessionsList`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsListInput {
    /// How many sessions (default 20, at most 200).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The `sessions_list` tool.
#[derive(Debug, Clone)]
pub struct SessionsList {
    pub store: Store,
}

impl Tool for SessionsList {
    type Input = SessionsListInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sessions_list",
            "List this agent's sessions, most recently active first: key, state (idle, running, \
             interrupted), turns and tokens. Use a key with sessions_history or sessions_send.",
            SideEffect::ReadOnly,
        )
        .in_group("sessions")
    }

    async fn execute(&self, call: Authorized<SessionsListInput>) -> ToolOutput {
        let limit = i64::from(call.input().limit.unwrap_or(20).clamp(1, 200));
        let agent = super::agent(call.ctx());
        let user = call.ctx().user.as_deref();
        match self.store.sessions(Some(&agent), user, limit).await {
            Ok(list) if list.is_empty() => ToolOutput::text("No sessions yet."),
            Ok(list) => ToolOutput::text(
                list.iter()
                    .map(super::describe)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Err(e) => ToolOutput::error(format!("sessions are unavailable: {e}")),
        }
    }
}

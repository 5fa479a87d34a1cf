//! `sessions_history`: the messages of one of the agent's sessions.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

/// Input of [`SessionsHistory`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsHistoryInput {
    /// The session's key (from sessions_list).
    pub session_key: String,
    /// How many of the newest messages (default 50, at most 500).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The `sessions_history` tool.
#[derive(Debug, Clone)]
pub struct SessionsHistory {
    pub store: Store,
}

impl Tool for SessionsHistory {
    type Input = SessionsHistoryInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sessions_history",
            "Read the newest messages of one of this agent's sessions (user, assistant and tool \
             results, each cut to 2,000 characters).",
            SideEffect::ReadOnly,
        )
        .in_group("sessions")
    }

    async fn execute(&self, call: Authorized<SessionsHistoryInput>) -> ToolOutput {
        let input = call.input();
        if let Err(e) = super::visible(&self.store, call.ctx(), &input.session_key).await {
            return ToolOutput::error(e);
        }
        let limit = i64::from(input.limit.unwrap_or(50).clamp(1, 500));
        match self
            .store
            .session_messages(&input.session_key, Some(limit))
            .await
        {
            Ok(messages) if messages.is_empty() => {
                ToolOutput::text(format!("{} has no messages yet.", input.session_key))
            }
            Ok(messages) => ToolOutput::text(
                messages
                    .iter()
                    .map(|m| super::render(m, 2_000))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Err(e) => ToolOutput::error(format!("sessions are unavailable: {e}")),
        }
    }
}

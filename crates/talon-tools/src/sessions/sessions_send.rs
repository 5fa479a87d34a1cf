//! `sessions_send`: deliver a message into another of the agent's sessions, which runs a turn
//! and answers.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

use super::SessionSender;

/// Input of [`SessionsSend`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsSendInput {
    /// The session to deliver to (from sessions_list); not the current one.
    pub session_key: String,
    /// The message, as the user of that session would write it.
    pub message: String,
}

/// The `sessions_send` tool.
#[derive(Clone)]
pub struct SessionsSend {
    pub store: Store,
    /// The agent runtime's turns; `None` where no runtime runs (the call says so).
    pub sender: Option<std::sync::Arc<dyn SessionSender>>,
}

impl Tool for SessionsSend {
    type Input = SessionsSendInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "sessions_send",
            "Send a message into another of this agent's sessions: it runs a turn there with that \
             session's history, and its answer comes back here.",
            SideEffect::Spawns,
        )
        .in_group("sessions")
    }

    async fn execute(&self, call: Authorized<SessionsSendInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        if input.message.trim().is_empty() {
            return ToolOutput::error("message is empty; write what the session should receive");
        }
        if input.session_key == ctx.session_key {
            return ToolOutput::error(
                "that is the session you are in; sessions_send delivers to another session",
            );
        }
        if let Err(e) = super::visible(&self.store, ctx, &input.session_key).await {
            return ToolOutput::error(e);
        }
        let Some(sender) = &self.sender else {
            return ToolOutput::error(
                "sessions_send needs the agent runtime, which this entry point does not run (use talon serve or talon chat)",
            );
        };
        match sender.send(ctx, &input.session_key, &input.message).await {
            Ok(answer) => ToolOutput::text(format!("{} answered:\n{answer}", input.session_key)),
            Err(e) => ToolOutput::error(format!("{}: {e}", input.session_key)),
        }
    }
}

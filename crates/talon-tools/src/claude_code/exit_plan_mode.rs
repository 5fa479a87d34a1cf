//! `ExitPlanMode`: in plan mode the model presents its plan and asks the user to approve it.
//! An approved plan ends plan mode for the rest of the run (the agent loop switches the mode
//! when this tool succeeds) and returns to the mode in force before plan mode, never looser
//! than the configured one (`CallContext::mode_after_plan`): approving a plan is the user's
//! decision to proceed, not to loosen what the operator set. A rejected plan keeps the model
//! planning, with the user's reason.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use talon_core::permission::PermissionMode;
use talon_core::{Authorized, SessionEffect, SideEffect, Tool, ToolOutput, ToolSpec};

/// The tool's name; the agent loop leaves plan mode when a call of it succeeds.
pub const NAME: &str = "ExitPlanMode";

/// Claude Code's result for an approved plan, which models are trained to expect.
pub const APPROVED: &str = "User has approved your plan. You can now start coding. Start with updating your todo list if applicable";

const PROCEED: &str = "Yes, proceed";
const KEEP: &str = "No, keep planning";

/// Input of [`ExitPlanMode`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitPlanModeInput {
    /// The plan, in Markdown: concise, the steps you will take.
    pub plan: String,
}

/// The `ExitPlanMode` tool.
#[derive(Debug, Clone, Default)]
pub struct ExitPlanMode;

/// The form asking the user to approve `plan`.
fn form(plan: &str) -> Value {
    json!({
        "message": format!("Approve this plan?\n\n{plan}"),
        "requestedSchema": {"type": "object", "required": ["decision"], "properties": {
            "decision": {"type": "string", "title": "Plan",
                         "description": format!("Proceed with this plan?\n{PROCEED}\n{KEEP}"),
                         "enum": [PROCEED, KEEP]}}},
    })
}

impl Tool for ExitPlanMode {
    type Input = ExitPlanModeInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            NAME,
            "Use this in plan mode when you have finished planning and are ready to start: it \
             shows the user your plan and asks for approval. Only for tasks that need code or \
             file changes, not for research.",
            SideEffect::Blocking,
        )
        .in_group("interaction")
    }

    async fn execute(&self, call: Authorized<ExitPlanModeInput>) -> ToolOutput {
        let ctx = call.ctx();
        if ctx.permission_mode != PermissionMode::Plan {
            return ToolOutput::error("You are not in plan mode; there is no plan mode to leave.");
        }
        let plan = call.input().plan.trim();
        if plan.is_empty() {
            return ToolOutput::error("The plan is empty; write the steps you will take.");
        }
        let Some(client) = ctx.client.clone() else {
            return ToolOutput::error(
                "Nobody can approve a plan here. Present the plan in your reply and wait for the user.",
            );
        };
        let answer = match client.0.elicit(form(plan)).await {
            Ok(answer) => answer,
            Err(e) => return ToolOutput::error(format!("The plan could not be shown: {e}")),
        };
        let decision = answer.pointer("/content/decision").and_then(Value::as_str);
        match (answer.get("action").and_then(Value::as_str), decision) {
            (Some("accept"), Some(PROCEED)) => {
                ToolOutput::text(APPROVED).with_session_effect(SessionEffect::LeavePlanMode)
            }
            (Some("accept"), Some(other)) if other != KEEP => ToolOutput::error(format!(
                "The user doesn't want to proceed with this plan yet: {other}. Keep planning."
            )),
            _ => ToolOutput::error(
                "The user doesn't want to proceed with this plan. Stay in plan mode: ask what to change, or revise the plan.",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_offers_proceed_or_keep_planning() {
        let f = form("1. edit\n2. test");
        assert!(
            f["message"]
                .as_str()
                .unwrap_or_default()
                .ends_with("1. edit\n2. test")
        );
        assert_eq!(
            f["requestedSchema"]["properties"]["decision"]["enum"],
            json!([PROCEED, KEEP])
        );
    }
}

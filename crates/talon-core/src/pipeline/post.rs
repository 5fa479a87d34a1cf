//! Step 8 (PostToolUse / PostToolUseFailure) and the helpers shared by the finishing steps.

use std::time::Instant;

use serde_json::Value;

use super::{FailedStage, Pipeline, Progress};
use crate::context::CallContext;
use crate::hooks::{HookEvent, HookInput, HookOutcome, HookPermission};
use crate::output::ToolOutput;

impl Pipeline {
    /// Runs the post hooks; returns the notes for the model (the PreToolUse hooks' context,
    /// a hook's flag, its added context), which the caller appends after the output's fence.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn post_hooks(
        &self,
        ctx: &CallContext,
        tool: &str,
        requested: &str,
        tool_use_id: &str,
        progress: &Progress,
        stage: Option<FailedStage>,
        started: Instant,
        output: &mut ToolOutput,
    ) -> Option<String> {
        let event = if output.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let mut outcome = HookOutcome::default();
        if !self.hooks.is_empty(event) {
            let mut input = hook_input(ctx, tool, tool_use_id, &progress.args);
            input.duration_ms = Some(started.elapsed().as_millis() as u64);
            if output.is_error {
                input.error = Some(output.for_llm.clone());
                input.is_interrupt = Some(stage == Some(FailedStage::Cancelled));
            } else {
                input.tool_response = Some(Value::String(output.for_llm.clone()));
            }
            outcome = self
                .hooks
                .fire(event, ctx.agent_key.as_deref(), tool, requested, &mut input)
                .await;
        }
        let mut notes: Vec<String> = progress.context.iter().cloned().collect();
        if outcome.permission == Some(HookPermission::Deny) {
            notes.push(format!(
                "{event:?} hook: {}",
                outcome
                    .reason
                    .as_deref()
                    .unwrap_or("the hook flagged this result")
            ));
        }
        notes.extend(outcome.additional_context);
        if outcome.suppress_output {
            output.for_user = None;
            output.silent = true;
        }
        (!notes.is_empty()).then(|| notes.join("\n"))
    }
}

pub(super) fn hook_input(
    ctx: &CallContext,
    tool: &str,
    tool_use_id: &str,
    args: &Value,
) -> HookInput {
    HookInput {
        tool_name: tool.to_string(),
        tool_input: args.clone(),
        tool_use_id: tool_use_id.to_string(),
        ..HookInput::for_context(ctx)
    }
}

/// Digest of the final arguments for the audit record.
pub(super) fn digest(args: &Value) -> String {
    crate::events::fingerprint(args.to_string().as_bytes())
}

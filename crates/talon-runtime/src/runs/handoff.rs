//! `handoff` (seed 000 §10): an agent hands the conversation to another agent, which then talks
//! to the person itself — unlike delegation, where the source stays in the loop.
//!
//! `handoff(agent, reason)` writes a route in the store (the chat — its channel and session —
//! goes to the target, in a session of the target's own), announces it on the event bus
//! (`handoff`), and has the target open with the conversation so far (fenced: the person and
//! models wrote it). Every later message of that chat, on any gateway, runs as the target
//! ([`Runner::route`]), until the target — or the agent that handed off — calls
//! `handoff(action="clear")`. A handoff crosses agent boundaries like a delegation, so it needs an
//! agent link from the source to the target.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::events::ToolEvent;
use talon_core::visible::visible;
use talon_core::{Authorized, CallContext, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::HandoffRoute;
use tokio_util::sync::CancellationToken;

use crate::agent_runs::{TurnEngine, TurnRequest};
use crate::runner::Runner;

/// Input of [`Handoff`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffInput {
    /// transfer (default): hand the conversation to `agent`. clear: hand it back.
    #[serde(default)]
    pub action: Option<String>,
    /// transfer: the agent that takes over (its key).
    #[serde(default)]
    pub agent: Option<String>,
    /// transfer: why, for the agent taking over.
    #[serde(default)]
    pub reason: Option<String>,
}

/// GoClaw's `handoff`.
pub struct Handoff {
    pub(super) runner: Runner,
}

impl Tool for Handoff {
    type Input = HandoffInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "handoff",
            "Hand this conversation to another agent (one you are linked to), which answers the \
             user from now on; its first answer is returned to you. action clear hands the \
             conversation back to the agent that handed it off.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .in_group("delegation")
        .handing_off()
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<HandoffInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        match input.action.as_deref().unwrap_or("transfer") {
            "transfer" => transfer(&self.runner, ctx, input).await,
            "clear" => clear(&self.runner, ctx).await,
            other => ToolOutput::own_error(format!(
                "action {} is not known; use transfer or clear",
                visible(other)
            )),
        }
    }
}

async fn transfer(runner: &Runner, ctx: &CallContext, input: &HandoffInput) -> ToolOutput {
    let Some(target) = input.agent.as_deref().filter(|a| !a.trim().is_empty()) else {
        return ToolOutput::own_error(
            "agent is missing: name the agent to hand the conversation to",
        );
    };
    let source = ctx.agent_key.clone().unwrap_or_default();
    let reason = input.reason.clone().unwrap_or_default();
    let store = runner.store();
    // The chat: this session, or — when this agent was handed it — the chat it came from.
    let (channel, chat) = match store.handoff_into(&ctx.session_key).await {
        Ok(Some(route)) => (route.channel, route.chat),
        Ok(None) => (
            ctx.channel_type.clone().unwrap_or_default(),
            ctx.session_key.clone(),
        ),
        Err(e) => return ToolOutput::own_error(format!("cannot read handoff routes: {e}")),
    };
    if !runner.is_stored_session(&chat).await {
        return ToolOutput::own_error(
            "this conversation is not stored, so there is nothing to route to another agent",
        );
    }
    match runner.targets(&source, ctx.user.as_deref()).await {
        Ok(targets) if targets.iter().any(|(t, _)| t.key == target) => {}
        Ok(_) => {
            return ToolOutput::own_error(format!(
                "you cannot hand the conversation to {}: no agent link allows it",
                visible(target)
            ));
        }
        Err(e) => return ToolOutput::own_error(e),
    }
    let thread = talon_core::events::fingerprint(format!("{channel}\n{chat}").as_bytes());
    let route = HandoffRoute {
        channel,
        chat: chat.clone(),
        from_agent: source.clone(),
        target_agent: target.to_string(),
        target_session: TurnEngine::session_key(target, "handoff", ctx.user.as_deref(), &thread),
        user_id: ctx.user.clone().unwrap_or_default(),
        reason: reason.clone(),
        created_at: 0,
    };
    if let Err(e) = store.set_handoff(&route).await {
        return ToolOutput::own_error(format!("cannot route the conversation: {e}"));
    }
    runner.pipeline_events().run_event(ToolEvent::Handoff {
        session_key: chat.as_str().into(),
        from_agent: source.as_str().into(),
        to_agent: target.into(),
        user: ctx.user.as_deref().map(Into::into),
        reason: reason.as_str().into(),
    });
    let opening = opening(runner, ctx, &chat, &source, &reason).await;
    let ran = runner
        .run(
            TurnRequest {
                agent: Some(target),
                user: ctx.user.as_deref(),
                session: Some(route.target_session.clone()),
                history: Vec::new(),
                prompt: opening,
                channel: "handoff",
                client: None,
                permission_mode: None,
                cancel: CancellationToken::new(),
                api: Default::default(),
                child: None,
                delivering: Vec::new(),
                origin: None,
            },
            &|_| {},
        )
        .await;
    match ran {
        Ok(ran) => ToolOutput::text(ran.outcome.text).with_own_words(format!(
            "The conversation is now {target}'s: the user's next messages go to {target}. Tell \
             the user briefly that {target} takes it from here; do not answer for {target}. \
             {target} answered the user:"
        )),
        Err(e) => {
            let _ = store.clear_handoff(&route.channel, &route.chat).await;
            ToolOutput::own_error(format!(
                "{target} could not take the conversation ({e}); it stays yours"
            ))
        }
    }
}

/// The target's first prompt: who handed it the conversation, why, and the conversation so
/// far, fenced.
async fn opening(
    runner: &Runner,
    ctx: &CallContext,
    chat: &str,
    source: &str,
    reason: &str,
) -> String {
    format!(
        "[Talon] The conversation was handed to you by {source}{}. You now talk to the user \
         directly; hand it back with handoff action clear when you are done. The conversation \
         so far:\n{}\nGreet the user and take it from here.",
        if reason.is_empty() {
            String::new()
        } else {
            format!(" (reason: {})", super::one_line(reason, 200))
        },
        runner
            .conversation_so_far(ctx, chat, source, "handoff")
            .await
    )
}

async fn clear(runner: &Runner, ctx: &CallContext) -> ToolOutput {
    let store = runner.store();
    // The agent handed the conversation gives it back, or the one that handed it off takes it.
    let route = match store.handoff_into(&ctx.session_key).await {
        Ok(Some(route)) => Some(route),
        Ok(None) => store
            .handoff(
                ctx.channel_type.as_deref().unwrap_or_default(),
                &ctx.session_key,
            )
            .await
            .ok()
            .flatten(),
        Err(e) => return ToolOutput::own_error(format!("cannot read handoff routes: {e}")),
    };
    let Some(route) = route else {
        return ToolOutput::own_error(
            "this conversation is not handed off: there is nothing to clear",
        );
    };
    match store.clear_handoff(&route.channel, &route.chat).await {
        Ok(_) => {
            runner.pipeline_events().run_event(ToolEvent::Handoff {
                session_key: route.chat.as_str().into(),
                from_agent: route.target_agent.as_str().into(),
                to_agent: route.from_agent.as_str().into(),
                user: ctx.user.as_deref().map(Into::into),
                reason: "cleared".into(),
            });
            ToolOutput::own(format!(
                "The conversation is {}'s again: the user's next messages go to {}.",
                route.from_agent, route.from_agent
            ))
        }
        Err(e) => ToolOutput::own_error(format!("cannot clear the handoff: {e}")),
    }
}

impl Runner {
    /// Where a person's turn in `session` on `channel` runs: the handoff route's target and its
    /// session when the chat was handed off (to the same user), else `None`.
    pub(crate) async fn route(
        &self,
        channel: &str,
        session: &str,
        user: Option<&str>,
    ) -> Option<HandoffRoute> {
        let route = self.store().handoff(channel, session).await.ok()??;
        (route.user_id == user.unwrap_or_default()).then_some(route)
    }
}

//! Hooks with Claude Code's payloads: the tool events (PreToolUse, PostToolUse,
//! PostToolUseFailure), which the pipeline fires, and the run events (SessionStart,
//! UserPromptSubmit, Stop), which the agent loop fires through [`Hooks::fire_run`].
//!
//! A hook is a Rust closure ([`FnHook`]) or a shell command ([`CommandHook`]). Command hooks
//! follow Claude Code: the JSON payload arrives on stdin; exit 0 continues (stdout, if any, is
//! parsed as Claude Code's hook output JSON); **exit 2 blocks and stderr is the reason given to
//! the model**; any other exit is a non-blocking error that is logged. (Goat ignores exit codes;
//! Talon does what Claude Code users expect.)

mod command;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use command::{CommandHook, HookCommandError};

/// The hook events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    /// A session's first turn (matchers match the source: `startup`).
    SessionStart,
    /// A prompt is about to reach the model: a deny blocks it, context is added to it.
    UserPromptSubmit,
    /// The model has answered: a deny makes it continue, with the reason as its instruction.
    Stop,
    /// A child run's turn starts: context is added before its task.
    SubagentStart,
    /// A child run's model has answered (fired instead of Stop): a deny makes it continue.
    SubagentStop,
}

impl HookEvent {
    fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
        }
    }
}

/// The payload, with Claude Code's field names.
#[derive(Debug, Clone, Serialize)]
pub struct HookInput {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    pub cwd: String,
    pub permission_mode: String,
    pub hook_event_name: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool_name: String,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub tool_input: Value,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool_use_id: String,
    /// UserPromptSubmit: the prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// SessionStart: why the session starts (`startup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Stop: the model is already continuing because a Stop hook said so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    /// PostToolUse: the result text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<Value>,
    /// PostToolUseFailure: what went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// PostToolUseFailure: the call was cancelled rather than failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_interrupt: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// SubagentStart, SubagentStop: the child run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// SubagentStart, SubagentStop: the agent the child runs as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
}

impl HookInput {
    /// The fields every event carries, from `ctx`; the event's own fields are empty.
    pub fn for_context(ctx: &crate::CallContext) -> Self {
        HookInput {
            session_id: ctx.session_key.clone(),
            transcript_path: ctx
                .transcript_path
                .as_ref()
                .map(|p| p.display().to_string()),
            cwd: ctx
                .workspace
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            permission_mode: ctx.permission_mode.as_str().to_string(),
            hook_event_name: "",
            tool_name: String::new(),
            tool_input: Value::Null,
            tool_use_id: String::new(),
            tool_response: None,
            error: None,
            is_interrupt: None,
            duration_ms: None,
            prompt: None,
            source: None,
            stop_hook_active: None,
            agent_id: None,
            agent_type: None,
        }
    }
}

/// A hook's permission verdict (PreToolUse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookPermission {
    Allow,
    Deny,
    Ask,
}

/// What a hook returned, normalised from either Rust or Claude Code's JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookOutcome {
    /// PreToolUse verdict; `Deny` blocks (PostToolUse: `Deny` feeds `reason` back to the model).
    pub permission: Option<HookPermission>,
    pub reason: Option<String>,
    /// PreToolUse: replaces the tool input (validated again before the tool runs).
    pub updated_input: Option<Value>,
    /// Extra context appended to what the model sees.
    pub additional_context: Option<String>,
    /// PostToolUse: hide the output from the user.
    pub suppress_output: bool,
    /// `continue: false`: stop running further hooks for this event.
    pub stop: bool,
}

impl HookOutcome {
    /// Blocks the call with a reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            permission: Some(HookPermission::Deny),
            reason: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Parses Claude Code's hook output JSON.
    pub fn from_claude_json(value: &Value) -> Self {
        let specific = value.get("hookSpecificOutput");
        let field = |name: &str| {
            specific
                .and_then(|s| s.get(name))
                .or_else(|| value.get(name))
        };
        let mut permission =
            field("permissionDecision").and_then(|v| serde_json::from_value(v.clone()).ok());
        // Legacy top-level `decision: approve|block`.
        match value.get("decision").and_then(Value::as_str) {
            Some("block") => permission = Some(HookPermission::Deny),
            Some("approve") if permission.is_none() => permission = Some(HookPermission::Allow),
            _ => {}
        }
        let reason = field("permissionDecisionReason")
            .or_else(|| value.get("reason"))
            .or_else(|| value.get("stopReason"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let additional_context = field("additionalContext")
            .or_else(|| value.get("systemMessage"))
            .and_then(Value::as_str)
            .map(str::to_string);
        Self {
            permission,
            reason,
            updated_input: field("updatedInput").cloned(),
            additional_context,
            suppress_output: value
                .get("suppressOutput")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            stop: value.get("continue").and_then(Value::as_bool) == Some(false),
        }
    }
}

/// A hook implementation.
pub trait Hook: Send + Sync {
    fn run<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookOutcome>;
}

/// A hook written as a Rust closure.
pub struct FnHook<F>(pub F);

impl<F> Hook for FnHook<F>
where
    F: Fn(&HookInput) -> HookOutcome + Send + Sync,
{
    fn run<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookOutcome> {
        let outcome = (self.0)(input);
        Box::pin(async move { outcome })
    }
}

/// A hook and the tools it applies to.
#[derive(Clone)]
pub struct HookMatcher {
    /// `None`, `""` or `"*"`: every tool. Otherwise `|`-separated exact names or globs
    /// (`Edit|Write`, `mcp__*`), as in Claude Code settings.
    pub matcher: Option<String>,
    /// The agents this hook runs for; empty: every agent.
    pub agents: Vec<String>,
    pub hook: Arc<dyn Hook>,
}

impl std::fmt::Debug for HookMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookMatcher")
            .field("matcher", &self.matcher)
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            name.starts_with(prefix) && {
                let tail = &name[prefix.len()..];
                (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob_match(rest, &tail[i..]))
            }
        }
    }
}

impl HookMatcher {
    pub fn new(matcher: Option<&str>, hook: Arc<dyn Hook>) -> Self {
        Self {
            matcher: matcher.map(str::to_string),
            agents: Vec::new(),
            hook,
        }
    }

    /// Runs only for calls and turns of `agents` (empty: every agent).
    pub fn for_agents(mut self, agents: Vec<String>) -> Self {
        self.agents = agents;
        self
    }

    /// True if this hook runs for `agent` (calls without an agent run as the default one).
    pub fn applies_to(&self, agent: Option<&str>) -> bool {
        self.agents.is_empty()
            || self
                .agents
                .iter()
                .any(|a| a == agent.unwrap_or(crate::DEFAULT_AGENT))
    }

    /// True if this hook applies to `tool` (the canonical name or the name the model used).
    pub fn matches(&self, tool: &str, requested: &str) -> bool {
        match self.matcher.as_deref().map(str::trim) {
            None | Some("") | Some("*") => true,
            Some(m) => m
                .split('|')
                .map(str::trim)
                .any(|p| glob_match(p, tool) || glob_match(p, requested)),
        }
    }
}

/// All configured hooks, by event.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    pub pre_tool_use: Vec<HookMatcher>,
    pub post_tool_use: Vec<HookMatcher>,
    pub post_tool_use_failure: Vec<HookMatcher>,
    pub session_start: Vec<HookMatcher>,
    pub user_prompt_submit: Vec<HookMatcher>,
    pub stop: Vec<HookMatcher>,
    pub subagent_start: Vec<HookMatcher>,
    pub subagent_stop: Vec<HookMatcher>,
}

impl Hooks {
    /// Adds a hook for an event.
    pub fn add(&mut self, event: HookEvent, matcher: HookMatcher) {
        match event {
            HookEvent::PreToolUse => self.pre_tool_use.push(matcher),
            HookEvent::PostToolUse => self.post_tool_use.push(matcher),
            HookEvent::PostToolUseFailure => self.post_tool_use_failure.push(matcher),
            HookEvent::SessionStart => self.session_start.push(matcher),
            HookEvent::UserPromptSubmit => self.user_prompt_submit.push(matcher),
            HookEvent::Stop => self.stop.push(matcher),
            HookEvent::SubagentStart => self.subagent_start.push(matcher),
            HookEvent::SubagentStop => self.subagent_stop.push(matcher),
        }
    }

    fn for_event(&self, event: HookEvent) -> &[HookMatcher] {
        match event {
            HookEvent::PreToolUse => &self.pre_tool_use,
            HookEvent::PostToolUse => &self.post_tool_use,
            HookEvent::PostToolUseFailure => &self.post_tool_use_failure,
            HookEvent::SessionStart => &self.session_start,
            HookEvent::UserPromptSubmit => &self.user_prompt_submit,
            HookEvent::Stop => &self.stop,
            HookEvent::SubagentStart => &self.subagent_start,
            HookEvent::SubagentStop => &self.subagent_stop,
        }
    }

    /// Fires a run event (SessionStart, UserPromptSubmit, Stop) for `ctx`; matchers match
    /// `subject` (the source for SessionStart, empty otherwise).
    pub async fn fire_run(
        &self,
        event: HookEvent,
        ctx: &crate::CallContext,
        subject: &str,
        fill: impl FnOnce(&mut HookInput),
    ) -> HookOutcome {
        if self.is_empty(event) {
            return HookOutcome::default();
        }
        let mut input = HookInput::for_context(ctx);
        fill(&mut input);
        self.fire(
            event,
            ctx.agent_key.as_deref(),
            subject,
            subject,
            &mut input,
        )
        .await
    }

    /// True when no hook is registered for `event` (lets the pipeline skip building payloads).
    pub fn is_empty(&self, event: HookEvent) -> bool {
        self.for_event(event).is_empty()
    }

    /// Runs the matching hooks in order and folds their outcomes: the first deny wins and stops,
    /// later input rewrites see earlier ones, contexts accumulate.
    pub(crate) async fn fire(
        &self,
        event: HookEvent,
        agent: Option<&str>,
        tool: &str,
        requested: &str,
        input: &mut HookInput,
    ) -> HookOutcome {
        input.hook_event_name = event.as_str();
        let mut folded = HookOutcome::default();
        for matcher in self
            .for_event(event)
            .iter()
            .filter(|m| m.applies_to(agent) && m.matches(tool, requested))
        {
            let outcome = matcher.hook.run(input).await;
            if let Some(updated) = outcome.updated_input.clone() {
                input.tool_input = updated.clone();
                folded.updated_input = Some(updated);
            }
            if let Some(context) = outcome.additional_context {
                let joined = match folded.additional_context.take() {
                    Some(prev) => format!("{prev}\n{context}"),
                    None => context,
                };
                folded.additional_context = Some(joined);
            }
            folded.suppress_output |= outcome.suppress_output;
            match outcome.permission {
                Some(HookPermission::Deny) => {
                    folded.permission = Some(HookPermission::Deny);
                    folded.reason = outcome.reason;
                    return folded;
                }
                Some(p) if folded.permission != Some(HookPermission::Ask) => {
                    folded.permission = Some(p);
                    folded.reason = outcome.reason.or(folded.reason);
                }
                _ => {}
            }
            if outcome.stop {
                folded.stop = true;
                break;
            }
        }
        folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matcher_forms() {
        let hook: Arc<dyn Hook> = Arc::new(FnHook(|_: &HookInput| HookOutcome::default()));
        let m = |s: Option<&str>| HookMatcher::new(s, Arc::clone(&hook));
        assert!(m(None).matches("exec", "bash"));
        assert!(m(Some("*")).matches("exec", "exec"));
        assert!(m(Some("Edit|Write")).matches("Write", "Write"));
        assert!(!m(Some("Edit|Write")).matches("Read", "Read"));
        assert!(m(Some("mcp__*")).matches("mcp__github__search", "mcp__github__search"));
        assert!(
            m(Some("bash")).matches("exec", "bash"),
            "the name the model used also matches"
        );
        assert!(!m(Some("exe")).matches("exec", "exec"));
    }

    #[tokio::test]
    async fn hooks_can_be_limited_to_agents() {
        let hook: Arc<dyn Hook> = Arc::new(FnHook(|_: &HookInput| HookOutcome {
            permission: Some(HookPermission::Deny),
            ..HookOutcome::default()
        }));
        let mut hooks = Hooks::default();
        hooks.add(
            HookEvent::PreToolUse,
            HookMatcher::new(None, hook).for_agents(vec!["reviewer".into()]),
        );
        let ctx = |agent: Option<&str>| {
            let mut c = crate::CallContext::new("s");
            c.agent_key = agent.map(str::to_string);
            c
        };
        for (agent, denied) in [
            (Some("reviewer"), true),
            (Some("coder"), false),
            (None, false),
        ] {
            let c = ctx(agent);
            let mut input = HookInput::for_context(&c);
            let outcome = hooks
                .fire(HookEvent::PreToolUse, agent, "exec", "exec", &mut input)
                .await;
            assert_eq!(
                outcome.permission == Some(HookPermission::Deny),
                denied,
                "{agent:?}"
            );
        }
    }

    #[test]
    fn claude_json_forms() {
        let o = HookOutcome::from_claude_json(&json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no rm",
            }
        }));
        assert_eq!(o.permission, Some(HookPermission::Deny));
        assert_eq!(o.reason.as_deref(), Some("no rm"));

        let o = HookOutcome::from_claude_json(&json!({"decision": "block", "reason": "legacy"}));
        assert_eq!(o.permission, Some(HookPermission::Deny));
        assert_eq!(o.reason.as_deref(), Some("legacy"));

        let o = HookOutcome::from_claude_json(&json!({
            "continue": false,
            "suppressOutput": true,
            "hookSpecificOutput": {"updatedInput": {"x": 1}, "additionalContext": "note"}
        }));
        assert!(o.stop && o.suppress_output);
        assert_eq!(o.updated_input, Some(json!({"x": 1})));
        assert_eq!(o.additional_context.as_deref(), Some("note"));
    }
}

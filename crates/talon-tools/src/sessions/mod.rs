//! Session tools (group `sessions`): `sessions_list`, `sessions_history`, `session_status` over
//! the store's agent sessions, and `sessions_send`, which delivers a message into another
//! session of the same agent and runs a turn there.
//!
//! A call sees only the sessions of its own agent and its own user (a call naming no user, only
//! sessions of no user): several users share one gateway, and another user's conversation is
//! theirs. Another user's session is "not found", the same as a key that does not exist; the
//! store matches the owner in its queries ([`Store::owned_session`], [`Store::sessions`]), and
//! the turn `sessions_send` starts is refused by the store too if the session is not the
//! caller's. Running a turn belongs to the agent runtime, which sits above this crate: it
//! supplies a [`SessionSender`] once it exists.

pub mod session_status;
pub mod sessions_history;
pub mod sessions_list;
pub mod sessions_send;

use futures::future::BoxFuture;
use serde_json::Value;
use talon_core::CallContext;
use talon_store::{SessionRecord, Store};

/// Runs a turn in a stored session for `sessions_send`.
pub trait SessionSender: Send + Sync {
    /// Delivers `text` into `session_key` as a user message, runs the turn, and returns the
    /// answer's text (or why it could not run).
    fn send<'a>(
        &'a self,
        ctx: &'a CallContext,
        session_key: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<String, String>>;
}

/// The agent whose sessions a call may see.
fn agent(ctx: &CallContext) -> String {
    crate::memory::scope(ctx).0
}

/// Session `key`, if it is one of the call's agent and user.
async fn owned(
    store: &Store,
    ctx: &CallContext,
    key: &str,
) -> Result<Option<SessionRecord>, talon_store::StoreError> {
    store
        .owned_session(key, Some(&agent(ctx)), ctx.user.as_deref())
        .await
}

/// `key`, if it is a session of the call's agent and user; otherwise an error for the model.
async fn visible(store: &Store, ctx: &CallContext, key: &str) -> Result<SessionRecord, String> {
    match owned(store, ctx, key).await {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(format!(
            "no session {key:?} of this agent; sessions_list shows the ones you can use"
        )),
        Err(e) => Err(format!("sessions are unavailable: {e}")),
    }
}

/// One stored message (the agent runtime's neutral JSON) as a line of text, cut to `max` chars.
fn render(message: &str, max: usize) -> String {
    let cut = |s: &str| {
        let mut out: String = s.chars().take(max).collect();
        if out.len() < s.len() {
            out.push('…');
        }
        out
    };
    let Ok(v) = serde_json::from_str::<Value>(message) else {
        return format!("(unreadable message) {}", cut(message));
    };
    let text = |v: &Value| {
        v.get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match v.get("role").and_then(Value::as_str) {
        Some("user") => format!("user: {}", cut(&text(&v))),
        Some("assistant") => {
            let calls: Vec<&str> = v
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect();
            let mut line = format!("assistant: {}", cut(&text(&v)));
            if !calls.is_empty() {
                line.push_str(&format!(" [called: {}]", calls.join(", ")));
            }
            line
        }
        Some("tool_results") => {
            let results: Vec<String> = v
                .get("results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| {
                    let content = r.get("content").and_then(Value::as_str).unwrap_or_default();
                    let error = r.get("is_error").and_then(Value::as_bool) == Some(true);
                    format!("{}{}", if error { "error: " } else { "" }, cut(content))
                })
                .collect();
            format!("tool results: {}", results.join(" | "))
        }
        _ => format!("(message) {}", cut(message)),
    }
}

/// A session as one line for the model.
fn describe(s: &SessionRecord) -> String {
    format!(
        "{} — {}, {} turns, {} tokens in / {} out, last: {}",
        s.key,
        s.state,
        s.turns,
        s.input_tokens,
        s.output_tokens,
        if s.last_stop.is_empty() {
            "-"
        } else {
            &s.last_stop
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_render_as_lines() {
        assert_eq!(
            render(r#"{"role":"user","text":"hello"}"#, 100),
            "user: hello"
        );
        assert_eq!(
            render(
                r#"{"role":"assistant","text":"checking","tool_calls":[{"id":"1","name":"read_file","arguments":"{}"}]}"#,
                100
            ),
            "assistant: checking [called: read_file]"
        );
        assert_eq!(
            render(
                r#"{"role":"tool_results","results":[{"call_id":"1","content":"abcdef","is_error":true}]}"#,
                3
            ),
            "tool results: error: abc…"
        );
        assert_eq!(render("not json", 100), "(unreadable message) not json");
    }
}

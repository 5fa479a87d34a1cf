//! Approvals asked of the caller's own MCP client ([`crate::context::AskVia::McpClient`]):
//! an `elicitation/create` form with one choice, or a refusal naming the settings that allow
//! the call when the client cannot be asked.

use serde_json::{Value, json};

use super::{PendingApproval, Resolution};
use crate::ClientHandle;
use crate::visible::{visible, visible_prose};

/// The `elicitation/create` parameters asking whether `request` may run. Everything the
/// model wrote (the command, the arguments) is shown with control characters made visible.
pub(super) fn elicitation(request: &PendingApproval) -> Value {
    let mut choices = vec![("allow_once", "Allow once".to_string())];
    if let Some(always) = &request.always {
        choices.push(("allow_always", format!("Allow always: {}", visible(always))));
    }
    choices.push(("deny", "Deny".to_string()));
    let (values, names): (Vec<&str>, Vec<String>) = choices.into_iter().unzip();
    json!({
        "message": format!(
            "Talon asks before running {} ({}):\n{}",
            visible(&request.tool),
            visible_prose(&request.reason),
            visible(&request.summary)
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "title": "Allow this call?",
                             "enum": values, "enumNames": names}
            },
            "required": ["decision"]
        }
    })
}

/// The client's answer as a resolution: only an accepted form naming a decision offered allows.
pub(super) fn resolution(request: &PendingApproval, answer: &Value) -> Resolution {
    let decision = (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.pointer("/content/decision").and_then(Value::as_str))
        .flatten();
    match decision {
        Some("allow_once") => Resolution::AllowOnce,
        Some("allow_always") if request.always.is_some() => Resolution::AllowAlways,
        Some("deny") => Resolution::Deny {
            reason: Some("the user denied it".into()),
        },
        _ => Resolution::Deny {
            reason: Some("the user declined or dismissed the request".into()),
        },
    }
}

/// Asks the client's user; a client that fails to answer denies.
pub(super) async fn ask(client: &ClientHandle, request: &PendingApproval) -> Resolution {
    match client.0.elicit(elicitation(request)).await {
        Ok(answer) => resolution(request, &answer),
        Err(e) => Resolution::Deny {
            reason: Some(format!("the MCP client could not ask its user: {e}")),
        },
    }
}

/// Why a call that needs approval is refused when the caller's MCP client cannot be asked,
/// with the settings that allow it.
pub(super) fn cannot_ask(tool: &str, reason: &str) -> String {
    format!(
        "permission denied: {tool} needs approval ({reason}) and this MCP client cannot be \
         asked (it does not support elicitation). Do not retry the same call; tell the user. \
         The operator allows it in talon.toml: `[mcp_server] client_confirms = true` when the \
         client asks its user before each tool call (Claude Code does), or `tools.auto_allow` \
         listing \"{tool}\"; a command held by an `[exec.approvals]` rule or `ask` setting is \
         allowed by an `allow` rule there, e.g. `Bash(git push:*)`."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(always: Option<&str>) -> PendingApproval {
        PendingApproval {
            id: "apr-1".into(),
            tool: "exec".into(),
            agent: None,
            session: "s".into(),
            user: None,
            summary: "git push\u{1b}[2K\rgit status".into(),
            reason: "an ask rule".into(),
            always: always.map(str::to_string),
            requested_at: 0,
            expires_at: 0,
            run: Default::default(),
        }
    }

    #[test]
    fn the_form_shows_the_command_with_its_escapes_visible() {
        let form = elicitation(&request(Some("git push")));
        let message = form["message"].as_str().unwrap_or_default();
        assert!(!message.contains('\u{1b}'), "{message}");
        assert!(message.contains("git push"), "{message}");
        assert_eq!(
            form["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["allow_once", "allow_always", "deny"])
        );
        let without = elicitation(&request(None));
        assert_eq!(
            without["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["allow_once", "deny"])
        );
    }

    #[test]
    fn only_an_accepted_offered_choice_allows() {
        let r = request(None);
        let answer = |action: &str, decision: &str| json!({"action": action, "content": {"decision": decision}});
        assert_eq!(
            resolution(&r, &answer("accept", "allow_once")),
            Resolution::AllowOnce
        );
        assert!(matches!(
            resolution(&r, &answer("accept", "allow_always")),
            Resolution::Deny { .. }
        ));
        assert!(matches!(
            resolution(&r, &answer("decline", "allow_once")),
            Resolution::Deny { .. }
        ));
        assert!(matches!(
            resolution(&r, &json!({"action": "cancel"})),
            Resolution::Deny { .. }
        ));
    }
}

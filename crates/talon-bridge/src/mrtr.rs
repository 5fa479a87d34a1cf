//! Multi-round tool calls (SEP-2322, protocol 2026-07-28): a server that needs something from
//! the client before it can finish a call answers `input_required` with the requests, and the
//! client sends the call again with its answers and the server's opaque `requestState`.
//!
//! Talon answers as it answers the same requests sent the older way: an elicitation goes to the
//! caller's client when it can ask its user, and is declined otherwise; `roots/list` is empty
//! (Talon exposes no roots to servers). Sampling is not offered (Talon does not declare the
//! capability), so such a request, like any kind Talon does not know, goes unanswered and the server decides what to do.

use serde_json::{Value, json};
use talon_core::ClientHandle;

use rmcp::model::{InputRequest, InputRequests, InputResponses};

/// Rounds allowed for one call (a server that keeps asking is given up on).
pub(crate) const MAX_ROUNDS: usize = 8;

/// Talon's answers to `requests`, by the server's keys.
pub(crate) async fn answer(
    server: &str,
    requests: InputRequests,
    client: Option<&ClientHandle>,
) -> InputResponses {
    let mut out = InputResponses::new();
    for (key, request) in requests {
        let response = match request {
            InputRequest::Elicitation(request) => {
                let params = serde_json::to_value(&request.params).unwrap_or(Value::Null);
                elicit(client, params).await
            }
            InputRequest::ListRoots(_) => json!({"roots": []}),
            // Sampling, and kinds of request newer than Talon.
            _ => {
                tracing::warn!(server, "an MCP server asked for input Talon does not offer");
                continue;
            }
        };
        out.insert(key, response);
    }
    out
}

/// The caller's user's answer to an elicitation, or a decline when nobody can answer.
async fn elicit(client: Option<&ClientHandle>, params: Value) -> Value {
    match client {
        Some(client) => crate::elicit::ask(client, params).await,
        None => crate::elicit::decline("the call's client cannot ask its user"),
    }
}

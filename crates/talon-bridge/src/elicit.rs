//! A server's elicitation, put to the caller's user: the one place both ways of asking (a
//! server request, or an `input_required` result) pass through.
//!
//! When the user accepts, every field the form left out that the requested schema gives a
//! `default` for is filled in with it (SEP-1034): the user saw the default and did not change
//! it, and the server should not have to guess.

use serde_json::{Map, Value, json};
use talon_core::ClientHandle;

/// The answer that declines, with the reason logged.
pub(crate) fn decline(why: &str) -> Value {
    tracing::warn!("an MCP server asked for the user's input; declined: {why}");
    json!({"action": "decline"})
}

/// Asks `client`'s user the elicitation with `params`; its result (a decline when the answer
/// is not one).
pub(crate) async fn ask(client: &ClientHandle, params: Value) -> Value {
    match client.0.elicit(params.clone()).await {
        Ok(answer) if answer.get("action").and_then(Value::as_str).is_some() => {
            with_defaults(&params, answer)
        }
        Ok(answer) => decline(&format!(
            "the client's answer is not an elicitation result: {answer}"
        )),
        Err(e) => decline(&e),
    }
}

/// `answer` with the requested schema's defaults for the fields an acceptance left out.
fn with_defaults(params: &Value, mut answer: Value) -> Value {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return answer;
    }
    let Some(properties) = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    else {
        return answer;
    };
    let Some(fields) = answer.as_object_mut() else {
        return answer;
    };
    let content = fields
        .entry("content")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(content) = content.as_object_mut() {
        for (name, schema) in properties {
            if let Some(default) = schema.get("default")
                && !content.contains_key(name)
            {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::with_defaults;
    use serde_json::json;

    #[test]
    fn an_acceptance_gets_the_defaults_it_left_out() {
        let params = json!({"message": "?", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "note": {"type": "string"},
        }}});
        let answer = with_defaults(&params, json!({"action": "accept", "content": {"age": 7}}));
        assert_eq!(
            answer,
            json!({"action": "accept", "content": {"name": "Ada", "age": 7}})
        );
        let answer = with_defaults(&params, json!({"action": "accept"}));
        assert_eq!(answer["content"]["age"], 36);
        let declined = with_defaults(&params, json!({"action": "decline"}));
        assert_eq!(declined, json!({"action": "decline"}));
    }
}

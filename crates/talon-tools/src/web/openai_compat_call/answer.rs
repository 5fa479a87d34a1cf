//! What `openai_compat_call` tells the model about an endpoint's answer.
//!
//! A chat completion is reduced to what the model asked for, the reply's text, with one line of
//! bookkeeping (model, finish reason, token counts); anything else (embeddings, a listing, a
//! completion with several choices or with tool calls) comes back as the JSON itself, pretty and
//! capped, since the caller wrote the request and knows its shape. An error status is an error
//! result with the provider's own message, which usually says what to change.

use serde_json::Value;

use crate::web::cap_chars;

/// The most characters of an answer's JSON (or text) returned.
pub const MAX_ANSWER_CHARS: usize = 64 * 1024;
/// The most characters of an error answer's body quoted when it has no message field.
const MAX_ERROR_CHARS: usize = 2000;

/// The text for the model from an answer with `status` and `body` (cut at the fetcher's size
/// cap when `truncated`), from the endpoint called `endpoint`; `Err` for a non-2xx status.
pub fn render(endpoint: &str, status: u16, body: &[u8], truncated: bool) -> Result<String, String> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        return Err(error_text(endpoint, status, json.as_ref(), body));
    }
    let mut out = match &json {
        Some(value) => match chat_reply(value) {
            Some(text) => return Ok(text),
            None => capped(&serde_json::to_string_pretty(value).unwrap_or_default()),
        },
        None => format!(
            "The endpoint's answer is not JSON:\n{}",
            capped(&String::from_utf8_lossy(body))
        ),
    };
    if truncated {
        out.push_str("\n[the answer was larger than the size limit; only its start was read]");
    }
    Ok(out)
}

/// `text` cut at [`MAX_ANSWER_CHARS`], saying so.
fn capped(text: &str) -> String {
    let (mut kept, cut) = cap_chars(text, MAX_ANSWER_CHARS);
    if cut {
        kept.push_str(&format!(
            "\n[cut at {MAX_ANSWER_CHARS} of {} characters]",
            text.chars().count()
        ));
    }
    kept
}

/// The reply of a chat completion with one choice whose message has text (or a refusal), and
/// a line with the model, finish reason and usage; `None` for anything else.
fn chat_reply(value: &Value) -> Option<String> {
    let choices = value.get("choices")?.as_array()?;
    let [choice] = choices.as_slice() else {
        return None;
    };
    let message = choice.get("message")?;
    let has_tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| !calls.is_empty());
    if has_tool_calls {
        return None;
    }
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.as_str().or_else(|| part.get("text")?.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let text = match message.get("refusal").and_then(Value::as_str) {
        Some(refusal) if text.is_empty() && !refusal.is_empty() => {
            format!("The model refused: {refusal}")
        }
        _ if text.is_empty() => return None,
        _ => text,
    };
    let mut facts = Vec::new();
    if let Some(model) = value.get("model").and_then(Value::as_str) {
        facts.push(format!("model: {model}"));
    }
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        facts.push(format!("finish_reason: {reason}"));
    }
    if let Some(usage) = value.get("usage") {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        let counts: Vec<String> = [
            ("prompt", count("prompt_tokens")),
            ("completion", count("completion_tokens")),
            ("total", count("total_tokens")),
        ]
        .into_iter()
        .filter_map(|(name, n)| Some(format!("{name} {}", n?)))
        .collect();
        if !counts.is_empty() {
            facts.push(format!("tokens: {}", counts.join(", ")));
        }
    }
    let mut out = capped(&text);
    if !facts.is_empty() {
        out.push_str(&format!("\n\n[{}]", facts.join("; ")));
    }
    Some(out)
}

/// The error result for a non-2xx answer: the status, the provider's message (`error.message`,
/// an `error` string, `message` or `detail`), else the start of the body, and a hint for the
/// statuses that have an obvious cause.
fn error_text(endpoint: &str, status: u16, json: Option<&Value>, body: &[u8]) -> String {
    let message = json.and_then(|v| {
        [
            v.get("error").and_then(|e| e.get("message")),
            v.get("error"),
            v.get("message"),
            v.get("detail"),
        ]
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .map(str::to_string)
    });
    let detail = match message {
        Some(message) => cap_chars(&message, MAX_ERROR_CHARS).0,
        None if body.is_empty() => "(no body)".into(),
        None => cap_chars(&String::from_utf8_lossy(body), MAX_ERROR_CHARS).0,
    };
    let hint = match status {
        401 | 403 => format!(
            " (the endpoint refused the credentials; the operator sets the key as api_key_secret or api_key_env in [openai_compat.{endpoint}])"
        ),
        404 => " (check `path`, default \"chat/completions\", and the model name)".into(),
        413 => " (the request is too large for the endpoint: send less)".into(),
        _ => String::new(),
    };
    format!("the endpoint {endpoint} answered HTTP {status}{hint}: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(value: &Value) -> String {
        render("local", 200, value.to_string().as_bytes(), false).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_chat_completion_becomes_its_text_and_a_line_of_usage() {
        let answer = ok(&json!({
            "id": "c1", "object": "chat.completion", "model": "llama3",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Bonjour."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        }));
        assert_eq!(
            answer,
            "Bonjour.\n\n[model: llama3; finish_reason: stop; tokens: prompt 12, completion 3, total 15]"
        );
        // Content parts are joined; missing facts are left out.
        let parts = ok(&json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "two"}
        ]}}]}));
        assert_eq!(parts, "one\ntwo");
        let refusal =
            ok(&json!({"choices": [{"message": {"content": null, "refusal": "I can't."}}]}));
        assert_eq!(refusal, "The model refused: I can't.");
    }

    #[test]
    fn other_answers_come_back_as_json() {
        let embeddings =
            json!({"object": "list", "data": [{"embedding": [0.1, 0.2]}], "model": "e5"});
        assert_eq!(
            ok(&embeddings),
            serde_json::to_string_pretty(&embeddings).unwrap_or_default()
        );
        // Tool calls, several choices, or an empty message: the caller reads the JSON.
        for value in [
            json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "t"}]}}]}),
            json!({"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}]}),
            json!({"choices": [{"message": {"content": ""}}]}),
        ] {
            assert!(ok(&value).starts_with("{\n"), "{value}");
        }
        let text = render("local", 200, b"plain words", false).unwrap_or_default();
        assert_eq!(text, "The endpoint's answer is not JSON:\nplain words");
        let cut = render("local", 200, b"{\"a\": [1, 2", true).unwrap_or_default();
        assert!(cut.ends_with("only its start was read]"), "{cut}");
    }

    #[test]
    fn a_long_answer_is_cut_saying_so() {
        let big = json!({"data": "x".repeat(2 * MAX_ANSWER_CHARS)});
        let answer = ok(&big);
        assert!(answer.chars().count() < MAX_ANSWER_CHARS + 100);
        assert!(
            answer.ends_with(&format!(
                "[cut at {MAX_ANSWER_CHARS} of {} characters]",
                serde_json::to_string_pretty(&big)
                    .unwrap_or_default()
                    .chars()
                    .count()
            )),
            "{}",
            &answer[answer.len() - 80..]
        );
    }

    #[test]
    fn errors_carry_the_status_and_the_providers_message() {
        let error = |status: u16, body: &[u8]| {
            render("local", status, body, false)
                .err()
                .unwrap_or_default()
        };
        let e = error(400, br#"{"error": {"message": "temperature must be at most 2", "type": "invalid_request_error"}}"#);
        assert_eq!(
            e,
            "the endpoint local answered HTTP 400: temperature must be at most 2"
        );
        let e = error(401, br#"{"error": "bad key"}"#);
        assert!(
            e.starts_with(
                "the endpoint local answered HTTP 401 (the endpoint refused the credentials;"
            ),
            "{e}"
        );
        assert!(
            e.contains("[openai_compat.local]") && e.ends_with(": bad key"),
            "{e}"
        );
        let e = error(422, br#"{"detail": "field required"}"#);
        assert!(e.ends_with(": field required"), "{e}");
        let e = error(502, b"Bad Gateway");
        assert_eq!(e, "the endpoint local answered HTTP 502: Bad Gateway");
        let e = error(404, b"");
        assert!(
            e.contains("check `path`") && e.ends_with("(no body)"),
            "{e}"
        );
    }
}

//! What `openai_compat_call` sends: the URL (the operator's base URL and a relative path the
//! model may choose, which must stay under it) and the body (the model's JSON object, checked).
//!
//! The path is checked twice, for two reasons. The character and segment rules refuse what
//! could move the request elsewhere before any parsing (`..`, a scheme or host with `:`,
//! `%2e%2e`, which the URL standard reads as `..`, and `\`, which it reads as `/`); then the
//! joined URL must still have the base's scheme, host and port and a path under the base's, so
//! a spelling the rules missed is caught by comparing the result, not the input.

use serde_json::{Map, Value};
use talon_web::fetch::Url;

use crate::web::cap_chars;

/// The path called when the model names none.
pub const DEFAULT_PATH: &str = "chat/completions";
/// The longest path accepted, in characters.
pub const MAX_PATH_CHARS: usize = 200;
/// The largest request body sent, serialized.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `path` as a message shows it: escaped and shortened (it is the model's text).
fn shown(path: &str) -> String {
    let short: String = path.chars().take(MAX_PATH_CHARS).collect();
    format!("{short:?}")
}

/// Checks a model-given `path` against the rules in the module docs; the error says what is
/// wrong and how to write it.
pub fn check_path(path: &str) -> Result<(), String> {
    let p = shown(path);
    if path.is_empty() {
        return Err(format!(
            "path is empty: omit it to call {DEFAULT_PATH}, or give a path under the endpoint's base URL such as \"embeddings\""
        ));
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(format!(
            "path is longer than {MAX_PATH_CHARS} characters: give the API's path under the endpoint's base URL, such as {DEFAULT_PATH:?}"
        ));
    }
    if path.starts_with('/') {
        return Err(format!(
            "path {p} is refused: it starts with '/'; give it relative to the endpoint's base URL (\"chat/completions\", not \"/v1/chat/completions\")"
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.')))
    {
        let why = match c {
            '?' | '#' => {
                "query strings and fragments are not sent: put the parameters in the body".into()
            }
            '%' => "percent-escapes are not accepted (they can spell \"..\")".into(),
            ':' => "a path cannot name a scheme, host or port: the operator configured the endpoint's URL, and only a path under it can be chosen".into(),
            '\\' => "backslashes are not accepted (URL parsers read them as '/')".into(),
            c => format!("the character {c:?} is not accepted"),
        };
        return Err(format!(
            "path {p} is refused: {why}. Use letters, digits, '/', '-', '_' and '.', relative to the endpoint's base URL (default {DEFAULT_PATH:?})"
        ));
    }
    for segment in path.split('/') {
        let why = match segment {
            ".." => "'..' would leave the endpoint's base URL",
            "." => "'.' segments are not accepted",
            "" => "empty segments ('//' or a trailing '/') are not accepted",
            _ => continue,
        };
        return Err(format!(
            "path {p} is refused: {why}; give the API's path under the endpoint's base URL, such as {DEFAULT_PATH:?}"
        ));
    }
    Ok(())
}

/// Whether `url` is under `base`: the same scheme, host and port, a path starting with the
/// base's (which ends in `/`), and no query or fragment.
pub fn stays_under(base: &Url, url: &Url) -> bool {
    url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.path().starts_with(base.path())
        && url.query().is_none()
        && url.fragment().is_none()
}

/// The URL of `path` under `base` (whose path ends in `/`), after [`check_path`] and
/// [`stays_under`].
pub fn endpoint_url(base: &Url, path: &str) -> Result<Url, String> {
    check_path(path)?;
    let url = base
        .join(path)
        .map_err(|e| format!("path {} does not make a URL: {e}", shown(path)))?;
    if !stays_under(base, &url) {
        return Err(format!(
            "path {} is refused: it would leave the endpoint's base URL; give the API's path under it, such as {DEFAULT_PATH:?}",
            shown(path)
        ));
    }
    Ok(url)
}

/// The body to send: `body` must be a JSON object without `"stream": true`; `model` is set to
/// `default_model` when absent (or null); the result is at most [`MAX_BODY_BYTES`] serialized.
pub fn prepare_body(body: Value, default_model: Option<&str>) -> Result<Value, String> {
    let mut object: Map<String, Value> = match body {
        Value::Object(object) => object,
        Value::String(text) if text.trim_start().starts_with('{') => {
            return Err(
                "body is a string holding JSON: pass the JSON object itself, not a string".into(),
            );
        }
        other => {
            let (start, cut) = cap_chars(&other.to_string(), 40);
            return Err(format!(
                "body must be a JSON object, the request as the endpoint's API defines it (for chat: {{\"messages\": [{{\"role\": \"user\", \"content\": \"…\"}}]}}); got {start}{}",
                if cut { "…" } else { "" }
            ));
        }
    };
    if object.get("stream") == Some(&Value::Bool(true)) {
        return Err(
            "streaming is not supported: omit \"stream\" (or set it to false); the whole answer comes back at once".into(),
        );
    }
    if let Some(model) = default_model
        && object.get("model").is_none_or(Value::is_null)
    {
        object.insert("model".into(), Value::String(model.into()));
    }
    let body = Value::Object(object);
    let size = serde_json::to_vec(&body).map_or(usize::MAX, |b| b.len());
    if size > MAX_BODY_BYTES {
        return Err(format!(
            "body is {size} bytes as JSON; at most {MAX_BODY_BYTES} (1 MiB) are sent: shorten the messages or send fewer inputs"
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Url {
        Url::parse("http://models.internal:8000/v1/").unwrap_or_else(|e| panic!("{e}"))
    }

    fn refused(path: &str) -> String {
        match endpoint_url(&base(), path) {
            Ok(url) => panic!("{path:?} was accepted as {url}"),
            Err(e) => e,
        }
    }

    #[test]
    fn paths_join_under_the_base() {
        for (path, want) in [
            (
                "chat/completions",
                "http://models.internal:8000/v1/chat/completions",
            ),
            ("embeddings", "http://models.internal:8000/v1/embeddings"),
            (
                "models/llama-3.1_8b",
                "http://models.internal:8000/v1/models/llama-3.1_8b",
            ),
            ("a..b/x.y", "http://models.internal:8000/v1/a..b/x.y"),
        ] {
            let url = endpoint_url(&base(), path).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(url.as_str(), want);
        }
    }

    #[test]
    fn paths_that_could_leave_the_base_are_refused_saying_why() {
        for (path, says) in [
            ("../x", "'..' would leave"),
            ("chat/../../x", "'..' would leave"),
            ("/abs", "starts with '/'"),
            ("//evil.example/x", "starts with '/'"),
            ("http://evil/x", "cannot name a scheme, host or port"),
            ("a?b", "query strings"),
            ("a#b", "query strings"),
            ("%2e%2e/x", "percent-escapes"),
            ("a\\..\\x", "backslashes"),
            ("./x", "'.' segments"),
            ("a//b", "empty segments"),
            ("a/", "empty segments"),
            ("", "path is empty"),
            ("a b", "' ' is not accepted"),
            ("é", "'é' is not accepted"),
        ] {
            let error = refused(path);
            assert!(error.contains(says), "{path:?}: {error}");
        }
        let long = "a".repeat(MAX_PATH_CHARS + 1);
        assert!(refused(&long).contains("longer than 200"));
        assert!(endpoint_url(&base(), &"a".repeat(MAX_PATH_CHARS)).is_ok());
    }

    #[test]
    fn the_joined_url_is_compared_with_the_base_whatever_the_rules_missed() {
        // What the character rules refuse first would also fail the comparison.
        for raw in [
            "../x",
            "/abs",
            "http://evil/x",
            "%2e%2e/x",
            "a?b",
            "//evil/x",
        ] {
            let joined = base().join(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert!(!stays_under(&base(), &joined), "{raw} -> {joined}");
        }
        let other_port =
            Url::parse("http://models.internal:8001/v1/x").unwrap_or_else(|e| panic!("{e}"));
        assert!(!stays_under(&base(), &other_port));
        let other_scheme =
            Url::parse("https://models.internal:8000/v1/x").unwrap_or_else(|e| panic!("{e}"));
        assert!(!stays_under(&base(), &other_scheme));
        let inside = base()
            .join("chat/completions")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(stays_under(&base(), &inside));
    }

    #[test]
    fn the_body_is_an_object_without_streaming_and_gets_the_default_model() {
        let body =
            json!({"messages": [], "temperature": 0.2, "response_format": {"type": "json_object"}});
        let sent = prepare_body(body.clone(), Some("llama3")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sent["model"], "llama3");
        assert_eq!(sent["temperature"], 0.2);
        assert_eq!(sent["response_format"], body["response_format"]);
        // The model's own choice wins; null counts as absent; no default leaves it out.
        let own = prepare_body(json!({"model": "mine"}), Some("llama3"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(own["model"], "mine");
        let null =
            prepare_body(json!({"model": null}), Some("llama3")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(null["model"], "llama3");
        let none = prepare_body(json!({"input": "x"}), None).unwrap_or_else(|e| panic!("{e}"));
        assert!(none.get("model").is_none());
        assert!(prepare_body(json!({"stream": false}), None).is_ok());
    }

    #[test]
    fn bodies_that_are_not_objects_stream_or_are_too_large_are_refused() {
        for (body, says) in [
            (json!([1, 2]), "got [1,2]"),
            (json!("hello"), "got \"hello\""),
            (json!(3), "got 3"),
            (json!(null), "got null"),
            (
                json!(vec!["x"; 40]),
                "got [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"…",
            ),
            (json!("{\"messages\": []}"), "pass the JSON object itself"),
            (
                json!({"stream": true}),
                "streaming is not supported: omit \"stream\"",
            ),
        ] {
            let error = prepare_body(body.clone(), None)
                .err()
                .unwrap_or_else(|| panic!("{body} accepted"));
            assert!(error.contains(says), "{body}: {error}");
        }
        let huge = json!({"messages": [{"role": "user", "content": "x".repeat(MAX_BODY_BYTES)}]});
        let error = prepare_body(huge, None).err().unwrap_or_default();
        assert!(error.contains("at most 1048576 (1 MiB)"), "{error}");
    }
}

//! Checks and encodings shared by the tables that store lists and environments.

use std::collections::BTreeMap;

use crate::StoreError;

pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        what,
        reason: reason.into(),
    }
}

/// Checks variable names (shell-style) and values (non-empty, no NUL).
pub(crate) fn check_env(env: &BTreeMap<String, String>) -> Result<(), StoreError> {
    for (name, value) in env {
        let ok = (1..=128).contains(&name.len())
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(invalid(
                "environment variable name",
                format!("{name:?}: use letters, digits and _, not starting with a digit"),
            ));
        }
        if value.is_empty() || value.contains('\0') {
            return Err(invalid(
                "environment variable value",
                format!("{name}: the value must be non-empty and contain no NUL byte"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn json_list(items: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(items).map_err(|e| invalid("list", e.to_string()))
}

pub(crate) fn parse_list(what: &'static str, text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text).map_err(|e| invalid(what, format!("stored value is corrupt: {e}")))
}

/// Every string in a JSON secret (an environment object, or an object of such objects), for
/// the scrubber; nothing when it is not JSON.
pub(crate) fn json_strings(secret: &str) -> Vec<String> {
    fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(secret) {
        collect(&value, &mut out);
    }
    out
}

/// The token values in stored OAuth credentials (`access_token`, `refresh_token`, `id_token`,
/// wherever they are nested), for the scrubber.
pub(crate) fn oauth_tokens(secret: &str) -> Vec<String> {
    fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        (
                            "access_token" | "refresh_token" | "id_token",
                            serde_json::Value::String(s),
                        ) => out.push(s.clone()),
                        _ => collect(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(secret) {
        collect(&value, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_oauth_tokens_are_secret() {
        let stored = r#"{"client_id":"client-1","token_response":{"access_token":"at-123456789","token_type":"Bearer","refresh_token":"rt-987654321","scope":"mcp"},"issuer":"http://127.0.0.1:9"}"#;
        assert_eq!(
            super::oauth_tokens(stored),
            ["at-123456789", "rt-987654321"]
        );
    }
}

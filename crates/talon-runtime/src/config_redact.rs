//! The configuration with its credentials replaced, for the `gateway` tool's `config.get` and
//! `talon config show` (one rule for both: an operator's terminal and a model see the same mask).
//!
//! A credential is recognised three ways, because key names alone missed some (issue 35):
//!
//! * **by key**: `token`, `api_key`, `password`, `*_token`, `*_key`, … and every value of an `env`
//!   or `headers` table; keys that only *name* where a secret lives (`token_secret`,
//!   `api_key_env`) are shown;
//! * **by position**: the value after a credential-like flag in an argument list
//!   (`args = ["--api-key", "…"]`, `--token=…`), a URL's user information (`user:pw@`, and a
//!   bare `token@`), the values of a URL's query (`?key=…`), the path of a channel's webhook URL
//!   (the path is the credential there), and a hook's whole command (shell text in which any word
//!   may be one);
//! * **by shape**: every remaining string goes through the credential scrubber, which knows the
//!   vendors' formats.

use std::sync::OnceLock;

use talon_core::context::ScrubBag;
use talon_core::scrub::Scrubber;
use toml_edit::{Item, Table};

pub(crate) const REDACTED: &str = "[redacted]";

/// Whether a key's value is a credential.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if key.ends_with("_env") || (key.ends_with("_secret") && key != "client_secret") {
        // They name where the secret is (an environment variable, a stored secret).
        return false;
    }
    matches!(
        key.as_str(),
        "token" | "api_key" | "apikey" | "password" | "secret" | "client_secret" | "authorization"
    ) || key.ends_with("_token")
        || key.ends_with("_password")
        || key.ends_with("_key")
}

/// Whether a command-line flag (`--api-key`, `-token`, `--client_secret`) takes a credential.
fn is_secret_flag(word: &str) -> bool {
    let Some(name) = word.strip_prefix("--").or_else(|| word.strip_prefix('-')) else {
        return false;
    };
    let name = name.to_ascii_lowercase().replace('_', "-");
    let parts = ["key", "pass", "auth", "bearer", "cookie", "pat"];
    let anywhere = ["token", "secret", "passw", "apikey", "credential"];
    name.split('-').any(|part| parts.contains(&part)) || anywhere.iter().any(|w| name.contains(w))
}

/// What a string value is, by where it stands.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// An ordinary value: URLs and scrubber-found credentials are masked inside it.
    Plain,
    /// Wholly a credential.
    Secret,
    /// A URL whose path is a credential (a channel's webhook).
    WebhookUrl,
}

/// `text`, a URL, with its user information, its query values and, for a webhook, its path
/// replaced; `None` when it is not a URL.
fn redact_url(text: &str, path_too: bool) -> Option<String> {
    let url = talon_net::url_parts(text)?;
    let host = match url.userinfo {
        Some(userinfo) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{}", url.host_port),
            // A bare token as the user (`https://ghp_…@github.com`).
            None => format!("{REDACTED}@{}", url.host_port),
        },
        None => url.host_port.to_string(),
    };
    let (scheme, tail) = (url.scheme, url.rest);
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    let mut out = format!("{scheme}://{host}");
    if path_too && path.len() > 1 {
        out.push('/');
        out.push_str(REDACTED);
    } else {
        out.push_str(path);
    }
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) => format!("{k}={REDACTED}"),
                None => pair.to_string(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if fragment.is_some() {
        out.push('#');
        out.push_str(REDACTED);
    }
    Some(out)
}

fn scrubber() -> Option<&'static Scrubber> {
    static SCRUBBER: OnceLock<Option<Scrubber>> = OnceLock::new();
    SCRUBBER.get_or_init(|| Scrubber::new().ok()).as_ref()
}

/// One string value as shown.
fn redact_text(text: &str, place: Place) -> String {
    match place {
        Place::Secret => REDACTED.to_string(),
        Place::WebhookUrl => redact_url(text, true).unwrap_or_else(|| REDACTED.to_string()),
        Place::Plain => {
            let text = redact_url(text, false).unwrap_or_else(|| text.to_string());
            match scrubber() {
                Some(s) => s
                    .scrub(&text, &ScrubBag::default())
                    .replace(talon_core::scrub::REDACTED, REDACTED),
                // The rules compile in every build (a test compiles them); never show unscrubbed.
                None => REDACTED.to_string(),
            }
        }
    }
}

/// An argument list (`args = [...]`): the word after a credential-like flag and the value of
/// `--flag=value` are credentials.
fn redact_args(values: &mut toml_edit::Array) {
    let mut next_is_secret = false;
    for value in values.iter_mut() {
        let toml_edit::Value::String(word) = value else {
            next_is_secret = false;
            redact_value(value, Place::Plain);
            continue;
        };
        let word = word.value().clone();
        let shown = if next_is_secret {
            REDACTED.to_string()
        } else if let Some((flag, _)) = word.split_once('=').filter(|(f, _)| is_secret_flag(f)) {
            format!("{flag}={REDACTED}")
        } else {
            redact_text(&word, Place::Plain)
        };
        next_is_secret = !next_is_secret && is_secret_flag(&word) && !word.contains('=');
        *value = shown.into();
    }
}

fn redact_value(value: &mut toml_edit::Value, place: Place) {
    match value {
        toml_edit::Value::InlineTable(table) => {
            for (key, value) in table.iter_mut() {
                redact_value(value, child_place(place, &key));
            }
        }
        toml_edit::Value::Array(values) => {
            for value in values.iter_mut() {
                redact_value(value, place);
            }
        }
        toml_edit::Value::String(text) => {
            let shown = redact_text(text.value(), place);
            if shown != *text.value() {
                *value = shown.into();
            }
        }
        _ if place == Place::Secret => *value = REDACTED.into(),
        _ => {}
    }
}

/// The place of `key`'s value inside a value or table at `place`.
fn child_place(place: Place, key: &str) -> Place {
    if place == Place::Secret || is_secret_key(key) || matches!(key, "env" | "headers") {
        Place::Secret
    } else {
        Place::Plain
    }
}

/// Replaces the credentials in `table`, found at the dotted `path` of the file.
fn redact_table(table: &mut Table, path: &[&str], place: Place) {
    let webhook_channel = path.first() == Some(&"channels")
        && path.len() == 2
        && table
            .get("kind")
            .and_then(Item::as_str)
            .is_some_and(|k| k == "webhook");
    for (key, item) in table.iter_mut() {
        let key_text = key.get().to_string();
        let mut child_path = path.to_vec();
        child_path.push(&key_text);
        let hook_command = path.first() == Some(&"hooks") && key_text == "command";
        let child = if hook_command {
            Place::Secret
        } else if webhook_channel && key_text == "url" {
            Place::WebhookUrl
        } else {
            child_place(place, &key_text)
        };
        match item {
            Item::Table(inner) => redact_table(inner, &child_path, child),
            Item::ArrayOfTables(tables) => {
                for inner in tables.iter_mut() {
                    redact_table(inner, &child_path, child);
                }
            }
            Item::Value(toml_edit::Value::Array(values))
                if key_text == "args" && child == Place::Plain =>
            {
                redact_args(values);
            }
            Item::Value(value) => redact_value(value, child),
            Item::None => {}
        }
    }
}

/// Replaces every credential in a whole configuration document.
pub(crate) fn redact_document(doc: &mut toml_edit::DocumentMut) {
    redact_table(doc.as_table_mut(), &[], Place::Plain);
}

/// One value the configuration's sources set, as `talon config show` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct SetValue {
    /// Its dotted key (`gateway.token`).
    pub key: String,
    /// Its value, credentials replaced by the rules of [`redact_document`].
    pub value: serde_json::Value,
    /// What set it: the file's path, or the `TALON_*` variables.
    pub source: String,
}

/// Every value `figment`'s sources set, with credentials replaced exactly as the `gateway`
/// tool's `config.get` replaces them.
pub fn set_values(figment: &figment::Figment) -> Result<Vec<SetValue>, Box<figment::Error>> {
    let merged: serde_json::Value = figment.extract().map_err(Box::new)?;
    let mut doc = toml_edit::DocumentMut::new();
    if let serde_json::Value::Object(map) = &merged {
        fill_table(doc.as_table_mut(), map);
    }
    redact_document(&mut doc);
    let mut out = Vec::new();
    collect_values(figment, doc.as_table(), "", &mut out);
    Ok(out)
}

fn fill_table(table: &mut Table, map: &serde_json::Map<String, serde_json::Value>) {
    for (key, value) in map {
        match value {
            serde_json::Value::Object(inner) => {
                let mut child = Table::new();
                fill_table(&mut child, inner);
                table.insert(key, Item::Table(child));
            }
            serde_json::Value::Null => {}
            other => {
                table.insert(key, Item::Value(toml_value(other)));
            }
        }
    }
}

fn toml_value(value: &serde_json::Value) -> toml_edit::Value {
    use serde_json::Value as J;
    match value {
        J::String(s) => s.as_str().into(),
        J::Bool(b) => (*b).into(),
        J::Number(n) => n
            .as_i64()
            .map_or_else(|| n.as_f64().unwrap_or_default().into(), Into::into),
        J::Array(items) => toml_edit::Value::Array(
            items
                .iter()
                .filter(|v| !v.is_null())
                .map(toml_value)
                .collect(),
        ),
        J::Object(map) => {
            let mut table = toml_edit::InlineTable::new();
            for (key, value) in map.iter().filter(|(_, v)| !v.is_null()) {
                table.insert(key, toml_value(value));
            }
            toml_edit::Value::InlineTable(table)
        }
        J::Null => "".into(),
    }
}

fn json_value(value: &toml_edit::Value) -> serde_json::Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => s.value().as_str().into(),
        T::Integer(n) => (*n.value()).into(),
        T::Float(f) => (*f.value()).into(),
        T::Boolean(b) => (*b.value()).into(),
        T::Datetime(d) => d.value().to_string().into(),
        T::Array(items) => items.iter().map(json_value).collect(),
        T::InlineTable(table) => table
            .iter()
            .map(|(k, v)| (k.to_string(), json_value(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

fn collect_values(figment: &figment::Figment, table: &Table, path: &str, out: &mut Vec<SetValue>) {
    for (key, item) in table.iter() {
        let key = if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        };
        match item {
            Item::Table(inner) => collect_values(figment, inner, &key, out),
            Item::Value(value) => {
                let source = figment.find_metadata(&key).map_or_else(
                    || "?".to_string(),
                    |m| match &m.source {
                        Some(figment::Source::File(file)) => file.display().to_string(),
                        _ => m.name.to_string(),
                    },
                );
                out.push(SetValue {
                    value: json_value(value),
                    key,
                    source,
                });
            }
            Item::None | Item::ArrayOfTables(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        let mut doc: toml_edit::DocumentMut = text.parse().unwrap();
        redact_document(&mut doc);
        doc.to_string()
    }

    #[test]
    fn credentials_are_found_by_position_as_well_as_by_name() {
        let text = shown(
            "[mcp_servers.x]\ncommand = \"npx\"\nargs = [\"-y\", \"srv\", \"--api-key\", \"q7Zk1-arg-secret\", \"--token=tok-inline-secret\", \"--port\", \"8080\"]\n\
             [[hooks.pre_tool_use]]\nmatcher = \"exec\"\ncommand = \"notify --as ops hook-secret-987\"\n\
             [channels.hook]\nkind = \"webhook\"\nurl = \"https://hooks.example.com/services/T0/B0/webhook-path-secret\"\n\
             [providers.p]\nkind = \"openai\"\nbase_url = \"https://llm.example.com/v1?key=query-secret&x=1\"\n\
             [web]\nproxy = \"https://ghp_userinfotokensecret@git.example.com/x\"\n",
        );
        for secret in [
            "q7Zk1-arg-secret",
            "tok-inline-secret",
            "hook-secret-987",
            "webhook-path-secret",
            "query-secret",
            "ghp_userinfotokensecret",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for kept in [
            "\"--api-key\"",
            "\"--token=[redacted]\"",
            "\"8080\"",
            "https://hooks.example.com/[redacted]",
            "https://llm.example.com/v1?key=[redacted]&x=[redacted]",
            "https://[redacted]@git.example.com/x",
            "matcher = \"exec\"",
        ] {
            assert!(text.contains(kept), "{kept} not in {text}");
        }
    }

    #[test]
    fn flags_that_take_credentials() {
        for yes in [
            "--api-key",
            "--token",
            "--client_secret",
            "--password",
            "--auth-token",
            "-apikey",
        ] {
            assert!(is_secret_flag(yes), "{yes}");
        }
        for no in [
            "--port",
            "-y",
            "--verbose",
            "srv",
            "--keyboard-layout",
            "--compat",
            "--path",
        ] {
            assert!(!is_secret_flag(no), "{no}");
        }
    }
}

//! `[openai_compat.<name>]`: the OpenAI-compatible endpoints the `openai_compat_call` tool may
//! call with a request body the model writes (custom sampling parameters, a `response_format`,
//! an embeddings request, …).
//!
//! ```toml
//! [openai_compat.local]                    # the name the model calls it by
//! base_url = "http://127.0.0.1:8000/v1"    # http or https; the model adds only a path under it
//! model = "qwen3:8b"                       # sent when the body names no model
//! api_key_secret = "local-llm"             # talon secrets set local-llm (or api_key_env = "VAR")
//! timeout_secs = 60                        # 1 to 600
//!
//! [web]
//! allow_private = ["127.0.0.1"]            # needed for an endpoint on a private or loopback address
//! ```
//!
//! The model never chooses the host: it names one of these endpoints and at most a path under
//! its base URL. The request goes through the agent's `[web]` policy like `web_fetch`, so an
//! endpoint on a private or loopback address is reached only when its host is listed in
//! `[web] allow_private` (and `allow_domains` / `deny_domains` apply); its own port is allowed
//! for it alone, without `[web] allowed_ports`. The key is a secret: stored encrypted
//! (`api_key_secret`) or read from the environment (`api_key_env`), sent as
//! `Authorization: Bearer`, and scrubbed from every tool output. The tool exists only when at
//! least one endpoint is configured.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use talon_store::Store;
use talon_tools::web::openai_compat_call::Endpoint;

use crate::config::ConfigError;

/// The most seconds an endpoint may be given to answer.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// `[openai_compat.<name>]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiCompatSection {
    /// The endpoint's base URL (`https://api.example.com/v1`); paths are joined under it.
    pub base_url: String,
    /// The model sent when a request body names none.
    #[serde(default)]
    pub model: Option<String>,
    /// The stored secret holding the API key (`talon secrets set NAME`).
    #[serde(default)]
    pub api_key_secret: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Time allowed for one call, 1 to 600 seconds (default 60).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
}

fn default_timeout_secs() -> u64 {
    talon_tools::web::openai_compat_call::DEFAULT_TIMEOUT.as_secs()
}

impl OpenAiCompatSection {
    /// Checks what needs no store, so a mistake stops Talon at start-up naming its key.
    pub fn check(&self, name: &str) -> Result<(), ConfigError> {
        self.endpoint(name, None).map(|_| ())
    }

    /// The endpoint with `api_key`, or what is wrong with the section.
    fn endpoint(&self, name: &str, api_key: Option<String>) -> Result<Endpoint, ConfigError> {
        let at = format!("openai_compat.{name}");
        if self.api_key_secret.is_some() && self.api_key_env.is_some() {
            return Err(ConfigError(format!(
                "{at}: set api_key_secret or api_key_env, not both"
            )));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return Err(ConfigError(format!(
                "{at}.timeout_secs: {} is out of range; give 1 to {MAX_TIMEOUT_SECS} seconds",
                self.timeout_secs
            )));
        }
        Endpoint::new(
            name,
            &self.base_url,
            self.model.clone(),
            api_key,
            Duration::from_secs(self.timeout_secs),
        )
        .map_err(|e| ConfigError(format!("{at}: {e}")))
    }
}

/// Every configured endpoint, with its key read from the store or the environment. A named
/// secret that is missing is an error; an `api_key_env` naming an unset variable is a warning
/// (the endpoint is called without a key, and its refusal says so).
pub async fn endpoints(
    sections: &BTreeMap<String, OpenAiCompatSection>,
    store: &Store,
) -> Result<Vec<Endpoint>, ConfigError> {
    let mut endpoints = Vec::with_capacity(sections.len());
    for (name, section) in sections {
        section.check(name)?;
        let key = crate::chat_config::key_from(
            &format!("openai_compat.{name}"),
            "api_key",
            section.api_key_secret.as_deref(),
            section.api_key_env.as_deref(),
            store,
        )
        .await?;
        if key.is_none()
            && let Some(var) = &section.api_key_env
        {
            tracing::warn!(
                endpoint = %name,
                variable = %var,
                "openai_compat.{name}.api_key_env names an unset or empty variable; the endpoint is called without a key"
            );
        }
        endpoints.push(section.endpoint(name, key)?);
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read as `talon.toml` is, and its only `[openai_compat.*]` section.
    fn parse(text: &str) -> Result<OpenAiCompatSection, String> {
        use figment::providers::Format;
        let config: crate::config::Config =
            figment::Figment::from(figment::providers::Toml::string(text))
                .extract()
                .map_err(|e| e.to_string())?;
        config
            .openai_compat
            .into_values()
            .next()
            .ok_or_else(|| format!("no section in {text}"))
    }

    fn section(text: &str) -> OpenAiCompatSection {
        parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_section_is_checked_naming_its_key() {
        let good = section(
            "[openai_compat.local]\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\n",
        );
        assert_eq!(good.timeout_secs, 60);
        assert!(good.check("local").is_ok());
        for (text, says) in [
            (
                "[openai_compat.x]\nbase_url = \"ftp://h/\"\n",
                "openai_compat.x: base_url \"ftp://h/\" must be an http:// or https:// URL",
            ),
            (
                "[openai_compat.x]\nbase_url = \"https://h/\"\napi_key_secret = \"s\"\napi_key_env = \"V\"\n",
                "openai_compat.x: set api_key_secret or api_key_env, not both",
            ),
            (
                "[openai_compat.x]\nbase_url = \"https://h/\"\ntimeout_secs = 0\n",
                "openai_compat.x.timeout_secs: 0 is out of range",
            ),
            (
                "[openai_compat.x]\nbase_url = \"https://h/\"\ntimeout_secs = 601\n",
                "openai_compat.x.timeout_secs: 601 is out of range",
            ),
        ] {
            let error = section(text)
                .check("x")
                .err()
                .map(|e| e.0)
                .unwrap_or_default();
            assert!(error.starts_with(says), "{text}: {error}");
        }
        let unknown = parse("[openai_compat.x]\nbase_url = \"https://h/\"\napi_key = \"k\"\n");
        assert!(
            unknown.is_err_and(|e| e.contains("api_key")),
            "a key in the file itself is refused"
        );
    }
}

//! `[providers.<name>]` and `[chat]`: which model an agent talks to, and the loop's limits.
//!
//! ```toml
//! [providers.local]
//! kind = "openai"                      # or "anthropic"
//! base_url = "http://127.0.0.1:11434/v1"
//! api_key_env = "OLLAMA_API_KEY"       # or api_key_secret = "NAME" (talon secrets set NAME)
//! model = "qwen3"
//!
//! [chat]
//! provider = "local"                   # optional when only one provider is configured
//! max_iterations = 20
//! small_model = "qwen3:0.6b"           # answers WebFetch's prompt over a page (optional)
//!
//! [agents.reviewer]
//! provider = "local"                   # per agent: provider, model, system prompt
//! model = "qwen3:32b"
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use talon_agent::LoopConfig;
use talon_agent::provider::anthropic::Anthropic;
use talon_agent::provider::openai::OpenAi;
use talon_agent::provider::{Provider, ProviderKind, RetryPolicy};
use talon_store::Store;

use crate::config::{Config, ConfigError};

/// `[providers.<name>]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// The wire format: `openai` (Chat Completions) or `anthropic` (Messages).
    pub kind: ProviderKind,
    /// The API root; defaults to the vendor's own.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default `OPENAI_API_KEY` /
    /// `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The store secret holding the API key (wins over the environment).
    #[serde(default)]
    pub api_key_secret: Option<String>,
    /// The model used when the agent names none.
    #[serde(default)]
    pub model: Option<String>,
    /// Retries after the first attempt (default 4).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Abandon a stream silent this long (default 300).
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// The model's context window in tokens: stored sessions are compacted (their oldest turns
    /// summarised) as they near it. Unset: never compacted.
    #[serde(default)]
    pub context_window: Option<u64>,
}

/// `[chat]`: the loop's defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatSection {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub system: Option<String>,
    /// A small model on the agents' provider for side questions (WebFetch's prompt).
    pub small_model: Option<String>,
    pub max_iterations: u32,
    pub max_tokens: u32,
    pub token_budget: Option<u64>,
    pub max_parallel: usize,
    /// The share of the context window at which a session is compacted (0.1-0.95).
    pub compact_at: f64,
}

impl Default for ChatSection {
    fn default() -> Self {
        let d = LoopConfig::default();
        Self {
            provider: None,
            model: None,
            system: None,
            small_model: None,
            max_iterations: d.max_iterations,
            max_tokens: d.max_tokens,
            token_budget: d.token_budget,
            max_parallel: d.max_parallel,
            compact_at: d.compact_at,
        }
    }
}

/// The model an agent talks to.
pub struct AgentModel {
    pub provider: Arc<dyn Provider>,
    pub config: LoopConfig,
    /// The API key, to scrub from everything the model and the user see.
    pub api_key: Option<String>,
}

/// The provider, model and limits for `agent`.
pub async fn agent_model(
    config: &Config,
    providers: &BTreeMap<String, ProviderSection>,
    store: &Store,
    agent: &str,
) -> Result<AgentModel, ConfigError> {
    let agent_config = config.agents.entries.get(agent);
    let chosen = agent_config
        .and_then(|a| a.provider.clone())
        .or_else(|| config.chat.provider.clone())
        .or_else(|| {
            (providers.len() == 1)
                .then(|| providers.keys().next().cloned())
                .flatten()
        });
    let Some(name) = chosen else {
        return Err(ConfigError(if providers.is_empty() {
            "no model provider is configured: add a [providers.NAME] table with kind = \"openai\" or \"anthropic\" (see the README's chat section)".into()
        } else {
            format!(
                "several providers are configured ({}); choose one with [chat] provider = \"NAME\" or [agents.{agent}] provider",
                providers.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }));
    };
    let Some(section) = providers.get(&name) else {
        return Err(ConfigError(format!(
            "provider {name:?} is not configured; configured: {}",
            providers.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let model = agent_config
        .and_then(|a| a.model.clone())
        .or_else(|| config.chat.model.clone())
        .or_else(|| section.model.clone())
        .ok_or_else(|| {
            ConfigError(format!(
                "no model chosen for provider {name:?}: set [providers.{name}] model, [chat] model or [agents.{agent}] model"
            ))
        })?;
    let api_key = api_key(&name, section, store).await?;
    let mut policy = RetryPolicy::default();
    if let Some(n) = section.max_retries {
        policy.max_retries = n;
    }
    if let Some(secs) = section.idle_timeout_secs {
        policy.idle_timeout = Duration::from_secs(secs.max(1));
    }
    let provider: Arc<dyn Provider> = match section.kind {
        ProviderKind::Openai => Arc::new(
            OpenAi::new(
                &name,
                section
                    .base_url
                    .as_deref()
                    .unwrap_or("https://api.openai.com/v1"),
                api_key.as_deref(),
                policy,
            )
            .map_err(|e| ConfigError(e.to_string()))?,
        ),
        ProviderKind::Anthropic => Arc::new(
            Anthropic::new(
                &name,
                section
                    .base_url
                    .as_deref()
                    .unwrap_or("https://api.anthropic.com"),
                api_key.as_deref(),
                policy,
            )
            .map_err(|e| ConfigError(e.to_string()))?,
        ),
    };
    let chat = &config.chat;
    Ok(AgentModel {
        provider,
        config: LoopConfig {
            model,
            system: agent_config
                .and_then(|a| a.system.clone())
                .or_else(|| chat.system.clone()),
            max_iterations: chat.max_iterations.max(1),
            max_tokens: chat.max_tokens.max(1),
            token_budget: chat.token_budget,
            max_parallel: chat.max_parallel.max(1),
            context_window: section.context_window,
            compact_at: chat.compact_at.clamp(0.1, 0.95),
            small_model: agent_config
                .and_then(|a| a.small_model.clone())
                .or_else(|| chat.small_model.clone()),
        },
        api_key,
    })
}

/// The key from the store secret, else the environment; `None` for keyless local servers.
async fn api_key(
    name: &str,
    section: &ProviderSection,
    store: &Store,
) -> Result<Option<String>, ConfigError> {
    let var = section.api_key_env.clone().unwrap_or_else(|| {
        match section.kind {
            ProviderKind::Openai => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
        .to_string()
    });
    key_from(
        &format!("providers.{name}"),
        "api_key",
        section.api_key_secret.as_deref(),
        Some(&var),
        store,
    )
    .await
}

/// A key from the store secret `secret` (which must exist) if named, else from the environment
/// variable `env`; `None` when neither gives one. `section` names the setting in errors.
pub(crate) async fn key_from(
    section: &str,
    field: &str,
    secret: Option<&str>,
    env: Option<&str>,
    store: &Store,
) -> Result<Option<String>, ConfigError> {
    if let Some(secret) = secret {
        return match store.secret(secret).await {
            Ok(Some(key)) => Ok(Some(key)),
            Ok(None) => Err(ConfigError(format!(
                "{section}.{field}_secret: the store has no secret {secret:?}; set it with `talon secrets set {secret}`"
            ))),
            Err(e) => Err(ConfigError(format!(
                "{section}.{field}_secret: cannot read {secret:?}: {e}"
            ))),
        };
    }
    Ok(env
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.is_empty()))
}

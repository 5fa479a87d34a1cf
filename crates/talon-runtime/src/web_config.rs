//! `[web]`: what `web_fetch` / `WebFetch` may reach, and their limits.
//!
//! ```toml
//! [web]
//! allow_private = ["10.1.2.3", "192.168.0.0/16", "wiki.corp"]  # non-public hosts made reachable
//! allow_domains = ["docs.rs", ".rust-lang.org"]    # when set, only these
//! deny_domains = ["*.example.net"]
//! allowed_ports = [8080]                           # besides 80 and 443
//! max_body_bytes = 5242880
//! timeout_secs = 30
//! max_redirects = 5
//!
//! [web.agents.researcher]                          # one agent's lists over the above
//! allow_domains = ["arxiv.org"]
//!
//! [web.search]
//! providers = ["brave", "searxng", "duckduckgo"]   # asked in this order
//! searxng_url = "http://searx.internal:8080"
//! ```
//!
//! Brave and Tavily keys come from the environment (`BRAVE_API_KEY`, `TAVILY_API_KEY`) or the
//! encrypted store (`talon secrets set brave_api_key`, `tavily_api_key`). Without `providers`,
//! the chain is every provider that is configured (a key or a URL), then DuckDuckGo.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use talon_tools::web::{SearchProvider, WebConfig, WebPolicy};
use talon_web::search;

/// `[web]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSection {
    /// Private addresses, CIDRs or host names the web tools may reach (cloud metadata
    /// addresses never).
    pub allow_private: Vec<String>,
    /// When set, only these domain patterns.
    pub allow_domains: Option<Vec<String>>,
    /// Domain patterns never fetched.
    pub deny_domains: Vec<String>,
    /// Ports allowed besides 80 and 443.
    pub allowed_ports: Vec<u16>,
    /// Response bodies are read up to this many bytes, after decompression.
    pub max_body_bytes: usize,
    /// Time allowed for one fetch, redirects included.
    pub timeout_secs: u64,
    /// Redirects followed (at most 5).
    pub max_redirects: usize,
    /// `[web.agents.<name>]`: one agent's lists; what it leaves out comes from `[web]`.
    pub agents: HashMap<String, WebAgentSection>,
    /// `[web.search]`.
    pub search: SearchSection,
}

/// `[web.search]`: the search providers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchSection {
    /// Provider names in the order they are asked: `brave`, `duckduckgo`, `searxng`, `tavily`.
    pub providers: Option<Vec<String>>,
    /// The SearXNG instance (its JSON API must be enabled).
    pub searxng_url: Option<String>,
    /// Endpoint overrides (a local mirror, a test server).
    pub brave_endpoint: Option<String>,
    pub duckduckgo_endpoint: Option<String>,
    pub tavily_endpoint: Option<String>,
    /// Time allowed for one provider's answer (default 15 s).
    pub timeout_secs: Option<u64>,
}

/// API keys found for the keyed providers.
#[derive(Debug, Clone, Default)]
pub struct SearchKeys {
    pub brave: Option<String>,
    pub tavily: Option<String>,
}

/// What is wrong with `[web]` (the operator's to fix in the file).
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("[web.search] lists searxng but sets no searxng_url")]
    NoSearxngUrl,
    #[error(
        "[web.search] providers: unknown provider {0:?} (use brave, duckduckgo, searxng or tavily)"
    )]
    UnknownProvider(String),
    /// A domain, address or port list the web tools refuse (the message names it).
    #[error("{0}")]
    Policy(String),
}

impl SearchSection {
    /// The provider chain, or what is wrong with the configuration.
    pub fn providers(&self, keys: &SearchKeys) -> Result<Vec<SearchProvider>, WebConfigError> {
        let brave = || SearchProvider::Brave {
            endpoint: self
                .brave_endpoint
                .clone()
                .unwrap_or_else(|| search::brave::ENDPOINT.into()),
            api_key: keys.brave.clone(),
        };
        let tavily = || SearchProvider::Tavily {
            endpoint: self
                .tavily_endpoint
                .clone()
                .unwrap_or_else(|| search::tavily::ENDPOINT.into()),
            api_key: keys.tavily.clone(),
        };
        let ddg = || SearchProvider::DuckDuckGo {
            endpoint: self
                .duckduckgo_endpoint
                .clone()
                .unwrap_or_else(|| search::duckduckgo::ENDPOINT.into()),
        };
        let searxng = |url: &String| SearchProvider::Searxng {
            base_url: url.clone(),
        };
        let Some(names) = &self.providers else {
            let mut chain = Vec::new();
            if keys.brave.is_some() {
                chain.push(brave());
            }
            if let Some(url) = &self.searxng_url {
                chain.push(searxng(url));
            }
            if keys.tavily.is_some() {
                chain.push(tavily());
            }
            chain.push(ddg());
            return Ok(chain);
        };
        names
            .iter()
            .map(|name| match name.trim().to_ascii_lowercase().as_str() {
                "brave" => Ok(brave()),
                "tavily" => Ok(tavily()),
                "duckduckgo" | "ddg" => Ok(ddg()),
                "searxng" => self
                    .searxng_url
                    .as_ref()
                    .map(searxng)
                    .ok_or(WebConfigError::NoSearxngUrl),
                other => Err(WebConfigError::UnknownProvider(other.to_string())),
            })
            .collect()
    }
}

/// `[web.agents.<name>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebAgentSection {
    pub allow_private: Option<Vec<String>>,
    pub allow_domains: Option<Vec<String>>,
    pub deny_domains: Option<Vec<String>>,
}

impl Default for WebSection {
    fn default() -> Self {
        let fetch = talon_web::FetchConfig::default();
        Self {
            allow_private: Vec::new(),
            allow_domains: None,
            deny_domains: Vec::new(),
            allowed_ports: Vec::new(),
            max_body_bytes: fetch.max_body,
            timeout_secs: fetch.timeout.as_secs(),
            max_redirects: fetch.max_redirects,
            agents: HashMap::new(),
            search: SearchSection::default(),
        }
    }
}

impl WebSection {
    /// The web tools' settings (search keys as found by the caller).
    pub fn to_config(&self, keys: &SearchKeys) -> Result<WebConfig, WebConfigError> {
        let default = WebPolicy {
            allow_private: self.allow_private.clone(),
            allow_domains: self.allow_domains.clone(),
            deny_domains: self.deny_domains.clone(),
        };
        let agents = self
            .agents
            .iter()
            .map(|(name, a)| {
                let policy = WebPolicy {
                    allow_private: a
                        .allow_private
                        .clone()
                        .unwrap_or_else(|| default.allow_private.clone()),
                    allow_domains: a
                        .allow_domains
                        .clone()
                        .or_else(|| default.allow_domains.clone()),
                    deny_domains: a
                        .deny_domains
                        .clone()
                        .unwrap_or_else(|| default.deny_domains.clone()),
                };
                (name.clone(), policy)
            })
            .collect();
        let defaults = WebConfig::default();
        let config = WebConfig {
            default,
            agents,
            search: self.search.providers(keys)?,
            search_timeout: self
                .search
                .timeout_secs
                .map(|s| Duration::from_secs(s.max(1)))
                .unwrap_or(defaults.search_timeout),
            fetch: talon_web::FetchConfig {
                max_body: self.max_body_bytes.max(1),
                timeout: Duration::from_secs(self.timeout_secs.max(1)),
                max_redirects: self.max_redirects,
                extra_ports: self.allowed_ports.clone(),
                env_proxy: true,
                proxy: None,
            },
            resolver: defaults.resolver,
        };
        config.validate().map_err(WebConfigError::Policy)?;
        Ok(config)
    }
}

/// The Brave and Tavily keys: the environment first, then the encrypted store.
pub async fn search_keys(store: &talon_store::Store) -> SearchKeys {
    let find = |env: &'static str, secret: &'static str| async move {
        if let Some(v) = std::env::var(env).ok().filter(|v| !v.trim().is_empty()) {
            return Some(v);
        }
        match store.secret(secret).await {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(secret, error = %e, "cannot read a search API key from the store");
                None
            }
        }
    };
    SearchKeys {
        brave: find("BRAVE_API_KEY", "brave_api_key").await,
        tavily: find("TAVILY_API_KEY", "tavily_api_key").await,
    }
}

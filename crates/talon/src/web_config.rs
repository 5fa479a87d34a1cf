//! `[web]`: what `web_fetch` / `WebFetch` may reach, and their limits.
//!
//! ```toml
//! [web]
//! allow_private = ["10.1.2.3", "192.168.0.0/16"]  # non-public hosts made reachable
//! allow_domains = ["docs.rs", ".rust-lang.org"]    # when set, only these
//! deny_domains = ["*.example.net"]
//! allowed_ports = [8080]                           # besides 80 and 443
//! max_body_bytes = 5242880
//! timeout_secs = 30
//! max_redirects = 5
//!
//! [web.agents.researcher]                          # one agent's lists over the above
//! allow_domains = ["arxiv.org"]
//! ```

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use talon_tools::web::{WebConfig, WebPolicy};

/// `[web]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSection {
    /// Private hosts or CIDRs the web tools may reach (cloud metadata addresses never).
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
        }
    }
}

impl WebSection {
    /// The web tools' settings.
    pub fn to_config(&self) -> WebConfig {
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
        WebConfig {
            default,
            agents,
            fetch: talon_web::FetchConfig {
                max_body: self.max_body_bytes.max(1),
                timeout: Duration::from_secs(self.timeout_secs.max(1)),
                max_redirects: self.max_redirects,
                extra_ports: self.allowed_ports.clone(),
                env_proxy: true,
            },
            ..WebConfig::default()
        }
    }
}

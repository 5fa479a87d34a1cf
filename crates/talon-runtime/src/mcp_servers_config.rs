//! `[mcp_servers.<name>]`: external MCP servers whose tools Talon bridges, and the conversion of
//! both sources (this file and the store's `talon mcp-servers add`) into one bridge
//! configuration, checked by one rule (`McpServerSpec::check`).
//!
//! ```toml
//! [mcp]
//! dialect = "claude_code"          # tool names mcp__<server>__<tool>; "goclaw": mcp_<server>__<tool>
//! search_threshold = 40             # above this many bridged tools: mcp_tool_search finds them
//!
//! [mcp_servers.everything]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything", "stdio"]
//! env = { GREETING = "hi" }         # added to PATH, HOME, LANG, … (nothing else is passed)
//! startup_timeout_secs = 30
//! tool_timeout_secs = 60
//! required = false                  # true: Talon does not start without it
//!
//! [mcp_servers.remote]
//! url = "https://mcp.example.com/mcp"   # streamable HTTP; transport = "sse" for legacy servers
//! headers = { X-Team = "blue" }
//! bearer_token_env = "REMOTE_TOKEN"     # Authorization: Bearer $REMOTE_TOKEN
//! require_grant = true                  # only agents and users with a grant may use it
//!
//! [mcp_servers.signed]
//! url = "https://mcp.example.com/mcp"
//! oauth = true                          # then: talon mcp-servers login signed
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use talon_bridge::oauth::{OAuthConfig, TokenVault};
use talon_bridge::{Dialect, HttpConfig, ServerConfig, StdioConfig, Transport};
use talon_store::{McpServerSecrets, McpServerSpec, StoreError};

/// `[mcp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSection {
    /// `claude_code` (default) or `goclaw`.
    pub dialect: Option<String>,
    /// Above this many bridged tools only the ones found with `mcp_tool_search` are offered
    /// (default 40, GoClaw's).
    pub search_threshold: Option<usize>,
}

/// `[mcp_servers.<name>]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSection {
    /// `stdio`, `http` or `sse`; default `stdio` with a command, `http` with a URL.
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: HashMap<String, String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for `Authorization`.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// GoClaw dialect: replaces `mcp_<server>` in tool names.
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    #[serde(default)]
    pub tool_timeout_secs: Option<u64>,
    /// Characters of a result kept (default 100,000: Claude Code's 25,000 tokens).
    #[serde(default)]
    pub max_output_chars: Option<u64>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub require_grant: bool,
    /// Sign in with OAuth 2.1 (`talon mcp-servers login NAME`).
    #[serde(default)]
    pub oauth: bool,
    /// OAuth: a client registered beforehand (default: dynamic registration).
    #[serde(default)]
    pub oauth_client_id: Option<String>,
    /// OAuth: the environment variable holding that client's secret.
    #[serde(default)]
    pub oauth_client_secret_env: Option<String>,
    /// OAuth: Talon's client metadata document (an HTTPS URL), where the server supports them.
    #[serde(default)]
    pub oauth_client_metadata_url: Option<String>,
    #[serde(default)]
    pub oauth_scopes: Vec<String>,
    /// Streamable HTTP: the MCP protocol version to speak, or `auto` (the default): open with
    /// `server/discover` at 2026-07-28, and with `initialize` when the server does not take it.
    #[serde(default)]
    pub protocol_version: Option<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

/// Why a server section is not one Talon can bridge: the reason alone (the caller adds where the
/// section came from).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidServer(pub String);

/// What is wrong with `[mcp]` or an MCP server's configuration (the operator's to fix).
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error(
        "[mcp] dialect {0:?}: use \"claude_code\" (mcp__<server>__<tool>) or \"goclaw\" (mcp_<server>__<tool>)"
    )]
    Dialect(String),
    /// A `[mcp_servers.<name>]` section [`McpServerSection::checked_spec`] refuses.
    #[error("[mcp_servers.{name}]: {reason}")]
    Section { name: String, reason: String },
    /// A server record, from the file or the store, that cannot be bridged.
    #[error("MCP server {name:?}: {source}")]
    Server {
        name: String,
        #[source]
        source: StoreError,
    },
}

impl McpSection {
    /// The naming dialect.
    pub fn dialect(&self) -> Result<Dialect, McpConfigError> {
        match self.dialect.as_deref().unwrap_or("claude_code") {
            "claude_code" | "claude-code" => Ok(Dialect::ClaudeCode),
            "goclaw" => Ok(Dialect::GoClaw),
            other => Err(McpConfigError::Dialect(other.to_string())),
        }
    }
}

impl McpServerSection {
    /// The first environment variable the section takes a secret from that is not set. An
    /// optional server without it is skipped with a warning; a required one stops the start.
    pub fn missing_env(&self) -> Option<&str> {
        [&self.bearer_token_env, &self.oauth_client_secret_env]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .find(|var| std::env::var_os(var).is_none())
    }

    /// The server as the store's record and secrets, checked: one rule for every source
    /// (talon.toml, `talon mcp-servers add`, the HTTP API, which build a section too). The
    /// refusal is the reason alone ([`McpConfigError::Section`] adds the section's name).
    pub fn checked_spec(
        &self,
        name: &str,
    ) -> Result<(McpServerSpec, McpServerSecrets), InvalidServer> {
        self.check(name).map_err(InvalidServer)
    }

    fn check(&self, name: &str) -> Result<(McpServerSpec, McpServerSecrets), String> {
        // The bridge's naming rule: a name that could take another server's tool names is
        // refused where the server is added, not only when it would be bridged.
        talon_bridge::names::check_server_name(name)?;
        if let Some(prefix) = self.prefix.as_deref().filter(|p| !p.is_empty()) {
            talon_bridge::names::check_prefix(prefix)?;
        }
        let transport = transport_of(
            self.transport.as_deref(),
            self.command.is_some(),
            self.url.is_some(),
        )?;
        let mut spec = McpServerSpec::new(name, transport);
        spec.command = self.command.clone().unwrap_or_default();
        spec.args = self.args.clone();
        spec.url = self.url.clone().unwrap_or_default();
        spec.cwd = self
            .cwd
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        spec.tool_prefix = self.prefix.clone().unwrap_or_default();
        spec.startup_timeout_secs = self
            .startup_timeout_secs
            .unwrap_or(spec.startup_timeout_secs);
        spec.tool_timeout_secs = self.tool_timeout_secs.unwrap_or(spec.tool_timeout_secs);
        spec.max_output_chars = self.max_output_chars.unwrap_or(spec.max_output_chars);
        spec.required = self.required;
        spec.require_grant = self.require_grant;
        spec.enabled = self.enabled;
        spec.oauth = self.oauth;
        spec.oauth_client_id = self.oauth_client_id.clone().unwrap_or_default();
        spec.oauth_client_metadata_url = self.oauth_client_metadata_url.clone().unwrap_or_default();
        spec.oauth_scopes = self.oauth_scopes.clone();
        spec.protocol_version = self
            .protocol_version
            .clone()
            .filter(|v| v != "auto")
            .unwrap_or_default();
        let oauth_client_secret =
            match &self.oauth_client_secret_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    format!("oauth_client_secret_env names {var}, which is not set")
                })?),
                None => None,
            };
        let mut headers = self.headers.clone();
        if let Some(var) = &self.bearer_token_env {
            let token = std::env::var(var)
                .map_err(|_| format!("bearer_token_env names {var}, which is not set"))?;
            headers.insert("Authorization".into(), format!("Bearer {token}"));
        }
        let secrets = McpServerSecrets {
            env: self.env.clone().into_iter().collect(),
            headers,
            oauth_client_secret,
        };
        spec.check().map_err(|e| e.to_string())?;
        Ok((spec, secrets))
    }
}

/// The transport named, or the one a command (stdio) or a URL (streamable HTTP) implies.
fn transport_of(named: Option<&str>, command: bool, url: bool) -> Result<String, String> {
    match (named, command, url) {
        (Some(t), _, _) => Ok(t.to_string()),
        (None, true, false) => Ok("stdio".into()),
        (None, false, true) => Ok("http".into()),
        _ => Err("give either a command (a stdio server) or a URL (a remote one)".into()),
    }
}

/// The bridge configuration of a checked server record and its secrets.
pub fn server_config(
    spec: &McpServerSpec,
    secrets: &McpServerSecrets,
    vault: &Arc<dyn TokenVault>,
) -> Result<ServerConfig, McpConfigError> {
    let refused = |source| McpConfigError::Server {
        name: spec.name.clone(),
        source,
    };
    spec.check().map_err(refused)?;
    talon_store::check_headers(&secrets.headers).map_err(refused)?;
    let http = || HttpConfig {
        url: spec.url.clone(),
        headers: secrets.headers.clone(),
        bearer: None,
        oauth: spec.oauth.then(|| OAuthConfig {
            client_id: (!spec.oauth_client_id.is_empty()).then(|| spec.oauth_client_id.clone()),
            client_secret: secrets.oauth_client_secret.clone(),
            client_metadata_url: (!spec.oauth_client_metadata_url.is_empty())
                .then(|| spec.oauth_client_metadata_url.clone()),
            scopes: spec.oauth_scopes.clone(),
            vault: Arc::clone(vault),
        }),
        protocol_version: (!spec.protocol_version.is_empty())
            .then(|| spec.protocol_version.clone()),
    };
    let transport = match spec.transport.as_str() {
        "http" => Transport::Http(http()),
        "sse" => Transport::Sse(http()),
        _ => Transport::Stdio(StdioConfig {
            command: spec.command.clone(),
            args: spec.args.clone(),
            env: secrets.env.clone().into_iter().collect(),
            cwd: (!spec.cwd.is_empty()).then(|| PathBuf::from(&spec.cwd)),
        }),
    };
    let mut config = ServerConfig::new(spec.name.clone(), transport);
    config.prefix = (!spec.tool_prefix.is_empty()).then(|| spec.tool_prefix.clone());
    config.required = spec.required;
    config.require_grant = spec.require_grant;
    config.startup_timeout = Duration::from_secs(spec.startup_timeout_secs);
    config.call_timeout = Duration::from_secs(spec.tool_timeout_secs);
    config.max_output_chars = usize::try_from(spec.max_output_chars).unwrap_or(usize::MAX);
    Ok(config)
}

/// The configured servers as records (enabled or not), in name order.
pub fn specs(
    sections: &BTreeMap<String, McpServerSection>,
) -> Result<Vec<(McpServerSpec, McpServerSecrets)>, McpConfigError> {
    sections
        .iter()
        .filter(|(_, section)| section.missing_env().is_none() || section.required)
        .map(|(name, section)| {
            section
                .checked_spec(name)
                .map_err(|InvalidServer(reason)| McpConfigError::Section {
                    name: name.clone(),
                    reason,
                })
        })
        .collect()
}

/// The enabled servers, in name order, or the first configuration mistake.
pub fn servers(
    sections: &BTreeMap<String, McpServerSection>,
    vault: &Arc<dyn TokenVault>,
) -> Result<Vec<ServerConfig>, McpConfigError> {
    for (name, section) in sections.iter().filter(|(_, s)| !s.required) {
        if let Some(var) = section.missing_env() {
            tracing::warn!(
                "[mcp_servers.{name}] is skipped: it names the environment variable {var}, which is not set (set it, or required = true to refuse starting without the server)"
            );
        }
    }
    specs(sections)?
        .iter()
        .filter(|(spec, _)| spec.enabled)
        .map(|(spec, secrets)| server_config(spec, secrets, vault))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22 item 10: a name that could take another server's bridged tool names (`a__b`
    /// takes `mcp__a__b__c` from server `a`) is refused where a server is added: `talon.toml`,
    /// `talon mcp-servers add` and the HTTP API all build their record through `checked_spec`.
    #[test]
    fn h22_10_ambiguous_server_names_are_refused_where_servers_are_added() {
        let section = |prefix: Option<&str>| -> McpServerSection {
            serde_json::from_value(serde_json::json!({"command": "mcp-server", "prefix": prefix}))
                .unwrap()
        };
        for name in ["a__b", "a_", "_a", "a-_b"] {
            let error = section(None).checked_spec(name).unwrap_err().0;
            assert!(error.contains(name), "{error}");
        }
        let error = section(Some("gh__x")).checked_spec("gh").unwrap_err().0;
        assert!(error.contains("tool prefix"), "{error}");
        assert!(section(Some("github")).checked_spec("gh").is_ok());
        assert!(section(None).checked_spec("my-server").is_ok());
    }

    /// A vault for servers that sign in with nothing.
    struct NoVault;

    impl TokenVault for NoVault {
        fn load<'a>(&'a self, _: &'a str) -> talon_bridge::oauth::VaultFuture<'a, Option<String>> {
            Box::pin(async { Ok(None) })
        }
        fn save<'a>(&'a self, _: &'a str, _: String) -> talon_bridge::oauth::VaultFuture<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn clear<'a>(&'a self, _: &'a str) -> talon_bridge::oauth::VaultFuture<'a, ()> {
            Box::pin(async { Ok(()) })
        }
    }

    /// Issue 35: `[mcp_servers.x] protocol_version` is accepted (`auto`, the default, or a
    /// known version) for streamable HTTP servers, and reaches the bridge's configuration.
    #[test]
    fn the_protocol_version_is_configurable() {
        let section = |extra: serde_json::Value| -> McpServerSection {
            let mut v = serde_json::json!({"url": "https://mcp.example.test/mcp"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(v).unwrap()
        };
        let (spec, _) = section(serde_json::json!({"protocol_version": "auto"}))
            .checked_spec("x")
            .unwrap();
        assert_eq!(spec.protocol_version, "");
        let (spec, secrets) = section(serde_json::json!({"protocol_version": "2026-07-28"}))
            .checked_spec("x")
            .unwrap();
        assert_eq!(spec.protocol_version, "2026-07-28");
        let vault: Arc<dyn TokenVault> = Arc::new(NoVault);
        let config = server_config(&spec, &secrets, &vault).unwrap();
        match &config.transport {
            Transport::Http(http) => {
                assert_eq!(http.protocol_version.as_deref(), Some("2026-07-28"));
            }
            other => panic!("{other:?}"),
        }
        let error = section(serde_json::json!({"protocol_version": "1999-01-01"}))
            .checked_spec("x")
            .unwrap_err()
            .0;
        assert!(
            error.contains("auto") && error.contains("2026-07-28"),
            "{error}"
        );
        let stdio: McpServerSection = serde_json::from_value(
            serde_json::json!({"command": "srv", "protocol_version": "2025-06-18"}),
        )
        .unwrap();
        assert!(
            stdio
                .checked_spec("x")
                .unwrap_err()
                .0
                .contains("streamable HTTP")
        );
    }
}

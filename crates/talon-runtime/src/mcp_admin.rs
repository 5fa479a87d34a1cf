//! The MCP administration service's typed operations: stored servers, grants and access
//! requests. `talon mcp-servers` and the gateway's `/v1/mcp-*` routes ([`crate::mcp_admin_http`])
//! call these, so a rule (a name `talon.toml` already uses is not stored, a grant or a request
//! names a server that exists) holds on both, and each caller only translates
//! [`McpAdminError`]: HTTP into a status, the CLI into an exit code.

use serde_json::{Value, json};
use talon_store::{
    GrantSpec, McpAccessRequest, McpGrant, McpServerSpec, Store, StoreError, SubjectKind,
};

use crate::config::Config;
use crate::mcp_servers_config::McpServerSection;

/// Why an MCP administration operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum McpAdminError {
    /// The request is wrong; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// The name belongs to a server of `talon.toml`, which only the file changes.
    #[error("{name} is configured in talon.toml; {hint}")]
    Configured { name: String, hint: &'static str },
    /// What the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The store failed (an unreachable database among others).
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for McpAdminError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { .. } => McpAdminError::Invalid(e.to_string()),
            StoreError::NotFound { .. } => McpAdminError::NotFound(e.to_string()),
            e => McpAdminError::Store(e),
        }
    }
}

impl McpAdminError {
    /// Whether the caller's request was at fault (a usage error), not the service.
    pub fn is_usage(&self) -> bool {
        !matches!(self, McpAdminError::Store(_))
    }
}

/// The operations over `store`, with the names `talon.toml` configures.
pub struct McpAdmin<'a> {
    pub store: &'a Store,
    pub configured: &'a [String],
}

impl McpAdmin<'_> {
    fn configured(&self, name: &str) -> bool {
        self.configured.iter().any(|c| c == name)
    }

    /// Stores the server `section` describes as `name` (or with `replace` changes it); its
    /// secrets are written only when `secrets_given` (a change keeps the stored ones otherwise).
    pub async fn add_server(
        &self,
        name: &str,
        section: McpServerSection,
        replace: bool,
        secrets_given: bool,
    ) -> Result<McpServerSpec, McpAdminError> {
        if self.configured(name) {
            return Err(McpAdminError::Configured {
                name: name.to_string(),
                hint: "choose another name",
            });
        }
        // A server section like talon.toml's, turned into a record by its one rule.
        let (spec, secrets) = section
            .checked_spec(name)
            .map_err(|e| McpAdminError::Invalid(e.to_string()))?;
        self.store
            .put_mcp_server(&spec, secrets_given.then_some(&secrets), replace)
            .await?;
        Ok(spec)
    }

    /// Removes the stored server `name` with its grants.
    pub async fn remove_server(&self, name: &str) -> Result<(), McpAdminError> {
        if self.configured(name) {
            return Err(McpAdminError::Configured {
                name: name.to_string(),
                hint: "remove it there",
            });
        }
        if self.store.remove_mcp_server(name).await? {
            Ok(())
        } else {
            Err(McpAdminError::NotFound(format!(
                "no stored MCP server named {name}"
            )))
        }
    }

    /// Refuses a server neither `talon.toml` nor the store knows.
    pub async fn known_server(&self, name: &str) -> Result<(), McpAdminError> {
        if self.configured(name) || self.store.mcp_server(name).await?.is_some() {
            return Ok(());
        }
        Err(McpAdminError::NotFound(format!(
            "no MCP server named {name}; `talon mcp-servers list` (GET /v1/mcp-servers) shows them"
        )))
    }

    /// Creates or replaces a grant of a known server.
    pub async fn put_grant(&self, grant: &GrantSpec) -> Result<(), McpAdminError> {
        self.known_server(&grant.server).await?;
        Ok(self.store.put_mcp_grant(grant).await?)
    }

    /// Withdraws the grant of `server` to `kind` `subject`.
    pub async fn remove_grant(
        &self,
        server: &str,
        kind: SubjectKind,
        subject: &str,
    ) -> Result<(), McpAdminError> {
        if self.store.remove_mcp_grant(server, kind, subject).await? {
            Ok(())
        } else {
            Err(McpAdminError::NotFound(format!(
                "{} {subject} has no grant for {server}",
                kind.as_str()
            )))
        }
    }

    /// Files a request for access to a known server; its id.
    pub async fn request_access(
        &self,
        server: &str,
        (kind, subject): (SubjectKind, &str),
        tools: &[String],
        reason: &str,
        by: &str,
    ) -> Result<i64, McpAdminError> {
        self.known_server(server).await?;
        Ok(self
            .store
            .request_mcp_access(server, kind, subject, tools, reason, by)
            .await?)
    }
}

/// A grant as both the API and `talon mcp-servers grants --json` show it.
pub fn grant_json(g: &McpGrant) -> Value {
    json!({"server": g.server, "kind": g.kind.as_str(), "subject": g.subject,
        "enabled": g.enabled, "allow": g.tool_allow, "deny": g.tool_deny,
        "granted_by": g.granted_by, "updated_at": g.updated_at})
}

/// An access request as both the API and `talon mcp-servers requests --json` show it.
pub fn request_json(r: &McpAccessRequest) -> Value {
    json!({"id": r.id, "server": r.server, "kind": r.kind.as_str(), "subject": r.subject,
        "tools": r.tool_allow, "reason": r.reason, "requested_by": r.requested_by,
        "status": r.status.as_str(), "reviewed_by": r.reviewed_by,
        "review_note": r.review_note, "created_at": r.created_at, "reviewed_at": r.reviewed_at})
}

/// One row of `list`.
fn row(spec: &McpServerSpec, source: &str, secret_names: Vec<String>) -> Value {
    let target = if spec.transport == "stdio" {
        std::iter::once(spec.command.as_str())
            .chain(spec.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        spec.url.clone()
    };
    json!({"name": spec.name, "source": source, "transport": spec.transport, "target": target,
        "enabled": spec.enabled, "required": spec.required, "require_grant": spec.require_grant,
        "oauth": spec.oauth, "secrets": secret_names})
}

/// Every server `talon mcp-servers list` shows: those of `talon.toml`, then the stored ones it
/// does not shadow, each with its secrets' names (never values) and, for OAuth, whether it is
/// signed in.
pub async fn listed_servers(config: &Config, store: &Store) -> Result<Vec<Value>, McpAdminError> {
    let from_file = crate::mcp_servers_config::specs(&config.mcp_servers)
        .map_err(|e| McpAdminError::Invalid(e.to_string()))?;
    let stored = store.mcp_servers().await?;
    let mut rows: Vec<_> = from_file
        .iter()
        .map(|(spec, secrets)| {
            let names = secrets
                .env
                .keys()
                .chain(secrets.headers.keys())
                .cloned()
                .collect();
            row(spec, "talon.toml", names)
        })
        .collect();
    let shadowed: std::collections::BTreeSet<&String> = config.mcp_servers.keys().collect();
    rows.extend(
        stored
            .iter()
            .filter(|s| !shadowed.contains(&s.spec.name))
            .map(|s: &talon_store::StoredMcpServer| {
                let names = s.env_names.iter().chain(&s.header_names).cloned().collect();
                row(&s.spec, "store", names)
            }),
    );
    let vault = crate::mcp_store::vault(store);
    for row in rows.iter_mut().filter(|r| r["oauth"] == json!(true)) {
        let name = row["name"].as_str().unwrap_or_default().to_string();
        row["oauth"] = match vault.load(&name).await {
            Ok(Some(_)) => json!("signed in"),
            Ok(None) => json!("needs login"),
            Err(e) => json!(format!("unknown: {e}")),
        };
    }
    Ok(rows)
}

/// The bridge configuration of server `name`, from `talon.toml` or the store, secrets
/// included (`talon mcp-servers test`, `login`).
pub async fn server_config(
    config: &Config,
    store: &Store,
    name: &str,
) -> Result<talon_bridge::ServerConfig, McpAdminError> {
    let vault = crate::mcp_store::vault(store);
    let invalid = |e: &dyn std::fmt::Display| McpAdminError::Invalid(e.to_string());
    if let Some(section) = config.mcp_servers.get(name) {
        let (spec, secrets) = section
            .checked_spec(name)
            .map_err(|e| invalid(&format!("[mcp_servers.{name}]: {e}")))?;
        return crate::mcp_servers_config::server_config(&spec, &secrets, &vault)
            .map_err(|e| invalid(&e));
    }
    let Some(stored) = store.mcp_server(name).await? else {
        return Err(McpAdminError::NotFound(format!(
            "no MCP server named {name}; `talon mcp-servers list` shows them"
        )));
    };
    let secrets = store.mcp_server_secrets(&stored).await?;
    crate::mcp_servers_config::server_config(&stored.spec, &secrets, &vault)
        .map_err(|e| invalid(&e))
}

/// The OAuth settings of server `name`; refused when it does not sign in with OAuth.
pub async fn oauth_settings(
    config: &Config,
    store: &Store,
    name: &str,
) -> Result<(talon_bridge::HttpConfig, talon_bridge::oauth::OAuthConfig), McpAdminError> {
    match server_config(config, store, name).await?.transport {
        talon_bridge::Transport::Http(http) => match http.oauth.clone() {
            Some(oauth) => Ok((http, oauth)),
            None => Err(McpAdminError::Invalid(format!(
                "{name} does not sign in with OAuth: set oauth = true (talon.toml) or add it with --oauth"
            ))),
        },
        _ => Err(McpAdminError::Invalid(format!(
            "{name} is not a streamable HTTP server; only those sign in with OAuth"
        ))),
    }
}

//! The store's side of the MCP bridge: grants read for every bridged call, and servers added,
//! changed and removed at runtime reaching the running bridge.
//!
//! A running Talon follows the store's `mcp_revision`: it reads it every [`POLL_EVERY`] and, on
//! PostgreSQL, also wakes at once on `NOTIFY talon_mcp`, so a change made by any process (the
//! CLI, the HTTP API, another gateway sharing the database) reaches every gateway.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use talon_bridge::access::{Access, Caller, Grant, GrantsFuture};
use talon_bridge::oauth::{TokenVault, VaultFuture};
use talon_bridge::{Bridge, ServerConfig};
use talon_store::{McpGrant, Store, StoreError, SubjectKind};
use tokio::sync::Notify;

/// How often a running Talon reads the revision when no notification arrives.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// Grants from the store, read for each call so a change holds on the next one.
#[derive(Debug, Clone)]
pub struct StoreAccess {
    pub store: Store,
}

fn grant(g: McpGrant) -> Grant {
    let kind = match g.kind {
        SubjectKind::Agent => "agent",
        SubjectKind::User => "user",
    };
    Grant {
        subject: format!("{kind} {:?}", g.subject),
        enabled: g.enabled,
        allow: g.tool_allow,
        deny: g.tool_deny,
    }
}

impl Access for StoreAccess {
    fn grants<'a>(&'a self, server: &'a str, caller: Caller<'a>) -> GrantsFuture<'a> {
        Box::pin(async move {
            self.store
                .mcp_grants_for_current(server, caller.agent, caller.user)
                .await
                .map(|grants| grants.into_iter().map(grant).collect())
                .map_err(|e| e.to_string())
        })
    }
}

/// OAuth tokens in the store, each server's in the encrypted secret `mcp-oauth/<server>`.
#[derive(Debug, Clone)]
pub struct StoreVault {
    pub store: Store,
}

impl TokenVault for StoreVault {
    fn load<'a>(&'a self, server: &'a str) -> VaultFuture<'a, Option<String>> {
        Box::pin(async move {
            self.store
                .secret(&talon_store::mcp_oauth_secret(server))
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn save<'a>(&'a self, server: &'a str, tokens: String) -> VaultFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .set_secret(&talon_store::mcp_oauth_secret(server), &tokens)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn clear<'a>(&'a self, server: &'a str) -> VaultFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .delete_secret(&talon_store::mcp_oauth_secret(server))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// The vault every server's OAuth tokens go to.
pub fn vault(store: &Store) -> Arc<dyn TokenVault> {
    Arc::new(StoreVault {
        store: store.clone(),
    })
}

/// The enabled stored servers as bridge configurations, skipping `shadowed` names (servers in
/// `talon.toml` win) and logging the ones that cannot be used.
pub async fn stored_servers(
    store: &Store,
    shadowed: &BTreeSet<String>,
    vault: &Arc<dyn TokenVault>,
) -> Result<Vec<ServerConfig>, StoreError> {
    let mut out = Vec::new();
    for stored in store.mcp_servers().await? {
        if !stored.spec.enabled {
            continue;
        }
        if shadowed.contains(&stored.spec.name) {
            tracing::warn!(server = %stored.spec.name, "a stored MCP server has the name of one in talon.toml; the file's wins");
            continue;
        }
        let secrets = match store.mcp_server_secrets(&stored).await {
            Ok(secrets) => secrets,
            Err(e) => {
                tracing::error!(server = %stored.spec.name, error = %e, "MCP server skipped: its secrets cannot be read");
                continue;
            }
        };
        match crate::mcp_servers_config::server_config(&stored.spec, &secrets, vault) {
            Ok(config) => out.push(config),
            Err(e) => tracing::error!(error = %e, "stored MCP server skipped"),
        }
    }
    Ok(out)
}

/// Keeps the bridge's stored servers equal to the store's, until the bridge is dropped, and on
/// every change retries the servers (of the store or of `from_file`) it could not connect, such
/// as one that needed a login. `current` are the stored servers the bridge was started with, and
/// `seen` the revision read before them (a change made meanwhile is then not missed).
pub async fn follow(
    store: Store,
    bridge: std::sync::Weak<Bridge>,
    shadowed: BTreeSet<String>,
    vault: Arc<dyn TokenVault>,
    from_file: Vec<ServerConfig>,
    mut current: BTreeMap<String, ServerConfig>,
    mut seen: Option<i64>,
) {
    let wake = Arc::new(Notify::new());
    store.notify_mcp_changes(Arc::clone(&wake));
    loop {
        let _ = tokio::time::timeout(POLL_EVERY, wake.notified()).await;
        let Some(bridge) = bridge.upgrade() else {
            return;
        };
        let revision = match store.mcp_revision().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the MCP revision");
                continue;
            }
        };
        if seen == Some(revision) {
            continue;
        }
        seen = Some(revision);
        let wanted = match stored_servers(&store, &shadowed, &vault).await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the stored MCP servers");
                continue;
            }
        };
        let wanted: BTreeMap<String, ServerConfig> =
            wanted.into_iter().map(|c| (c.name.clone(), c)).collect();
        for name in current.keys() {
            if !wanted.contains_key(name) {
                tracing::info!(server = %name, "MCP server removed");
                bridge.remove(name);
            }
        }
        let bridged = bridge.server_names();
        for (name, config) in &wanted {
            if current.get(name) != Some(config) {
                tracing::info!(server = %name, "MCP server added or changed; connecting");
                bridge.add_in_background(config.clone());
            } else if !bridged.contains(name) {
                tracing::info!(server = %name, "retrying an MCP server that was not connected");
                bridge.add_in_background(config.clone());
            }
        }
        for config in from_file.iter().filter(|c| !bridged.contains(&c.name)) {
            tracing::info!(server = %config.name, "retrying an MCP server that was not connected");
            bridge.add_in_background(config.clone());
        }
        current = wanted;
    }
}

//! Opening the store for a command: the database (SQLite in the data directory unless
//! `TALON_DATABASE_URL` or `database.url` names PostgreSQL), migrated, with the secrets key.

use std::path::{Path, PathBuf};

use talon_store::{EncryptionKey, KeySource, Store, StoreConfig, StoreError};

use crate::config::Config;

/// The store configuration for this process.
pub fn store_config(config: &Config, data_dir: &Path) -> StoreConfig {
    let url = std::env::var("TALON_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| config.database.url.clone().filter(|u| !u.is_empty()));
    match url {
        Some(url) => {
            let mut store = StoreConfig::url(url);
            store.schema = config.database.schema.clone();
            store
        }
        None => StoreConfig::sqlite_in(data_dir),
    }
}

/// Why the store could not be opened for a command.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the data directory {}: {source}", path.display())]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database (unreachable, too new, a failed migration) or the secrets key
    /// ([`StoreError::is_unavailable`] tells an outage apart).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OpenError {
    /// Whether the database could not be reached (the same command may work later).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, OpenError::Store(e) if e.is_unavailable())
    }
}

/// Creates the data directory if needed, private to its owner (mode 0700): it holds the
/// database, the secrets key and the per-agent workspaces. An existing directory is left as is.
pub fn create_data_dir(data_dir: &Path) -> Result<(), OpenError> {
    use std::os::unix::fs::DirBuilderExt;
    if data_dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(|source| OpenError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })
}

/// Opens, migrates and unlocks the store, creating the data directory and the key on first start.
pub async fn open(config: &Config, data_dir: &Path) -> Result<Store, OpenError> {
    create_data_dir(data_dir)?;
    let store = crate::spinner::while_waiting(
        "opening the database (the first start creates and migrates it)…",
        Store::open(&store_config(config, data_dir)),
    )
    .await?;
    let (key, source) = EncryptionKey::load_or_create(data_dir)?;
    if let KeySource::Generated(path) = &source {
        tracing::warn!(
            path = %path.display(),
            "generated a new encryption key for secrets (mode 0600); back it up: without it stored secrets cannot be read"
        );
    }
    Ok(store.unlock(key).await?)
}

/// The store as the agent directory every entry point checks agents against.
pub struct StoreAgents(pub Store);

impl talon_core::AgentDirectory for StoreAgents {
    fn exists<'a>(&'a self, key: &'a str) -> futures::future::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0
                .agent(key)
                .await
                .map(|a| a.is_some())
                .map_err(|e| e.to_string())
        })
    }
}

/// The gateway's readiness check (`GET /readyz`): the store answers within
/// [`talon_store::PING_LIMIT`]. The route needs no token, so its answer names no database
/// detail; the error goes to the log.
pub fn readiness(store: Store) -> talon_gateway::Readiness {
    std::sync::Arc::new(move || {
        let store = store.clone();
        Box::pin(async move {
            store.ping().await.map_err(|e| {
                tracing::warn!(error = %e, "not ready: the database does not answer");
                "the database does not answer".to_string()
            })
        })
    })
}

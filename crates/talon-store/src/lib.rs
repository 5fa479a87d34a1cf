//! Talon's storage: one [`Store`] over two engines.
//!
//! * **SQLite** (the embedded default): a file in the data directory, WAL mode, created and
//!   migrated on first start, nothing to install; the file and its WAL are private to their
//!   owner (mode 0600).
//! * **PostgreSQL** (`TALON_DATABASE_URL=postgres://…`): for many Talon instances sharing one
//!   database. Migrations take an advisory lock; every read-modify-write is a single conditional
//!   statement or runs under a row lock, never read-then-write.
//!
//! Queries are written once against sqlx's `Any` driver with runtime SQL (no live database at
//! build time). Only full-text search and the schema's per-engine fragments (one migration file
//! per version, `migrations/`, with per-engine tokens and blocks) differ per engine. Integers are `i64` everywhere and times are Unix milliseconds, so one Rust type reads
//! both engines.
//!
//! # Charter
//!
//! - **Owns:** SQLite and PostgreSQL: migrations, sessions and turn checkpoints, runs and their
//!   outbox, leases, teams, cron, secrets, memory, audit.
//! - **Never contains:** business rules beyond what one statement or transaction must hold across
//!   gateways; no tool, HTTP or runtime types.
//! - **A new feature goes:** a new durable record (a browser profile, a media job) is a table with
//!   a migration (one file, both engines) and a test in the store suite on both.

mod agent_links;
mod agents;
mod audit;
mod cli_credentials;
mod cron;
mod crypto;
mod custom_tools;
mod exec_allow;
mod fields;
mod handoff;
mod knowledge_graph;
mod leases;
mod listen;
mod locked;
mod mcp_grants;
mod mcp_servers;
mod memory;
mod migrate;
mod pg_tls;
mod private_file;
mod runs;
mod secrets;
pub use secrets::RotatedKey;
mod sessions;
mod skills;
mod teams;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions};

pub use agent_links::{AgentLink, LinkDirection, LinkSettings};
pub use agents::{AgentRecord, AgentType};
pub use audit::AuditEntry;
pub use cli_credentials::{
    CLI_CREDENTIAL_SECRET_PREFIX, CliCredential, CliCredentialSpec, DEFAULT_CLI_TIMEOUT_SECS,
    GrantedCredential, MAX_CLI_TIMEOUT_SECS, cli_credential_secret,
};
pub use cron::{
    CRON_CHANNEL, CronDelivery, CronJob, CronJobPatch, CronOutcome, CronRun, CronRunStatus,
    MAX_JOBS_PER_USER, MissedPolicy, NewCronJob, Schedule, ScheduleKind, schedule as cron_schedule,
};
pub use crypto::{EncryptionKey, KEY_ENV, KEY_FILE, KeySource};
pub use custom_tools::{
    CUSTOM_TOOL_SECRET_PREFIX, CUSTOM_TOOLS_CHANNEL, CustomToolSpec, MAX_CUSTOM_COMMAND,
    MAX_CUSTOM_DESCRIPTION, MAX_CUSTOM_TIMEOUT_SECS, StoredCustomTool, check_custom_tool_name,
    custom_tool_secret,
};
pub use exec_allow::MAX_ALLOWED_COMMAND;
pub use handoff::HandoffRoute;
pub use knowledge_graph::{
    ExtractionJob, GraphEntity, GraphHits, GraphRelation, MAX_EXTRACTION_ATTEMPTS, MAX_HOPS,
    NewEntity, NewRelation,
};
pub use mcp_grants::{GrantSpec, McpAccessRequest, McpGrant, RequestStatus, SubjectKind};
pub use mcp_servers::{
    MCP_CHANNEL, MCP_PROTOCOL_VERSIONS, MCP_SERVER_SECRET_PREFIX, McpServerSecrets, McpServerSpec,
    StoredMcpServer, check_headers, mcp_oauth_secret, mcp_server_secret, valid_server_name,
};
pub use memory::{
    CHUNK_CHARS, CHUNK_OVERLAP, Chunk, ChunkVector, EmbeddingProgress, MAX_MEMORY_QUERY_BYTES,
    MAX_MEMORY_QUERY_TERMS, MEMORY_SEARCH_TIMEOUT, MemoryDocument, MemoryHit, UpdateError, chunk,
    memory_query_terms, memory_search_slots,
};
pub use migrate::{MIGRATIONS, MigrationSourceError, MigrationStatus};
pub use runs::{
    Delivery, NewRun, RUNS_CHANNEL, RunLimits, RunRecord, RunRefused, RunStatus, RunUsage,
    RunsCancelled,
};
pub use sessions::{SessionRecord, TurnStart};
pub use skills::{NewSkill, StoredSkill};
pub use teams::{
    NewTask, TaskFilter, TaskOrder, TaskRecord, TaskStatus, TeamMember, TeamMessage, TeamRecord,
};

/// Why a store operation failed. Messages name what to fix.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot connect to the database ({target}): {source}")]
    Connect {
        target: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error(
        "the database is at schema version {found}, newer than this Talon binary supports ({supported}); upgrade Talon instead of downgrading the database"
    )]
    TooNew { found: i64, supported: i64 },
    #[error(
        "migration {version} ({name}) is not the one applied to this database: its file was changed after it was applied; restore it, and put the change in a new migration"
    )]
    MigrationChanged { version: i64, name: &'static str },
    /// A migration's source has a malformed per-engine fragment (caught by the unit tests; a
    /// shipped binary's sources render).
    #[error("migration {version} ({name}) cannot be rendered: {source}")]
    MigrationSource {
        version: i64,
        name: &'static str,
        #[source]
        source: MigrationSourceError,
    },
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: i64,
        name: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error(
        "invalid database URL {0:?}: use sqlite:///path/to/talon.db or postgres://user@host/db"
    )]
    InvalidUrl(String),
    #[error("{0}")]
    Key(String),
    #[error("secret {name:?} cannot be decrypted: {reason}")]
    Decrypt { name: String, reason: String },
    #[error("{what} {key:?} does not exist")]
    NotFound { what: &'static str, key: String },
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// An operation was abandoned at its deadline; the store itself is fine.
    #[error("{what} did not finish within {:.1} s; {hint}", limit.as_secs_f64())]
    TimedOut {
        what: &'static str,
        limit: Duration,
        hint: &'static str,
    },
    #[error("cannot access {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether the database could not be reached (a connection refused, reset or timed out, the
    /// pool gave up waiting): nothing about the request is wrong, and the same operation may
    /// succeed later. Writes that must land (a run's end, a turn) are retried on it, and HTTP
    /// callers are answered 503 with `Retry-After`.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Connect { .. } => true,
            StoreError::Database(e) | StoreError::Migration { source: e, .. } => match e {
                // A connection cut mid-handshake reads as a protocol error ("unexpected
                // response from SSLRequest").
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::WorkerCrashed => true,
                // PostgreSQL's connection exceptions (08…) and an administrator's or a
                // shutdown's end of the session (57P01–57P03).
                sqlx::Error::Database(db) => db
                    .code()
                    .is_some_and(|code| code.starts_with("08") || code.starts_with("57P0")),
                _ => false,
            },
            _ => false,
        }
    }
}

/// `$first, $first+1, …`: `n` numbered placeholders, for a list of values bound one by one.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long [`Store::ping`] waits for the database.
pub const PING_LIMIT: Duration = Duration::from_secs(2);

/// The two engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    fn dir(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

/// Where the store lives.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `sqlite://…` or `postgres://…`.
    pub url: String,
    /// PostgreSQL schema to use (created if missing); `None` for the default search path. Lets
    /// several deployments, or parallel tests, share one database.
    pub schema: Option<String>,
    /// Pool size.
    pub max_connections: u32,
}

impl StoreConfig {
    /// The embedded default: `talon.db` in the data directory.
    pub fn sqlite_in(data_dir: &Path) -> Self {
        Self {
            url: format!("sqlite://{}?mode=rwc", data_dir.join("talon.db").display()),
            schema: None,
            max_connections: 8,
        }
    }

    /// A URL from `TALON_DATABASE_URL` or configuration.
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: None,
            max_connections: 8,
        }
    }
}

/// The store: a connection pool, the engine, and the key for secrets.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    engine: Engine,
    key: Option<EncryptionKey>,
    /// PostgreSQL: the connect URL, for the connection that listens for change notifications.
    listen_url: Option<std::sync::Arc<str>>,
    /// SQLite: the file announcing the MCP tables' revision to every process on this host, and
    /// the grants read at that revision (see [`Store::mcp_grants_for_current`]).
    mcp_stamp: Option<std::sync::Arc<mcp_grants::GrantCache>>,
    /// Names of the credentialed binaries, as last read (see
    /// [`Store::cli_binary_names_recent`]); shared by the store's clones.
    binary_names: cli_credentials::NamesCache,
    /// Memory searches in flight and their deadline, shared by the store's clones.
    memory_search: memory::SearchLimits,
    /// Signalled when this process writes a memory document (see [`Store::memory_written`]).
    memory_written: std::sync::Arc<tokio::sync::Notify>,
}

fn valid_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A connect target safe to print: the password, if any, replaced, whether in the user info or
/// in a `password=` query parameter. Other query parameters (`sslmode`, `sslrootcert`, …) stay.
fn redact_url(url: &str) -> String {
    let Some(scheme) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    // The authority ends at the path, query or fragment; its last `@` ends the user info.
    let authority_end = url[scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| scheme + i);
    let mut out = match url[scheme..authority_end].rfind('@') {
        Some(at) => match url[scheme..scheme + at].split_once(':') {
            Some((user, _)) => format!(
                "{}{user}:***{}",
                &url[..scheme],
                &url[scheme + at..authority_end]
            ),
            None => url[..authority_end].to_string(),
        },
        None => url[..authority_end].to_string(),
    };
    let rest = &url[authority_end..];
    match rest.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_string(),
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(&format!("{path}?{}", query.join("&")));
        }
        None => out.push_str(rest),
    }
    out
}

/// Current time in Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Store {
    /// Connects and applies pending migrations.
    pub async fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let store = Self::connect(config).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without migrating (for `talon migrate status`).
    pub async fn connect(config: &StoreConfig) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let engine = if config.url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if config.url.starts_with("postgres://") || config.url.starts_with("postgresql://") {
            Engine::Postgres
        } else {
            return Err(StoreError::InvalidUrl(redact_url(&config.url)));
        };
        let target = redact_url(&config.url);
        let options = AnyConnectOptions::from_str(&config.url)
            .map_err(|source| StoreError::Connect {
                target: target.clone(),
                source,
            })?
            .log_statements(tracing::log::LevelFilter::Trace);
        if let Some(schema) = &config.schema
            && (engine != Engine::Postgres || !valid_identifier(schema))
        {
            return Err(StoreError::Invalid {
                what: "schema",
                reason: format!("{schema:?}: only for PostgreSQL, lowercase letters, digits and _"),
            });
        }
        if engine == Engine::Sqlite {
            private_file::prepare(&config.url)?;
            memory::register_sqlite_vec();
        }
        let schema = config.schema.clone();
        let pool = AnyPoolOptions::new()
            .max_connections(config.max_connections.max(1))
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _meta| {
                let schema = schema.clone();
                Box::pin(async move {
                    match engine {
                        Engine::Sqlite => {
                            sqlx::raw_sql("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;")
                                .execute(&mut *conn)
                                .await?;
                        }
                        Engine::Postgres => {
                            // Named sessions: operators see Talon in pg_stat_activity.
                            let name = match &schema {
                                Some(schema) => format!("SET application_name = 'talon/{schema}'"),
                                None => "SET application_name = 'talon'".to_string(),
                            };
                            sqlx::raw_sql(sqlx::AssertSqlSafe(name)).execute(&mut *conn).await?;
                            if let Some(schema) = schema {
                                // Concurrent CREATE SCHEMA IF NOT EXISTS can collide; serialise it.
                                let sql = format!(
                                    "BEGIN; SELECT pg_advisory_xact_lock(7627194084462); CREATE SCHEMA IF NOT EXISTS {schema}; COMMIT; SET search_path TO {schema};"
                                );
                                // The schema name was validated as a plain identifier above.
                                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await?;
                            }
                        }
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await;
        let pool = match pool {
            Ok(pool) => pool,
            Err(source) => {
                let source = match engine {
                    Engine::Postgres => pg_tls::TlsSettings::of(&config.url).explain(source).await,
                    Engine::Sqlite => source,
                };
                return Err(StoreError::Connect { target, source });
            }
        };
        Ok(Self {
            pool,
            engine,
            mcp_stamp: mcp_grants::GrantCache::for_url(&config.url).map(std::sync::Arc::new),
            listen_url: (engine == Engine::Postgres)
                .then(|| std::sync::Arc::from(config.url.as_str())),
            key: None,
            binary_names: cli_credentials::NamesCache::default(),
            memory_search: memory::SearchLimits::new(config.max_connections.max(1)),
            memory_written: std::sync::Arc::default(),
        })
    }

    /// The engine in use.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The row-locking clause of a claim's `SELECT`: on PostgreSQL rows another transaction is
    /// claiming are skipped, not waited for; SQLite has one writer and no such clause.
    pub(crate) fn skip_locked(&self) -> &'static str {
        match self.engine {
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
            Engine::Sqlite => "",
        }
    }

    /// The pool, for modules of this crate.
    /// Whether the database answers now, within [`PING_LIMIT`] (a gateway's readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match tokio::time::timeout(PING_LIMIT, sqlx::query("SELECT 1").execute(self.pool())).await {
            Ok(done) => done.map(drop).map_err(StoreError::from),
            Err(_) => Err(StoreError::Database(sqlx::Error::PoolTimedOut)),
        }
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Resolves after this process (through any clone of this store) wrote a memory document
    /// since the last wait returned: the embedding indexer waits here between passes. Writes
    /// by other processes on the same database are not signalled; poll for those.
    pub async fn memory_written(&self) {
        self.memory_written.notified().await;
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Operations for administration and tests: raw statements and corruption injection.
impl Store {
    /// Runs an administrative statement (schema management, test setup).
    pub async fn execute_admin(&self, sql: &str) -> Result<(), StoreError> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The tables and their columns, `(table, column)`, as this engine holds them: the schema
    /// the migrations made, for comparing the two engines. SQLite's full-text tables (virtual
    /// tables and their shadow tables) and the bookkeeping table are left out: PostgreSQL keeps
    /// full-text search in indexes instead.
    pub async fn schema_columns(
        &self,
    ) -> Result<std::collections::BTreeSet<(String, String)>, StoreError> {
        use sqlx::Row;
        let rows = match self.engine {
            Engine::Sqlite => {
                sqlx::query(
                    "SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p \
                     WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.sql NOT LIKE 'CREATE VIRTUAL%' \
                     AND NOT EXISTS (SELECT 1 FROM sqlite_master v WHERE v.type = 'table' \
                       AND v.sql LIKE 'CREATE VIRTUAL%' AND m.name LIKE v.name || '_%')",
                )
                .fetch_all(self.pool())
                .await?
            }
            Engine::Postgres => {
                sqlx::query(
                    "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns \
                     WHERE table_schema = current_schema()",
                )
                .fetch_all(self.pool())
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("t")?,
                    row.try_get::<String, _>("c")?,
                ))
            })
            .filter(|pair: &Result<(String, String), StoreError>| {
                pair.as_ref().map_or(true, |(t, _)| t != "talon_migrations")
            })
            .collect()
    }

    /// The stored ciphertext of a secret (to show it is not plaintext).
    pub async fn raw_secret_bytes(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        use sqlx::Row;
        let row = sqlx::query("SELECT ciphertext FROM secrets WHERE name = $1")
            .bind(name)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get("ciphertext")?)
    }

    /// Flips a byte of a secret's ciphertext, as disk corruption would.
    pub async fn corrupt_secret_for_tests(&self, name: &str) -> Result<(), StoreError> {
        let mut bytes = self.raw_secret_bytes(name).await?;
        if let Some(b) = bytes.first_mut() {
            *b ^= 0xff;
        }
        sqlx::query("UPDATE secrets SET ciphertext = $1 WHERE name = $2")
            .bind(bytes)
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_for_messages() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact_url("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(redact_url("sqlite:///tmp/a.db"), "sqlite:///tmp/a.db");
        assert_eq!(
            redact_url("postgres://app:s3cret@db/x?sslmode=verify-full&sslrootcert=/a@b:c.pem"),
            "postgres://app:***@db/x?sslmode=verify-full&sslrootcert=/a@b:c.pem",
            "TLS parameters stay, an @ in them is no user info"
        );
        assert_eq!(
            redact_url("postgres://app@db/x?sslrootcert=/a:b@c.pem"),
            "postgres://app@db/x?sslrootcert=/a:b@c.pem"
        );
        assert_eq!(
            redact_url("postgres://db/x?user=app&password=s3cret&sslmode=require"),
            "postgres://db/x?user=app&password=***&sslmode=require"
        );
    }

    #[test]
    fn identifiers() {
        assert!(valid_identifier("t_abc123"));
        assert!(!valid_identifier("x; drop table y"));
        assert!(!valid_identifier(""));
    }
}

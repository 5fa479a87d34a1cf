//! Credentialed exec: binaries (`gh`, `aws`, …) that run directly, without a shell, with stored
//! credentials in their environment, for the agents they are granted to.
//!
//! The row in `cli_credentials` holds what is not secret (path, deny patterns, timeout, the
//! *names* of the environment variables). The values live in one encrypted secret per binary,
//! `cli-credential/<binary>`, a JSON object of name → value, so key rotation re-encrypts them and
//! the scrubber's secret loading sees them like every other secret. Row and secret are written
//! in one transaction.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::agents::valid_key;
use crate::fields::{check_env, invalid, json_list, parse_list};
use crate::{Store, StoreError, now_ms};

/// Prefix of the secret holding a binary's environment.
pub const CLI_CREDENTIAL_SECRET_PREFIX: &str = "cli-credential/";
/// Timeout when none is configured (GoClaw's default).
pub const DEFAULT_CLI_TIMEOUT_SECS: u64 = 30;
/// Longest timeout a binary may be configured with.
pub const MAX_CLI_TIMEOUT_SECS: u64 = 3600;

/// What an operator configures for a credentialed binary (everything but the secret values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliCredentialSpec {
    /// The normalised name commands call it by (`gh`): lowercase, no path.
    pub binary_name: String,
    /// The absolute path that runs; a command naming another file is refused.
    pub binary_path: String,
    /// Regexes matched against the arguments joined by spaces; a match refuses the command.
    pub deny_args: Vec<String>,
    /// Regexes matched, anchored at the start, against each argument (verbose flags that would
    /// print credentials).
    pub deny_verbose: Vec<String>,
    /// Seconds before a command is killed when the call asks for no other timeout.
    pub timeout_seconds: u64,
    /// A hint for the model about what the binary is for.
    pub tips: String,
    /// Where its credentials may be sent (`host[:port][/path]`, `*.domain`); empty: the
    /// binary's preset defaults.
    pub destinations: Vec<String>,
}

/// A registered binary as listed: its configuration, the names (never values) of its
/// environment, and the agents it is granted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliCredential {
    pub spec: CliCredentialSpec,
    /// The names of the stored variables (sorted), so operators can see what is set.
    pub env_names: Vec<String>,
    /// Agent keys, sorted.
    pub grants: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A binary granted to an agent, with its decrypted environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedCredential {
    pub spec: CliCredentialSpec,
    /// Variable name → value, to add to the command's environment and to the call's scrub set.
    pub env: BTreeMap<String, String>,
}

/// The secret holding `binary`'s environment.
pub fn cli_credential_secret(binary: &str) -> String {
    format!("{CLI_CREDENTIAL_SECRET_PREFIX}{binary}")
}

/// True for the secrets this module writes (the scrubber expands them into their values).
pub(crate) fn is_env_secret(name: &str) -> bool {
    name.starts_with(CLI_CREDENTIAL_SECRET_PREFIX)
}

fn check_spec(spec: &CliCredentialSpec) -> Result<(), StoreError> {
    let name = &spec.binary_name;
    let name_ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'+')
        });
    if !name_ok {
        return Err(invalid(
            "binary name",
            format!(
                "{name:?}: a program name without a path, 1-64 characters from a-z 0-9 . _ - +"
            ),
        ));
    }
    let path = &spec.binary_path;
    if !path.starts_with('/') || path.len() > 4096 || path.contains('\0') {
        return Err(invalid(
            "binary path",
            format!("{path:?}: give the absolute path of the program (e.g. /usr/bin/{name})"),
        ));
    }
    if !(1..=MAX_CLI_TIMEOUT_SECS).contains(&spec.timeout_seconds) {
        return Err(invalid(
            "timeout",
            format!(
                "{} seconds: use 1 to {MAX_CLI_TIMEOUT_SECS}",
                spec.timeout_seconds
            ),
        ));
    }
    for pattern in spec.deny_args.iter().chain(&spec.deny_verbose) {
        if pattern.is_empty() {
            return Err(invalid(
                "deny pattern",
                "an empty pattern would match every command",
            ));
        }
    }
    Ok(())
}

fn spec_of(row: &sqlx::any::AnyRow) -> Result<(CliCredentialSpec, Vec<String>), StoreError> {
    let timeout: i64 = row.try_get("timeout_seconds")?;
    let spec = CliCredentialSpec {
        binary_name: row.try_get("binary_name")?,
        binary_path: row.try_get("binary_path")?,
        deny_args: parse_list("deny_args", &row.try_get::<String, _>("deny_args")?)?,
        deny_verbose: parse_list("deny_verbose", &row.try_get::<String, _>("deny_verbose")?)?,
        timeout_seconds: u64::try_from(timeout).unwrap_or(DEFAULT_CLI_TIMEOUT_SECS),
        tips: row.try_get("tips")?,
        destinations: parse_list("destinations", &row.try_get::<String, _>("destinations")?)?,
    };
    let env_names = parse_list("env_names", &row.try_get::<String, _>("env_names")?)?;
    Ok((spec, env_names))
}

const COLUMNS: &str = "binary_name, binary_path, env_names, deny_args, deny_verbose, timeout_seconds, tips, destinations, created_at, updated_at";

/// A list of binary names and when it was read.
type ReadNames = (std::time::Instant, std::sync::Arc<Vec<String>>);

/// The last read list of binary names and when it was read.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamesCache(std::sync::Arc<std::sync::Mutex<Option<ReadNames>>>);

impl NamesCache {
    fn fresh(&self, max_age: std::time::Duration) -> Option<std::sync::Arc<Vec<String>>> {
        let cached = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|(at, _)| at.elapsed() < max_age)
            .map(|(_, names)| std::sync::Arc::clone(names))
    }

    fn set(&self, names: Vec<String>) -> std::sync::Arc<Vec<String>> {
        let names = std::sync::Arc::new(names);
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), std::sync::Arc::clone(&names)));
        names
    }

    /// Forgets the list (after a change through this store).
    pub(crate) fn clear(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl Store {
    /// Registers a binary with its environment. Fails if it is already registered (use
    /// [`Store::update_cli_credential`]), so an `add` never silently replaces a credential.
    pub async fn add_cli_credential(
        &self,
        spec: &CliCredentialSpec,
        env: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        self.binary_names.clear();
        check_spec(spec)?;
        check_env(env)?;
        let names: Vec<String> = env.keys().cloned().collect();
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "INSERT INTO cli_credentials (binary_name, binary_path, env_names, deny_args, deny_verbose, timeout_seconds, tips, destinations, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (binary_name) DO NOTHING",
        )
        .bind(&spec.binary_name)
        .bind(&spec.binary_path)
        .bind(json_list(&names)?)
        .bind(json_list(&spec.deny_args)?)
        .bind(json_list(&spec.deny_verbose)?)
        .bind(i64::try_from(spec.timeout_seconds).unwrap_or(i64::MAX))
        .bind(&spec.tips)
        .bind(json_list(&spec.destinations)?)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(invalid(
                "binary name",
                format!(
                    "{:?} is already registered; remove it first or update it",
                    spec.binary_name
                ),
            ));
        }
        self.write_env(&mut tx, &spec.binary_name, env).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces a registered binary's configuration and, when `env` is given, its environment
    /// (otherwise the stored values stay). Grants stay.
    pub async fn update_cli_credential(
        &self,
        spec: &CliCredentialSpec,
        env: Option<&BTreeMap<String, String>>,
    ) -> Result<(), StoreError> {
        self.binary_names.clear();
        check_spec(spec)?;
        if let Some(env) = env {
            check_env(env)?;
        }
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE cli_credentials SET binary_path = $1, deny_args = $2, deny_verbose = $3, timeout_seconds = $4, tips = $5, destinations = $6, updated_at = $7 \
             WHERE binary_name = $8",
        )
        .bind(&spec.binary_path)
        .bind(json_list(&spec.deny_args)?)
        .bind(json_list(&spec.deny_verbose)?)
        .bind(i64::try_from(spec.timeout_seconds).unwrap_or(i64::MAX))
        .bind(&spec.tips)
        .bind(json_list(&spec.destinations)?)
        .bind(now_ms())
        .bind(&spec.binary_name)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "credentialed binary",
                key: spec.binary_name.clone(),
            });
        }
        if let Some(env) = env {
            let names: Vec<String> = env.keys().cloned().collect();
            sqlx::query("UPDATE cli_credentials SET env_names = $1 WHERE binary_name = $2")
                .bind(json_list(&names)?)
                .bind(&spec.binary_name)
                .execute(&mut *tx)
                .await?;
            self.write_env(&mut tx, &spec.binary_name, env).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn write_env(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        binary: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        self.put_env_secret(tx, &cli_credential_secret(binary), env)
            .await
    }

    /// Stores `env` as the JSON secret `secret` in `tx`, or removes the secret when `env` is
    /// empty (custom tools keep their variables the same way).
    pub(crate) async fn put_env_secret(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        secret: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        if env.is_empty() {
            sqlx::query("DELETE FROM secrets WHERE name = $1")
                .bind(secret)
                .execute(&mut **tx)
                .await?;
            return Ok(());
        }
        let value =
            serde_json::to_string(env).map_err(|e| invalid("environment", e.to_string()))?;
        self.put_secret(&mut **tx, secret, &value).await
    }

    /// One registered binary (no secret values), if it exists.
    pub async fn cli_credential(&self, binary: &str) -> Result<Option<CliCredential>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM cli_credentials WHERE binary_name = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(binary)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let grants = self.grants_of(binary).await?;
        record(&row, grants).map(Some)
    }

    /// Every registered binary, sorted by name (no secret values).
    pub async fn cli_credentials(&self) -> Result<Vec<CliCredential>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM cli_credentials ORDER BY binary_name");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        let grant_rows = sqlx::query(
            "SELECT binary_name, agent_key FROM cli_credential_grants ORDER BY binary_name, agent_key",
        )
        .fetch_all(self.pool())
        .await?;
        let mut grants: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in &grant_rows {
            grants
                .entry(row.try_get("binary_name")?)
                .or_default()
                .push(row.try_get("agent_key")?);
        }
        rows.iter()
            .map(|row| {
                let name: String = row.try_get("binary_name")?;
                record(row, grants.remove(&name).unwrap_or_default())
            })
            .collect()
    }

    async fn grants_of(&self, binary: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT agent_key FROM cli_credential_grants WHERE binary_name = $1 ORDER BY agent_key",
        )
        .bind(binary)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get("agent_key").map_err(StoreError::from))
            .collect()
    }

    /// Removes a binary, its grants and its environment; returns whether it was registered.
    pub async fn remove_cli_credential(&self, binary: &str) -> Result<bool, StoreError> {
        self.binary_names.clear();
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM cli_credential_grants WHERE binary_name = $1")
            .bind(binary)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM cli_credentials WHERE binary_name = $1")
            .bind(binary)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM secrets WHERE name = $1")
            .bind(cli_credential_secret(binary))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Lets `agent` use `binary`'s credentials. Idempotent; the binary must be registered.
    pub async fn grant_cli_credential(&self, binary: &str, agent: &str) -> Result<(), StoreError> {
        valid_key("agent key", agent)?;
        // One statement: a concurrent remove cannot leave a grant without its binary.
        let done = sqlx::query(
            "INSERT INTO cli_credential_grants (binary_name, agent_key, created_at) \
             SELECT binary_name, $2, $3 FROM cli_credentials WHERE binary_name = $1 \
             ON CONFLICT (binary_name, agent_key) DO NOTHING",
        )
        .bind(binary)
        .bind(agent)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 && self.cli_credential(binary).await?.is_none() {
            return Err(StoreError::NotFound {
                what: "credentialed binary",
                key: binary.to_string(),
            });
        }
        Ok(())
    }

    /// Withdraws a grant; returns whether there was one.
    pub async fn revoke_cli_credential(
        &self,
        binary: &str,
        agent: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM cli_credential_grants WHERE binary_name = $1 AND agent_key = $2",
        )
        .bind(binary)
        .bind(agent)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Names of every credentialed binary, read at most `max_age` ago (by this process; changes
    /// made through this store are seen at once). For `exec`'s routing, which needs the store
    /// only when a command runs one of these: a binary added by another process is routed
    /// after at most `max_age`, while grants and credentials themselves are always read fresh,
    /// so a revocation holds at once.
    pub async fn cli_binary_names_recent(
        &self,
        max_age: std::time::Duration,
    ) -> Result<std::sync::Arc<Vec<String>>, StoreError> {
        if let Some(names) = self.binary_names.fresh(max_age) {
            return Ok(names);
        }
        let rows = sqlx::query("SELECT binary_name FROM cli_credentials")
            .fetch_all(self.pool())
            .await?;
        let names = rows
            .iter()
            .map(|r| r.try_get("binary_name").map_err(StoreError::from))
            .collect::<Result<Vec<String>, StoreError>>()?;
        Ok(self.binary_names.set(names))
    }

    /// The binaries granted to `agent`, sorted (what `exec` routes to credentialed exec).
    pub async fn cli_binaries_granted_to(&self, agent: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT binary_name FROM cli_credential_grants WHERE agent_key = $1 ORDER BY binary_name",
        )
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get("binary_name").map_err(StoreError::from))
            .collect()
    }

    /// `binary`'s configuration and decrypted environment, only if it is granted to `agent`.
    /// A missing or undecryptable environment is an error, never an empty one: a command must
    /// not run half-configured.
    pub async fn credential_for(
        &self,
        agent: &str,
        binary: &str,
    ) -> Result<Option<GrantedCredential>, StoreError> {
        let sql = format!(
            "SELECT {} FROM cli_credentials c JOIN cli_credential_grants g ON g.binary_name = c.binary_name \
             WHERE c.binary_name = $1 AND g.agent_key = $2",
            COLUMNS
                .split(", ")
                .map(|c| format!("c.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(binary)
            .bind(agent)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let (spec, env_names) = spec_of(&row)?;
        let secret = cli_credential_secret(binary);
        let env = match self.secret(&secret).await? {
            Some(text) => serde_json::from_str::<BTreeMap<String, String>>(&text).map_err(|e| {
                StoreError::Decrypt {
                    name: secret.clone(),
                    reason: format!("not a JSON object of strings: {e}"),
                }
            })?,
            None if env_names.is_empty() => BTreeMap::new(),
            None => {
                return Err(StoreError::NotFound {
                    what: "secret",
                    key: secret,
                });
            }
        };
        Ok(Some(GrantedCredential { spec, env }))
    }
}

fn record(row: &sqlx::any::AnyRow, grants: Vec<String>) -> Result<CliCredential, StoreError> {
    let (spec, env_names) = spec_of(row)?;
    Ok(CliCredential {
        spec,
        env_names,
        grants,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

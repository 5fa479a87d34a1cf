//! Custom tools: shell commands defined at run time (`talon custom-tools`, the HTTP API), for
//! every agent or for one, with environment values kept encrypted in the secret
//! `custom-tool/<name>` (never plaintext: without the store's key they cannot be stored at all,
//! where GoClaw silently stored them in the clear).
//!
//! Every change bumps `custom_tools_revision` in the same transaction and, on PostgreSQL, sends
//! `NOTIFY talon_custom_tools`, so every gateway sharing the database loads it without a restart.
//! What a definition may say beyond its form (that its name is no built-in tool's, that its
//! placeholders name its parameters) is the runtime's check, made before anything is stored.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::fields::{check_env, invalid, json_list, parse_list};
use crate::{Engine, Store, StoreError, now_ms};

/// Prefix of the secret holding a custom tool's environment values.
pub const CUSTOM_TOOL_SECRET_PREFIX: &str = "custom-tool/";
/// The PostgreSQL channel changes are announced on.
pub const CUSTOM_TOOLS_CHANNEL: &str = "talon_custom_tools";
/// The longest command template, in bytes.
pub const MAX_CUSTOM_COMMAND: usize = 16 * 1024;
/// The longest description, in characters.
pub const MAX_CUSTOM_DESCRIPTION: usize = 2000;
/// Timeout bounds, in seconds (the same as `exec`'s).
pub const MAX_CUSTOM_TIMEOUT_SECS: u64 = 3600;

/// The secret holding `tool`'s environment values.
pub fn custom_tool_secret(tool: &str) -> String {
    format!("{CUSTOM_TOOL_SECRET_PREFIX}{tool}")
}

pub(crate) fn is_custom_tool_secret(name: &str) -> bool {
    name.starts_with(CUSTOM_TOOL_SECRET_PREFIX)
}

/// A custom tool as defined (everything but its environment values).
#[derive(Debug, Clone, PartialEq)]
pub struct CustomToolSpec {
    /// Lowercase letters, digits, `_` and `-`, starting with a letter; unique across agents.
    pub name: String,
    /// The agent it exists for; empty for every agent.
    pub agent: String,
    /// What the model reads to decide when to call it.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
    /// The shell command, with `{{.name}}` placeholders for arguments.
    pub command: String,
    /// Where it runs, relative to the workspace; empty for the workspace itself.
    pub working_dir: String,
    pub timeout_secs: u64,
    pub enabled: bool,
}

impl CustomToolSpec {
    /// A tool for every agent with a 60-second timeout and no parameters.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        command: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            agent: String::new(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            command: command.into(),
            working_dir: String::new(),
            timeout_secs: 60,
            enabled: true,
        }
    }

    /// Checks the definition's form; the error says what to fix.
    pub fn check(&self) -> Result<(), StoreError> {
        check_custom_tool_name(&self.name)?;
        if !self.agent.is_empty() {
            crate::agents::valid_key("agent key", &self.agent)?;
        }
        let description = self.description.trim();
        if description.is_empty() || description.chars().count() > MAX_CUSTOM_DESCRIPTION {
            return Err(invalid(
                "description",
                format!(
                    "say in 1 to {MAX_CUSTOM_DESCRIPTION} characters what the tool does and when to use it"
                ),
            ));
        }
        if self.command.trim().is_empty() || self.command.len() > MAX_CUSTOM_COMMAND {
            return Err(invalid(
                "command",
                format!("give the shell command to run (1 to {MAX_CUSTOM_COMMAND} bytes)"),
            ));
        }
        if !self.parameters.is_object() {
            return Err(invalid(
                "parameters",
                "give a JSON object schema, e.g. {\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}",
            ));
        }
        if self.working_dir.starts_with('/') || self.working_dir.split('/').any(|p| p == "..") {
            return Err(invalid(
                "working directory",
                format!(
                    "{:?}: give a directory relative to the workspace, without ..",
                    self.working_dir
                ),
            ));
        }
        if !(1..=MAX_CUSTOM_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return Err(invalid(
                "timeout",
                format!(
                    "{} seconds: use 1 to {MAX_CUSTOM_TIMEOUT_SECS}",
                    self.timeout_secs
                ),
            ));
        }
        if [&self.command, &self.working_dir, &self.description]
            .iter()
            .any(|s| s.contains('\0'))
        {
            return Err(invalid("custom tool", "no value may contain a NUL byte"));
        }
        Ok(())
    }
}

/// The form of a custom tool's name: 1-64 lowercase letters, digits, `_` and `-`, starting with
/// a letter; never `__` (the separator of bridged MCP tools' names) nor the `mcp_` prefix, so no
/// custom tool can take a name a server's tool will need.
pub fn check_custom_tool_name(name: &str) -> Result<(), StoreError> {
    let form = (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !form {
        return Err(invalid(
            "custom tool name",
            format!(
                "{name:?}: use 1-64 lowercase letters, digits, _ and -, starting with a letter"
            ),
        ));
    }
    if name.contains("__") || name.starts_with("mcp_") || name.starts_with("mcp-") {
        return Err(invalid(
            "custom tool name",
            format!(
                "{name:?}: names with __ or starting with mcp_ are kept for MCP servers' tools"
            ),
        ));
    }
    Ok(())
}

/// Environment names a custom tool may set: shell-style, and never Talon's own settings.
fn check_tool_env(env: &BTreeMap<String, String>) -> Result<(), StoreError> {
    check_env(env)?;
    if let Some(name) = env
        .keys()
        .find(|n| n.to_ascii_uppercase().starts_with("TALON_"))
    {
        return Err(invalid(
            "environment variable name",
            format!("{name}: TALON_ variables are Talon's own settings; pick another name"),
        ));
    }
    Ok(())
}

/// A stored custom tool: its definition and the names (never values) of its variables.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCustomTool {
    pub spec: CustomToolSpec,
    pub env_names: Vec<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "name, agent_key, description, parameters, command, working_dir, timeout_secs, env_names, enabled, created_by, created_at, updated_at";

fn stored(row: &sqlx::any::AnyRow) -> Result<StoredCustomTool, StoreError> {
    let parameters: String = row.try_get("parameters")?;
    let timeout: i64 = row.try_get("timeout_secs")?;
    let enabled: i64 = row.try_get("enabled")?;
    Ok(StoredCustomTool {
        spec: CustomToolSpec {
            name: row.try_get("name")?,
            agent: row.try_get("agent_key")?,
            description: row.try_get("description")?,
            parameters: serde_json::from_str(&parameters)
                .map_err(|e| invalid("parameters", format!("stored value is corrupt: {e}")))?,
            command: row.try_get("command")?,
            working_dir: row.try_get("working_dir")?,
            timeout_secs: u64::try_from(timeout).unwrap_or(60),
            enabled: enabled != 0,
        },
        env_names: parse_list("env_names", &row.try_get::<String, _>("env_names")?)?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// Adds a custom tool, or with `replace` changes an existing one. `env` replaces the stored
    /// variables when given (an empty map removes them); otherwise a changed tool keeps them. An
    /// add of a name that exists fails, so nothing is silently replaced.
    pub async fn put_custom_tool(
        &self,
        spec: &CustomToolSpec,
        env: Option<&BTreeMap<String, String>>,
        replace: bool,
        created_by: &str,
    ) -> Result<(), StoreError> {
        spec.check()?;
        if let Some(env) = env {
            check_tool_env(env)?;
        }
        let parameters = serde_json::to_string(&spec.parameters)
            .map_err(|e| invalid("parameters", e.to_string()))?;
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let conflict = if replace {
            "ON CONFLICT (name) DO UPDATE SET agent_key = excluded.agent_key, description = excluded.description, parameters = excluded.parameters, command = excluded.command, working_dir = excluded.working_dir, timeout_secs = excluded.timeout_secs, enabled = excluded.enabled, updated_at = excluded.updated_at"
        } else {
            "ON CONFLICT (name) DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO custom_tools (name, agent_key, description, parameters, command, working_dir, timeout_secs, enabled, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) {conflict}"
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&spec.name)
            .bind(&spec.agent)
            .bind(&spec.description)
            .bind(parameters)
            .bind(&spec.command)
            .bind(&spec.working_dir)
            .bind(i64::try_from(spec.timeout_secs).unwrap_or(60))
            .bind(i64::from(spec.enabled))
            .bind(created_by)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(invalid(
                "custom tool name",
                format!(
                    "{:?} is already defined; remove it first or change it with update",
                    spec.name
                ),
            ));
        }
        if let Some(env) = env {
            let names: Vec<String> = env.keys().cloned().collect();
            sqlx::query("UPDATE custom_tools SET env_names = $1 WHERE name = $2")
                .bind(json_list(&names)?)
                .bind(&spec.name)
                .execute(&mut *tx)
                .await?;
            self.put_env_secret(&mut tx, &custom_tool_secret(&spec.name), env)
                .await?;
        }
        self.commit_custom_tools_change(tx).await
    }

    /// Every custom tool, by name (no environment values).
    pub async fn custom_tools(&self) -> Result<Vec<StoredCustomTool>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM custom_tools ORDER BY name");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(stored).collect()
    }

    /// One custom tool (no environment values), if it exists.
    pub async fn custom_tool(&self, name: &str) -> Result<Option<StoredCustomTool>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM custom_tools WHERE name = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(stored).transpose()
    }

    /// A tool's decrypted environment values. A tool listing names whose secret is missing or
    /// unreadable is an error, never an empty environment: it must not run half-configured.
    pub async fn custom_tool_env(
        &self,
        tool: &StoredCustomTool,
    ) -> Result<BTreeMap<String, String>, StoreError> {
        self.json_secret(
            custom_tool_secret(&tool.spec.name),
            !tool.env_names.is_empty(),
        )
        .await
    }

    /// Removes a custom tool and its environment values; returns whether it existed.
    pub async fn remove_custom_tool(&self, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query("DELETE FROM custom_tools WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM secrets WHERE name = $1")
            .bind(custom_tool_secret(name))
            .execute(&mut *tx)
            .await?;
        self.commit_custom_tools_change(tx).await?;
        Ok(done.rows_affected() > 0)
    }

    /// The revision of the custom tools: it changes whenever one does.
    pub async fn custom_tools_revision(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT revision FROM custom_tools_revision WHERE id = 1")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get("revision")?)
    }

    /// Wakes `wake` whenever another process announces a custom tool change (PostgreSQL's
    /// `LISTEN talon_custom_tools`); a no-op on SQLite, where readers poll
    /// [`Store::custom_tools_revision`]. Stops when `wake` has no other owner.
    pub fn notify_custom_tool_changes(&self, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.listen(CUSTOM_TOOLS_CHANNEL, wake);
    }

    async fn commit_custom_tools_change(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Any>,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE custom_tools_revision SET revision = revision + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        if self.engine() == Engine::Postgres {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "NOTIFY {CUSTOM_TOOLS_CHANNEL}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

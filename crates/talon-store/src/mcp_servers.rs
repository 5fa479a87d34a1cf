//! MCP servers added at runtime (`talon mcp-servers add`, the HTTP API): what Talon connects to,
//! with header and environment values kept encrypted in the secret `mcp-server/<name>`.
//!
//! Every change bumps `mcp_revision` in the same transaction (and, on PostgreSQL, sends
//! `NOTIFY talon_mcp`), so a running gateway sees it with one cheap read or at once.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::fields::{check_env, invalid, json_list, parse_list};
use crate::{Engine, Store, StoreError, now_ms};

/// Prefix of the secret holding a server's header and environment values.
pub const MCP_SERVER_SECRET_PREFIX: &str = "mcp-server/";
/// The PostgreSQL channel changes are announced on.
pub const MCP_CHANNEL: &str = "talon_mcp";

/// The secret holding `server`'s values.
pub fn mcp_server_secret(server: &str) -> String {
    format!("{MCP_SERVER_SECRET_PREFIX}{server}")
}

/// Prefix of the secret holding a server's OAuth tokens.
pub const MCP_OAUTH_SECRET_PREFIX: &str = "mcp-oauth/";

/// The secret holding `server`'s OAuth tokens.
pub fn mcp_oauth_secret(server: &str) -> String {
    format!("{MCP_OAUTH_SECRET_PREFIX}{server}")
}

pub(crate) fn is_server_secret(name: &str) -> bool {
    name.starts_with(MCP_SERVER_SECRET_PREFIX)
}

pub(crate) fn is_oauth_secret(name: &str) -> bool {
    name.starts_with(MCP_OAUTH_SECRET_PREFIX)
}

/// What the bridge keeps beside a server's tokens (`mcp-oauth/<server>/challenge`: the
/// server's own words, no credential). Server names hold no `/`.
pub(crate) fn is_oauth_note(name: &str) -> bool {
    name.strip_prefix(MCP_OAUTH_SECRET_PREFIX)
        .is_some_and(|rest| rest.contains('/'))
}

/// A server as configured (everything but the secret values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// Letters, digits, `_` and `-`; unique.
    pub name: String,
    /// `stdio`, `http` (streamable HTTP) or `sse` (legacy HTTP+SSE).
    pub transport: String,
    /// stdio: the program.
    pub command: String,
    pub args: Vec<String>,
    /// http and sse: the endpoint.
    pub url: String,
    /// stdio: the working directory; empty for Talon's own.
    pub cwd: String,
    /// GoClaw dialect: replaces `mcp_<server>` in tool names; empty for the default.
    pub tool_prefix: String,
    pub startup_timeout_secs: u64,
    pub tool_timeout_secs: u64,
    pub max_output_chars: u64,
    pub enabled: bool,
    /// A gateway does not start without it.
    pub required: bool,
    /// Only agents and users with a grant may call its tools.
    pub require_grant: bool,
    /// Sign in with OAuth 2.1 (`talon mcp-servers login`).
    pub oauth: bool,
    /// OAuth: a client registered beforehand (empty: dynamic registration).
    pub oauth_client_id: String,
    /// OAuth: Talon's client metadata document URL, where the server supports them.
    pub oauth_client_metadata_url: String,
    /// OAuth: scopes to ask for (empty: what the server says).
    pub oauth_scopes: Vec<String>,
    /// http: the MCP protocol version to speak; empty: `auto` (see [`MCP_PROTOCOL_VERSIONS`]).
    pub protocol_version: String,
}

/// The MCP protocol versions a server may be configured to speak, besides `auto`.
pub const MCP_PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

impl McpServerSpec {
    /// A server with the defaults (30 s start-up, 60 s per call, 100,000 characters).
    pub fn new(name: impl Into<String>, transport: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: transport.into(),
            command: String::new(),
            args: Vec::new(),
            url: String::new(),
            cwd: String::new(),
            tool_prefix: String::new(),
            startup_timeout_secs: 30,
            tool_timeout_secs: 60,
            max_output_chars: 100_000,
            enabled: true,
            required: false,
            require_grant: false,
            oauth: false,
            oauth_client_id: String::new(),
            oauth_client_metadata_url: String::new(),
            oauth_scopes: Vec::new(),
            protocol_version: String::new(),
        }
    }
}

/// A server's secret values.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct McpServerSecrets {
    /// stdio: variables added to the server's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// http and sse: headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// OAuth: the pre-registered client's secret.
    #[serde(default)]
    pub oauth_client_secret: Option<String>,
}

impl std::fmt::Debug for McpServerSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerSecrets")
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field(
                "oauth_client_secret",
                &self.oauth_client_secret.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

/// A stored server as listed: its configuration and the names (never values) of its secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMcpServer {
    pub spec: McpServerSpec,
    pub env_names: Vec<String>,
    pub header_names: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Server names: what `[mcp_servers.<name>]` accepts.
pub fn valid_server_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl McpServerSpec {
    /// Checks the configuration (names, transport, URL, limits); the error says what to fix.
    /// Servers from `talon.toml` are checked here too, so both sources follow one rule.
    pub fn check(&self) -> Result<(), StoreError> {
        check_spec(self)
    }
}

fn check_spec(spec: &McpServerSpec) -> Result<(), StoreError> {
    if !valid_server_name(&spec.name) {
        return Err(invalid(
            "server name",
            format!("{:?}: use 1-64 letters, digits, _ and -", spec.name),
        ));
    }
    match spec.transport.as_str() {
        "stdio" if spec.command.trim().is_empty() => {
            return Err(invalid("server", "a stdio server needs a command"));
        }
        "stdio" => {}
        "http" | "sse" => {
            let url = spec.url.as_str();
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
                return Err(invalid(
                    "server URL",
                    format!("{url:?}: give the server's http:// or https:// URL"),
                ));
            }
        }
        other => {
            return Err(invalid(
                "transport",
                format!("{other:?}: use stdio, http (streamable HTTP) or sse (legacy HTTP+SSE)"),
            ));
        }
    }
    if !spec.protocol_version.is_empty() {
        if spec.transport != "http" {
            return Err(invalid(
                "server",
                "protocol_version is for streamable HTTP servers (url, transport = \"http\")",
            ));
        }
        if !MCP_PROTOCOL_VERSIONS.contains(&spec.protocol_version.as_str()) {
            return Err(invalid(
                "protocol_version",
                format!(
                    "{:?}: use \"auto\" (the default: server/discover, then initialize if refused) or one of {}",
                    spec.protocol_version,
                    MCP_PROTOCOL_VERSIONS.join(", ")
                ),
            ));
        }
    }
    if spec.oauth && spec.transport != "http" {
        return Err(invalid(
            "server",
            "OAuth sign-in is for streamable HTTP servers (transport http)",
        ));
    }
    for (what, secs) in [
        ("start-up timeout", spec.startup_timeout_secs),
        ("tool timeout", spec.tool_timeout_secs),
    ] {
        if !(1..=3600).contains(&secs) {
            return Err(invalid(what, format!("{secs} seconds: use 1 to 3600")));
        }
    }
    if !(1000..=10_000_000).contains(&spec.max_output_chars) {
        return Err(invalid(
            "output cap",
            format!("{} characters: use 1000 to 10000000", spec.max_output_chars),
        ));
    }
    if spec
        .args
        .iter()
        .chain([&spec.command, &spec.cwd, &spec.tool_prefix])
        .any(|s| s.contains('\0'))
    {
        return Err(invalid("server", "no value may contain a NUL byte"));
    }
    Ok(())
}

/// Checks header names and values.
pub fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), StoreError> {
    for (name, value) in headers {
        let name_ok = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !name_ok {
            return Err(invalid(
                "header name",
                format!("{name:?} is not an HTTP header name"),
            ));
        }
        if value.bytes().any(|b| b < 0x20 && b != b'\t') {
            return Err(invalid(
                "header value",
                format!("{name}: the value must not contain line breaks or control characters"),
            ));
        }
    }
    Ok(())
}

const COLUMNS: &str = "name, transport, command, args, url, cwd, env_names, header_names, tool_prefix, startup_timeout_secs, tool_timeout_secs, max_output_chars, enabled, required, require_grant, oauth, oauth_client_id, oauth_client_metadata_url, oauth_scopes, protocol_version, created_at, updated_at";

fn int(row: &sqlx::any::AnyRow, column: &str) -> Result<u64, StoreError> {
    let value: i64 = row.try_get(column)?;
    Ok(u64::try_from(value).unwrap_or(0))
}

fn stored(row: &sqlx::any::AnyRow) -> Result<StoredMcpServer, StoreError> {
    let spec = McpServerSpec {
        name: row.try_get("name")?,
        transport: row.try_get("transport")?,
        command: row.try_get("command")?,
        args: parse_list("args", &row.try_get::<String, _>("args")?)?,
        url: row.try_get("url")?,
        cwd: row.try_get("cwd")?,
        tool_prefix: row.try_get("tool_prefix")?,
        startup_timeout_secs: int(row, "startup_timeout_secs")?,
        tool_timeout_secs: int(row, "tool_timeout_secs")?,
        max_output_chars: int(row, "max_output_chars")?,
        enabled: int(row, "enabled")? != 0,
        required: int(row, "required")? != 0,
        require_grant: int(row, "require_grant")? != 0,
        oauth: int(row, "oauth")? != 0,
        oauth_client_id: row.try_get("oauth_client_id")?,
        oauth_client_metadata_url: row.try_get("oauth_client_metadata_url")?,
        oauth_scopes: parse_list("oauth_scopes", &row.try_get::<String, _>("oauth_scopes")?)?,
        protocol_version: row.try_get("protocol_version")?,
    };
    Ok(StoredMcpServer {
        spec,
        env_names: parse_list("env_names", &row.try_get::<String, _>("env_names")?)?,
        header_names: parse_list("header_names", &row.try_get::<String, _>("header_names")?)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Store {
    /// Adds a server, or with `replace` changes an existing one. `secrets` replace the stored
    /// values when given; otherwise a changed server keeps its values. An `add` of a name that
    /// exists fails, so nothing is silently replaced.
    pub async fn put_mcp_server(
        &self,
        spec: &McpServerSpec,
        secrets: Option<&McpServerSecrets>,
        replace: bool,
    ) -> Result<(), StoreError> {
        check_spec(spec)?;
        if let Some(secrets) = secrets {
            check_env(&secrets.env)?;
            check_headers(&secrets.headers)?;
        }
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let conflict = if replace {
            "ON CONFLICT (name) DO UPDATE SET transport = excluded.transport, command = excluded.command, args = excluded.args, url = excluded.url, cwd = excluded.cwd, tool_prefix = excluded.tool_prefix, startup_timeout_secs = excluded.startup_timeout_secs, tool_timeout_secs = excluded.tool_timeout_secs, max_output_chars = excluded.max_output_chars, enabled = excluded.enabled, required = excluded.required, require_grant = excluded.require_grant, oauth = excluded.oauth, oauth_client_id = excluded.oauth_client_id, oauth_client_metadata_url = excluded.oauth_client_metadata_url, oauth_scopes = excluded.oauth_scopes, protocol_version = excluded.protocol_version, updated_at = excluded.updated_at"
        } else {
            "ON CONFLICT (name) DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO mcp_servers (name, transport, command, args, url, cwd, tool_prefix, startup_timeout_secs, tool_timeout_secs, max_output_chars, enabled, required, require_grant, oauth, oauth_client_id, oauth_client_metadata_url, oauth_scopes, protocol_version, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) {conflict}"
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&spec.name)
            .bind(&spec.transport)
            .bind(&spec.command)
            .bind(json_list(&spec.args)?)
            .bind(&spec.url)
            .bind(&spec.cwd)
            .bind(&spec.tool_prefix)
            .bind(i(spec.startup_timeout_secs))
            .bind(i(spec.tool_timeout_secs))
            .bind(i(spec.max_output_chars))
            .bind(i64::from(spec.enabled))
            .bind(i64::from(spec.required))
            .bind(i64::from(spec.require_grant))
            .bind(i64::from(spec.oauth))
            .bind(&spec.oauth_client_id)
            .bind(&spec.oauth_client_metadata_url)
            .bind(json_list(&spec.oauth_scopes)?)
            .bind(&spec.protocol_version)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(invalid(
                "server name",
                format!(
                    "{:?} is already added; remove it first or change it with --replace",
                    spec.name
                ),
            ));
        }
        if let Some(secrets) = secrets {
            let env: Vec<String> = secrets.env.keys().cloned().collect();
            let headers: Vec<String> = secrets.headers.keys().cloned().collect();
            sqlx::query("UPDATE mcp_servers SET env_names = $1, header_names = $2 WHERE name = $3")
                .bind(json_list(&env)?)
                .bind(json_list(&headers)?)
                .bind(&spec.name)
                .execute(&mut *tx)
                .await?;
            let secret = mcp_server_secret(&spec.name);
            if env.is_empty() && headers.is_empty() && secrets.oauth_client_secret.is_none() {
                sqlx::query("DELETE FROM secrets WHERE name = $1")
                    .bind(&secret)
                    .execute(&mut *tx)
                    .await?;
            } else {
                let value = serde_json::to_string(secrets)
                    .map_err(|e| invalid("server secrets", e.to_string()))?;
                self.put_secret(&mut *tx, &secret, &value).await?;
            }
        }
        self.commit_mcp_change(tx).await?;
        Ok(())
    }

    /// Every stored server, by name (no secret values).
    pub async fn mcp_servers(&self) -> Result<Vec<StoredMcpServer>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM mcp_servers ORDER BY name");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(stored).collect()
    }

    /// One stored server (no secret values), if it exists.
    pub async fn mcp_server(&self, name: &str) -> Result<Option<StoredMcpServer>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM mcp_servers WHERE name = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(stored).transpose()
    }

    /// A server's decrypted header and environment values. A server listing names whose
    /// secret is missing or unreadable is an error, never empty values: it must not connect
    /// half-configured.
    pub async fn mcp_server_secrets(
        &self,
        server: &StoredMcpServer,
    ) -> Result<McpServerSecrets, StoreError> {
        self.json_secret(
            mcp_server_secret(&server.spec.name),
            !server.env_names.is_empty() || !server.header_names.is_empty(),
        )
        .await
    }

    /// Removes a stored server, its secret values and its grants; returns whether it existed.
    /// Its access requests stay, as history.
    pub async fn remove_mcp_server(&self, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query("DELETE FROM mcp_servers WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM mcp_grants WHERE server_name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        for secret in [mcp_server_secret(name), mcp_oauth_secret(name)] {
            sqlx::query("DELETE FROM secrets WHERE name = $1")
                .bind(secret)
                .execute(&mut *tx)
                .await?;
        }
        // What the bridge keeps beside the tokens (`mcp-oauth/<server>/challenge`).
        let beside = format!("{}/", mcp_oauth_secret(name));
        sqlx::query("DELETE FROM secrets WHERE substr(name, 1, $1) = $2")
            .bind(i32::try_from(beside.chars().count()).unwrap_or(i32::MAX))
            .bind(beside)
            .execute(&mut *tx)
            .await?;
        self.commit_mcp_change(tx).await?;
        Ok(done.rows_affected() > 0)
    }

    /// Announces a change that is not in the tables (a server was signed in to), so running
    /// gateways retry servers they could not connect.
    pub async fn touch_mcp(&self) -> Result<(), StoreError> {
        let tx = self.pool().begin().await?;
        self.commit_mcp_change(tx).await
    }

    /// The revision of the MCP tables: it changes whenever a server, grant or request does.
    pub async fn mcp_revision(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT revision FROM mcp_revision WHERE id = 1")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get("revision")?)
    }

    /// Wakes `wake` whenever another process announces an MCP change (PostgreSQL's
    /// `LISTEN talon_mcp`, reconnecting with backoff if the listening connection drops). A
    /// no-op on SQLite, where readers poll [`Store::mcp_revision`]. The listener stops when
    /// `wake` has no other owner.
    pub fn notify_mcp_changes(&self, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.listen(MCP_CHANNEL, wake);
    }

    /// Records a change made in `tx`, commits it, and tells the other processes: PostgreSQL's
    /// `NOTIFY` goes out with the commit; on SQLite the revision file is rewritten after it.
    pub(crate) async fn commit_mcp_change(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Any>,
    ) -> Result<(), StoreError> {
        let row = sqlx::query(
            "UPDATE mcp_revision SET revision = revision + 1 WHERE id = 1 RETURNING revision",
        )
        .fetch_one(&mut *tx)
        .await?;
        let revision: i64 = row.try_get("revision")?;
        if self.engine() == Engine::Postgres {
            sqlx::query(sqlx::AssertSqlSafe(format!("NOTIFY {MCP_CHANNEL}")))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.write_mcp_stamp(revision);
        Ok(())
    }
}

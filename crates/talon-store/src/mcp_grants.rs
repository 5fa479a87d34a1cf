//! Who may use which bridged MCP server: per-agent and per-user grants (enabled, tool allow,
//! tool deny) and access requests (pending → approved, which creates the grant in the same
//! transaction, or rejected).
//!
//! The store keeps the facts; what they mean for one call is decided in one place,
//! `talon_bridge::access`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use sqlx::Row;

use crate::fields::{invalid, json_list, parse_list};
use crate::mcp_servers::valid_server_name;
use crate::{Store, StoreError, now_ms};

/// Whom a grant or request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubjectKind {
    Agent,
    User,
}

impl SubjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::Agent => "agent",
            SubjectKind::User => "user",
        }
    }

    /// Whom a grant or request names: exactly one of an agent and a user.
    pub fn of(agent: Option<String>, user: Option<String>) -> Result<(Self, String), StoreError> {
        match (agent, user) {
            (Some(a), None) => Ok((SubjectKind::Agent, a)),
            (None, Some(u)) => Ok((SubjectKind::User, u)),
            _ => Err(invalid(
                "subject",
                "give exactly one of an agent and a user",
            )),
        }
    }

    /// `agent` or `user`.
    pub fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "agent" => Ok(SubjectKind::Agent),
            "user" => Ok(SubjectKind::User),
            other => Err(invalid(
                "subject kind",
                format!("{other:?}: use agent or user"),
            )),
        }
    }
}

/// A grant of one server to one agent or user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpGrant {
    pub server: String,
    pub kind: SubjectKind,
    pub subject: String,
    /// A disabled grant refuses the server outright.
    pub enabled: bool,
    /// Tools allowed (raw tool names); empty means every tool.
    pub tool_allow: Vec<String>,
    /// Tools refused; a tool in both lists is refused.
    pub tool_deny: Vec<String>,
    pub granted_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Where an access request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Pending,
    Approved,
    Rejected,
}

impl RequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Approved => "approved",
            RequestStatus::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "pending" => Ok(RequestStatus::Pending),
            "approved" => Ok(RequestStatus::Approved),
            "rejected" => Ok(RequestStatus::Rejected),
            other => Err(invalid(
                "request status",
                format!("{other:?}: use pending, approved or rejected"),
            )),
        }
    }
}

/// A request for access to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpAccessRequest {
    pub id: i64,
    pub server: String,
    pub kind: SubjectKind,
    pub subject: String,
    /// The tools asked for; empty asks for every tool.
    pub tool_allow: Vec<String>,
    pub reason: String,
    pub requested_by: String,
    pub status: RequestStatus,
    pub reviewed_by: String,
    pub review_note: String,
    pub created_at: i64,
    pub reviewed_at: Option<i64>,
}

fn check_subject(subject: &str) -> Result<(), StoreError> {
    if subject.is_empty() || subject.len() > 256 || subject.chars().any(char::is_control) {
        return Err(invalid(
            "subject",
            format!("{subject:?}: 1-256 characters, no control characters"),
        ));
    }
    Ok(())
}

fn check_server(server: &str) -> Result<(), StoreError> {
    if valid_server_name(server) {
        Ok(())
    } else {
        Err(invalid(
            "server name",
            format!("{server:?}: use 1-64 letters, digits, _ and -"),
        ))
    }
}

fn check_tools(tools: &[String]) -> Result<(), StoreError> {
    match tools
        .iter()
        .find(|t| t.is_empty() || t.len() > 256 || t.chars().any(char::is_control))
    {
        Some(t) => Err(invalid(
            "tool name",
            format!("{t:?}: give the server's own tool names"),
        )),
        None => Ok(()),
    }
}

fn grant_of(row: &sqlx::any::AnyRow) -> Result<McpGrant, StoreError> {
    Ok(McpGrant {
        server: row.try_get("server_name")?,
        kind: SubjectKind::parse(&row.try_get::<String, _>("subject_kind")?)?,
        subject: row.try_get("subject")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        tool_allow: parse_list("tool_allow", &row.try_get::<String, _>("tool_allow")?)?,
        tool_deny: parse_list("tool_deny", &row.try_get::<String, _>("tool_deny")?)?,
        granted_by: row.try_get("granted_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn request_of(row: &sqlx::any::AnyRow) -> Result<McpAccessRequest, StoreError> {
    Ok(McpAccessRequest {
        id: row.try_get("id")?,
        server: row.try_get("server_name")?,
        kind: SubjectKind::parse(&row.try_get::<String, _>("subject_kind")?)?,
        subject: row.try_get("subject")?,
        tool_allow: parse_list("tool_allow", &row.try_get::<String, _>("tool_allow")?)?,
        reason: row.try_get("reason")?,
        requested_by: row.try_get("requested_by")?,
        status: RequestStatus::parse(&row.try_get::<String, _>("status")?)?,
        reviewed_by: row.try_get("reviewed_by")?,
        review_note: row.try_get("review_note")?,
        created_at: row.try_get("created_at")?,
        reviewed_at: row.try_get("reviewed_at")?,
    })
}

const GRANT_COLUMNS: &str = "server_name, subject_kind, subject, enabled, tool_allow, tool_deny, granted_by, created_at, updated_at";
const REQUEST_COLUMNS: &str = "id, server_name, subject_kind, subject, tool_allow, reason, requested_by, status, reviewed_by, review_note, created_at, reviewed_at";

/// What a grant says (the rest of [`McpGrant`] is bookkeeping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantSpec {
    pub server: String,
    pub kind: SubjectKind,
    pub subject: String,
    pub enabled: bool,
    pub tool_allow: Vec<String>,
    pub tool_deny: Vec<String>,
    pub granted_by: String,
}

async fn upsert_grant(
    conn: &mut sqlx::AnyConnection,
    grant: &GrantSpec,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO mcp_grants (server_name, subject_kind, subject, enabled, tool_allow, tool_deny, granted_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (server_name, subject_kind, subject) DO UPDATE SET enabled = excluded.enabled, tool_allow = excluded.tool_allow, tool_deny = excluded.tool_deny, granted_by = excluded.granted_by, updated_at = excluded.updated_at",
    )
    .bind(&grant.server)
    .bind(grant.kind.as_str())
    .bind(&grant.subject)
    .bind(i64::from(grant.enabled))
    .bind(json_list(&grant.tool_allow)?)
    .bind(json_list(&grant.tool_deny)?)
    .bind(&grant.granted_by)
    .bind(now)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whose grants: (server, agent, user).
type GrantKey = (String, Option<String>, Option<String>);
/// The stamp the remembered grants were read at, and the grants.
type Remembered = (Option<String>, HashMap<GrantKey, Vec<McpGrant>>);

/// SQLite: grants remembered at the revision a small file beside the database announces.
/// Every change to the MCP tables, by any process, replaces the file (a new file renamed over
/// it) after its commit, so a reader that finds the file unchanged knows its remembered grants
/// are current: no database round trip per bridged call.
#[derive(Debug)]
pub(crate) struct GrantCache {
    path: PathBuf,
    state: Mutex<Remembered>,
    /// The stamp file as last opened, and what it said. Writers never change a stamp file in
    /// place, they rename a new one over it, which unlinks this one: while it still has a link
    /// it is the current stamp and its content is still `String`, known from one `fstat` on an
    /// open descriptor (no path lookup, no read).
    open: Mutex<Option<(std::fs::File, String)>>,
}

impl GrantCache {
    /// The cache for a `sqlite://PATH…` URL; none for PostgreSQL or in-memory databases.
    pub(crate) fn for_url(url: &str) -> Option<Self> {
        let path = url.strip_prefix("sqlite://")?;
        let path = path.split('?').next().unwrap_or(path);
        if path.is_empty() || path.contains(":memory:") {
            return None;
        }
        Some(Self {
            path: PathBuf::from(format!("{path}-mcp-revision")),
            state: Mutex::default(),
            open: Mutex::default(),
        })
    }

    /// What the stamp file says now; `None` when there is none.
    fn stamp(&self) -> Option<String> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((file, said)) = open.as_ref()
            && file.metadata().is_ok_and(|m| m.nlink() > 0)
        {
            return Some(said.clone());
        }
        *open = None;
        let mut file = std::fs::File::open(&self.path).ok()?;
        let mut said = String::new();
        file.read_to_string(&mut said).ok()?;
        *open = Some((file, said.clone()));
        Some(said)
    }
}

impl Store {
    /// Writes `revision` to the file readers compare (SQLite): every process on this host then
    /// knows its remembered grants are stale.
    pub(crate) fn write_mcp_stamp(&self, revision: i64) {
        let Some(cache) = &self.mcp_stamp else {
            return;
        };
        let tmp = cache
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::write(&tmp, format!("{revision}\n"))
            .and_then(|()| std::fs::rename(&tmp, &cache.path));
        if let Err(e) = written {
            // Readers then fall back to the database on every call.
            tracing::warn!(error = %e, path = %cache.path.display(), "cannot announce an MCP change");
            let _ = std::fs::remove_file(&cache.path);
        }
    }

    /// [`Store::mcp_grants_for`], answered from memory while no process has changed the MCP
    /// tables since (SQLite), so a bridged call costs no database round trip; a change by any
    /// process holds on the next call. PostgreSQL reads the database every time.
    pub async fn mcp_grants_for_current(
        &self,
        server: &str,
        agent: Option<&str>,
        user: Option<&str>,
    ) -> Result<Vec<McpGrant>, StoreError> {
        let Some(cache) = &self.mcp_stamp else {
            return self.mcp_grants_for(server, agent, user).await;
        };
        let stamp = match cache.stamp() {
            Some(stamp) => stamp,
            None => {
                // No process has announced a change yet: announce the current revision.
                self.write_mcp_stamp(self.mcp_revision().await?);
                match cache.stamp() {
                    Some(stamp) => stamp,
                    None => return self.mcp_grants_for(server, agent, user).await,
                }
            }
        };
        let key = (
            server.to_string(),
            agent.map(str::to_string),
            user.map(str::to_string),
        );
        {
            let mut state = cache.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.0.as_deref() == Some(stamp.as_str()) {
                if let Some(hit) = state.1.get(&key) {
                    return Ok(hit.clone());
                }
            } else {
                *state = (Some(stamp.clone()), HashMap::new());
            }
        }
        // Read after the stamp: what is read is at least as new as the stamp it is kept under.
        let grants = self.mcp_grants_for(server, agent, user).await?;
        let mut state = cache.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.0.as_deref() == Some(stamp.as_str()) && state.1.len() < 10_000 {
            state.1.insert(key, grants.clone());
        }
        Ok(grants)
    }

    /// Creates or replaces a grant. It takes effect on the next call.
    pub async fn put_mcp_grant(&self, grant: &GrantSpec) -> Result<(), StoreError> {
        check_server(&grant.server)?;
        check_subject(&grant.subject)?;
        check_tools(&grant.tool_allow)?;
        check_tools(&grant.tool_deny)?;
        let mut tx = self.pool().begin().await?;
        upsert_grant(&mut tx, grant, now_ms()).await?;
        self.commit_mcp_change(tx).await?;
        Ok(())
    }

    /// Withdraws a grant; returns whether there was one.
    pub async fn remove_mcp_grant(
        &self,
        server: &str,
        kind: SubjectKind,
        subject: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "DELETE FROM mcp_grants WHERE server_name = $1 AND subject_kind = $2 AND subject = $3",
        )
        .bind(server)
        .bind(kind.as_str())
        .bind(subject)
        .execute(&mut *tx)
        .await?;
        self.commit_mcp_change(tx).await?;
        Ok(done.rows_affected() > 0)
    }

    /// Grants, of one server or of all, by server, kind and subject.
    pub async fn mcp_grants(&self, server: Option<&str>) -> Result<Vec<McpGrant>, StoreError> {
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM mcp_grants WHERE ($1 = '' OR server_name = $1) ORDER BY server_name, subject_kind, subject"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(server.unwrap_or_default())
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(grant_of).collect()
    }

    /// The grants of `server` that concern a call by `agent` for `user` (at most two).
    pub async fn mcp_grants_for(
        &self,
        server: &str,
        agent: Option<&str>,
        user: Option<&str>,
    ) -> Result<Vec<McpGrant>, StoreError> {
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM mcp_grants WHERE server_name = $1 AND \
             ((subject_kind = 'agent' AND subject = $2) OR (subject_kind = 'user' AND subject = $3))"
        );
        // An absent agent or user matches no row: control characters never appear in a subject.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(server)
            .bind(agent.unwrap_or("\u{1}"))
            .bind(user.unwrap_or("\u{1}"))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(grant_of).collect()
    }

    /// Files a request for access; returns its id.
    pub async fn request_mcp_access(
        &self,
        server: &str,
        kind: SubjectKind,
        subject: &str,
        tool_allow: &[String],
        reason: &str,
        requested_by: &str,
    ) -> Result<i64, StoreError> {
        check_server(server)?;
        check_subject(subject)?;
        check_tools(tool_allow)?;
        if reason.len() > 4000 {
            return Err(invalid("reason", "at most 4000 bytes"));
        }
        let mut tx = self.pool().begin().await?;
        let row = sqlx::query(
            "INSERT INTO mcp_access_requests (server_name, subject_kind, subject, tool_allow, reason, requested_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(server)
        .bind(kind.as_str())
        .bind(subject)
        .bind(json_list(tool_allow)?)
        .bind(reason)
        .bind(requested_by)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?;
        self.commit_mcp_change(tx).await?;
        Ok(row.try_get("id")?)
    }

    /// Access requests, all or those in one status, oldest first.
    pub async fn mcp_access_requests(
        &self,
        status: Option<RequestStatus>,
    ) -> Result<Vec<McpAccessRequest>, StoreError> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM mcp_access_requests WHERE ($1 = '' OR status = $1) ORDER BY id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(status.map(RequestStatus::as_str).unwrap_or_default())
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(request_of).collect()
    }

    /// Approves or rejects a pending request. Approval creates (or replaces) the grant it asks
    /// for in the same transaction; a request already reviewed, by this or another process, is
    /// refused.
    pub async fn review_mcp_access(
        &self,
        id: i64,
        approve: bool,
        reviewer: &str,
        note: &str,
    ) -> Result<McpAccessRequest, StoreError> {
        let status = if approve {
            RequestStatus::Approved
        } else {
            RequestStatus::Rejected
        };
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE mcp_access_requests SET status = $1, reviewed_by = $2, review_note = $3, reviewed_at = $4 \
             WHERE id = $5 AND status = 'pending'",
        )
        .bind(status.as_str())
        .bind(reviewer)
        .bind(note)
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM mcp_access_requests WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(request) = row.as_ref().map(request_of).transpose()? else {
            return Err(StoreError::NotFound {
                what: "access request",
                key: id.to_string(),
            });
        };
        if done.rows_affected() == 0 {
            return Err(invalid(
                "access request",
                format!("{id} was already {}", request.status.as_str()),
            ));
        }
        if approve {
            let grant = GrantSpec {
                server: request.server.clone(),
                kind: request.kind,
                subject: request.subject.clone(),
                enabled: true,
                tool_allow: request.tool_allow.clone(),
                tool_deny: Vec::new(),
                granted_by: reviewer.to_string(),
            };
            upsert_grant(&mut tx, &grant, now).await?;
        }
        self.commit_mcp_change(tx).await?;
        Ok(request)
    }
}

//! The audit log of tool calls.

use sqlx::Row;

use crate::{Engine, Store, StoreError, now_ms};

/// One audited call (the store's side of `talon_core::events::AuditRecord`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub tool: String,
    pub session_key: String,
    pub agent_key: Option<String>,
    pub user_id: Option<String>,
    pub args_digest: String,
    pub is_error: bool,
    pub duration_us: i64,
    pub stage: Option<String>,
}

/// Rows per INSERT statement: 9 parameters each, far below SQLite's and PostgreSQL's limits.
const ROWS_PER_INSERT: usize = 64;
/// Columns bound per row.
const COLUMNS: usize = 9;

/// `INSERT … VALUES (…), (…)` for `rows` rows. PostgreSQL gets numbered `$N` placeholders. SQLite
/// gets anonymous `?` ones, bound in order: sqlx looks up each numbered parameter's name, and SQLite
/// finds a name by scanning every name in the statement, so numbered placeholders made binding a
/// full batch (576 parameters) quadratic; anonymous ones have no names to scan.
fn insert_sql(rows: usize, engine: Engine) -> String {
    let mut sql = String::from(
        "INSERT INTO audit_log (tool, session_key, agent_key, user_id, args_digest, is_error, duration_us, stage, created_at) VALUES ",
    );
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for col in 0..COLUMNS {
            if col > 0 {
                sql.push_str(", ");
            }
            match engine {
                Engine::Sqlite => sql.push('?'),
                Engine::Postgres => sql.push_str(&format!("${}", row * COLUMNS + col + 1)),
            }
        }
        sql.push(')');
    }
    sql
}

impl Store {
    /// Appends entries in one transaction, many rows per statement: each statement is a round
    /// trip (to SQLite's worker thread or to PostgreSQL), so a busy session's audit costs a few
    /// statements per batch instead of one per call.
    pub async fn record_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        for chunk in entries.chunks(ROWS_PER_INSERT) {
            // Only placeholders are generated; every value is bound.
            let mut query =
                sqlx::query(sqlx::AssertSqlSafe(insert_sql(chunk.len(), self.engine())));
            for e in chunk {
                query = query
                    .bind(&e.tool)
                    .bind(&e.session_key)
                    .bind(e.agent_key.as_deref())
                    .bind(e.user_id.as_deref())
                    .bind(&e.args_digest)
                    .bind(i64::from(e.is_error))
                    .bind(e.duration_us)
                    .bind(e.stage.as_deref())
                    .bind(now);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The most recent entries of a session, newest first.
    pub async fn audit_for_session(
        &self,
        session_key: &str,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT tool, session_key, agent_key, user_id, args_digest, is_error, duration_us, stage FROM audit_log \
             WHERE session_key = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(session_key)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    tool: r.try_get("tool")?,
                    session_key: r.try_get("session_key")?,
                    agent_key: r.try_get("agent_key")?,
                    user_id: r.try_get("user_id")?,
                    args_digest: r.try_get("args_digest")?,
                    is_error: r.try_get::<i64, _>("is_error")? != 0,
                    duration_us: r.try_get("duration_us")?,
                    stage: r.try_get("stage")?,
                })
            })
            .collect()
    }
}

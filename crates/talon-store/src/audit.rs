//! The audit log of tool calls.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

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

impl Store {
    /// Appends entries in one transaction.
    pub async fn record_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let now = now_ms();
        for e in entries {
            sqlx::query(
                "INSERT INTO audit_log (tool, session_key, agent_key, user_id, args_digest, is_error, duration_us, stage, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(&e.tool)
            .bind(&e.session_key)
            .bind(e.agent_key.as_deref())
            .bind(e.user_id.as_deref())
            .bind(&e.args_digest)
            .bind(i64::from(e.is_error))
            .bind(e.duration_us)
            .bind(e.stage.as_deref())
            .bind(now)
            .execute(&mut *tx)
            .await?;
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

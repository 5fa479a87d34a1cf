//! Handoff routes (seed 000 §10): a chat — a channel and the session a person talks in — routed
//! to another agent until cleared. Kept in the store so that every gateway routes the chat's
//! next message the same way.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HandoffRoute {
    pub channel: String,
    /// The session key the person talks in.
    pub chat: String,
    pub from_agent: String,
    pub target_agent: String,
    /// The target's own session for this chat.
    pub target_session: String,
    pub user_id: String,
    pub reason: String,
    pub created_at: i64,
}

const COLUMNS: &str =
    "channel, chat, from_agent, target_agent, target_session, user_id, reason, created_at";

fn route(row: &sqlx::any::AnyRow) -> Result<HandoffRoute, StoreError> {
    Ok(HandoffRoute {
        channel: row.try_get("channel")?,
        chat: row.try_get("chat")?,
        from_agent: row.try_get("from_agent")?,
        target_agent: row.try_get("target_agent")?,
        target_session: row.try_get("target_session")?,
        user_id: row.try_get("user_id")?,
        reason: row.try_get("reason")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Routes the chat of `route` to its target (replacing any route of that chat).
    pub async fn set_handoff(&self, route: &HandoffRoute) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO handoff_routes (channel, chat, from_agent, target_agent, target_session, user_id, reason, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (channel, chat) DO UPDATE SET from_agent = excluded.from_agent, target_agent = excluded.target_agent, target_session = excluded.target_session, user_id = excluded.user_id, reason = excluded.reason, created_at = excluded.created_at",
        )
        .bind(&route.channel)
        .bind(&route.chat)
        .bind(&route.from_agent)
        .bind(&route.target_agent)
        .bind(&route.target_session)
        .bind(&route.user_id)
        .bind(&route.reason)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Where `channel`'s chat `chat` is routed, if it was handed off.
    pub async fn handoff(
        &self,
        channel: &str,
        chat: &str,
    ) -> Result<Option<HandoffRoute>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM handoff_routes WHERE channel = $1 AND chat = $2"
        )))
        .bind(channel)
        .bind(chat)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(route).transpose()
    }

    /// The route whose target talks in `target_session` (the handed-to agent's view).
    pub async fn handoff_into(
        &self,
        target_session: &str,
    ) -> Result<Option<HandoffRoute>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM handoff_routes WHERE target_session = $1"
        )))
        .bind(target_session)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(route).transpose()
    }

    /// Removes the route of `channel`'s chat `chat`; whether there was one.
    pub async fn clear_handoff(&self, channel: &str, chat: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM handoff_routes WHERE channel = $1 AND chat = $2")
            .bind(channel)
            .bind(chat)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

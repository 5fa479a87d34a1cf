//! A team's mailbox: one row per recipient, read once. Reading marks what it returns read in the
//! same statement, so two readers (two gateways running the same member) never both get a
//! message. Messages to a member that left or whose run died stay until read: nothing is
//! dropped. A message belongs to the user whose conversation sent it, and is read only in that
//! user's conversations.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// Characters of a message at most.
const MAX_BODY: usize = 20_000;

/// One message in a member's mailbox.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TeamMessage {
    pub id: i64,
    pub team: String,
    pub sender: String,
    pub recipient: String,
    pub body: String,
    pub broadcast: bool,
    pub created_at: i64,
}

fn message(row: &sqlx::any::AnyRow) -> Result<TeamMessage, StoreError> {
    Ok(TeamMessage {
        id: row.try_get("id")?,
        team: row.try_get("team")?,
        sender: row.try_get("sender")?,
        recipient: row.try_get("recipient")?,
        body: row.try_get("body")?,
        broadcast: row.try_get::<i64, _>("broadcast")? != 0,
        created_at: row.try_get("created_at")?,
    })
}

fn check_body(body: &str) -> Result<(), StoreError> {
    if body.trim().is_empty() {
        return Err(StoreError::Invalid {
            what: "team message",
            reason: "it is empty; write what the teammate should know or do".into(),
        });
    }
    if body.chars().count() > MAX_BODY {
        return Err(StoreError::Invalid {
            what: "team message",
            reason: format!(
                "it is longer than {MAX_BODY} characters; post long work as a task instead"
            ),
        });
    }
    Ok(())
}

/// The lead and the members of `$1`, as SQL.
const EVERYONE: &str =
    "SELECT agent FROM team_members WHERE team = $1 UNION SELECT lead FROM teams WHERE name = $1";

impl Store {
    /// Sends `body` from `sender` to `recipient` (the lead or a member of `team`), in `user`'s
    /// conversations.
    pub async fn send_team_message(
        &self,
        team: &str,
        sender: &str,
        recipient: &str,
        user: &str,
        body: &str,
    ) -> Result<TeamMessage, StoreError> {
        check_body(body)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO team_messages (team, sender, recipient, body, broadcast, created_at, user_id) \
             SELECT $1, $2, $3, $4, 0, $5, $6 WHERE $3 IN ({EVERYONE}) \
             RETURNING id, team, sender, recipient, body, broadcast, created_at"
        )))
        .bind(team)
        .bind(sender)
        .bind(recipient)
        .bind(body)
        .bind(now_ms())
        .bind(user)
        .fetch_optional(self.pool())
        .await?;
        match row {
            Some(row) => message(&row),
            None => Err(StoreError::Invalid {
                what: "team message",
                reason: format!(
                    "{recipient} is not on team {team}; send to its lead or one of its members"
                ),
            }),
        }
    }

    /// Sends `body` from `sender` to everyone else on `team`; how many got it.
    pub async fn broadcast_team_message(
        &self,
        team: &str,
        sender: &str,
        user: &str,
        body: &str,
    ) -> Result<u64, StoreError> {
        check_body(body)?;
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO team_messages (team, sender, recipient, body, broadcast, created_at, user_id) \
             SELECT $1, $2, everyone.agent, $3, 1, $4, $5 FROM ({EVERYONE}) AS everyone WHERE everyone.agent <> $2"
        )))
        .bind(team)
        .bind(sender)
        .bind(body)
        .bind(now_ms())
        .bind(user)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Takes `recipient`'s unread messages on `team` (at most `limit`, oldest first), marking
    /// them read in the same statement.
    pub async fn read_team_messages(
        &self,
        team: &str,
        recipient: &str,
        user: &str,
        limit: i64,
    ) -> Result<Vec<TeamMessage>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (SELECT id FROM team_messages WHERE team = $1 AND recipient = $2 AND user_id = $5 AND read_at = 0 \
             ORDER BY id LIMIT $3{}) \
             UPDATE team_messages SET read_at = $4 WHERE read_at = 0 AND id IN (SELECT id FROM picked) \
             RETURNING id, team, sender, recipient, body, broadcast, created_at",
            self.skip_locked()
        )))
        .bind(team)
        .bind(recipient)
        .bind(limit)
        .bind(now_ms())
        .bind(user)
        .fetch_all(self.pool())
        .await?;
        let mut messages = rows.iter().map(message).collect::<Result<Vec<_>, _>>()?;
        messages.sort_by_key(|m| m.id);
        Ok(messages)
    }

    /// `team`'s messages in `user`'s conversations, read or not, newest first (at most
    /// `limit`): what an operator's view shows. Listing marks nothing read.
    pub async fn team_messages(
        &self,
        team: &str,
        user: &str,
        limit: i64,
    ) -> Result<Vec<TeamMessage>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, team, sender, recipient, body, broadcast, created_at FROM team_messages \
             WHERE team = $1 AND user_id = $2 ORDER BY id DESC LIMIT $3",
        )
        .bind(team)
        .bind(user)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(message).collect()
    }

    /// How many unread messages `recipient` has on `team`.
    pub async fn unread_team_messages(
        &self,
        team: &str,
        recipient: &str,
        user: &str,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM team_messages WHERE team = $1 AND recipient = $2 AND user_id = $3 AND read_at = 0",
        )
        .bind(team)
        .bind(recipient)
        .bind(user)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}

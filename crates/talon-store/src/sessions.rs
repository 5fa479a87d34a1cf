//! Agent sessions and their messages. A turn's messages are appended in one transaction when
//! the turn ends ([`Store::finish_turn`]), so a crash mid-turn loses the unfinished turn whole
//! and never saves half of it; the session then shows the turn as interrupted.
//!
//! A session belongs to one agent and one owner: the end user whose turns it holds, or nobody
//! for calls that name no user. Several users share one gateway, so a session of another user
//! is as invisible as a nonexistent one: [`Store::owned_session`] and [`Store::sessions`] match
//! the owner in the query, and [`Store::begin_turn`] never continues a session of another
//! agent or owner. [`Store::session`] is the runtime's own lookup of a key it already checked.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionRecord {
    pub key: String,
    pub agent_key: String,
    /// The end user whose session this is; empty for calls that name no user.
    pub owner: String,
    /// `idle`, `running` (a turn is under way) or `interrupted` (the last turn never finished).
    pub state: String,
    pub turns: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Why the last finished turn ended.
    pub last_stop: String,
    /// A summary of the messages up to `summary_through` (empty: never compacted).
    pub summary: String,
    /// The last message `summary` covers; later messages are the live history.
    pub summary_through: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What [`Store::begin_turn`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnStart {
    /// The number of the turn now running (1 for a new session).
    pub turn: i64,
    /// The previous turn never finished (its process died); nothing of it was saved.
    pub previous_interrupted: bool,
}

const COLUMNS: &str = "session_key, agent_key, owner, state, turns, input_tokens, output_tokens, last_stop, summary, summary_through, created_at, updated_at";

fn record(row: &sqlx::any::AnyRow) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        key: row.try_get("session_key")?,
        agent_key: row.try_get("agent_key")?,
        owner: row.try_get("owner")?,
        state: row.try_get("state")?,
        turns: row.try_get("turns")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        last_stop: row.try_get("last_stop")?,
        summary: row.try_get("summary")?,
        summary_through: row.try_get("summary_through")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A session of another agent or user, refused without saying whose it is.
fn taken(key: &str) -> StoreError {
    StoreError::Invalid {
        what: "session key",
        reason: format!(
            "session {key:?} is taken by another agent or user; choose another session key"
        ),
    }
}

pub(crate) fn valid_session_key(key: &str) -> Result<(), StoreError> {
    if (1..=512).contains(&key.len()) && !key.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "session key",
            reason: format!("{key:?}: use 1-512 characters, no control characters"),
        })
    }
}

impl Store {
    /// Marks a turn of `key` as running, creating the session for `agent` and `owner` (the end
    /// user; `None` for none) if it is new. A session of another agent or owner is refused,
    /// without saying whose it is. A turn still marked running from before (its process died) is
    /// reported as interrupted.
    pub async fn begin_turn(
        &self,
        key: &str,
        agent: &str,
        owner: Option<&str>,
    ) -> Result<TurnStart, StoreError> {
        valid_session_key(key)?;
        let now = now_ms();
        // One statement, so concurrent turns never upgrade a read lock (SQLite would refuse).
        let row = sqlx::query(
            "INSERT INTO sessions (session_key, agent_key, owner, state, turns, created_at, updated_at) VALUES ($1, $2, $3, 'running', 1, $4, $4) \
             ON CONFLICT (session_key) DO UPDATE SET prev_state = sessions.state, state = 'running', turns = sessions.turns + 1, updated_at = excluded.updated_at \
             WHERE sessions.agent_key = excluded.agent_key AND sessions.owner = excluded.owner \
             RETURNING turns, prev_state",
        )
        .bind(key)
        .bind(agent)
        .bind(owner.unwrap_or_default())
        .bind(now)
        .fetch_optional(self.pool())
        .await?;
        match row {
            Some(row) => Ok(TurnStart {
                turn: row.try_get("turns")?,
                previous_interrupted: row.try_get::<String, _>("prev_state")? == "running",
            }),
            None => Err(taken(key)),
        }
    }

    /// Keeps `messages` (neutral JSON) as the running turn's checkpoint in `key`: the messages
    /// it has so far. Only while the session's turn runs; cleared when the turn is saved.
    pub async fn save_turn_checkpoint(
        &self,
        key: &str,
        messages: &[String],
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE sessions SET checkpoint = $2, updated_at = $3 WHERE session_key = $1 AND state = 'running'",
        )
        .bind(key)
        .bind(serde_json::to_string(messages).map_err(|e| StoreError::Invalid {
            what: "turn checkpoint",
            reason: e.to_string(),
        })?)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The checkpoint of the turn that was running in `key` when its process stopped (see
    /// [`Store::save_turn_checkpoint`]); empty when there is none.
    pub async fn turn_checkpoint(&self, key: &str) -> Result<Vec<String>, StoreError> {
        let row = sqlx::query("SELECT checkpoint FROM sessions WHERE session_key = $1")
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        let stored: String = match row {
            Some(row) => row.try_get("checkpoint")?,
            None => return Ok(Vec::new()),
        };
        if stored.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_str(&stored).map_err(|e| StoreError::Invalid {
            what: "turn checkpoint",
            reason: e.to_string(),
        })
    }

    /// Whether a turn runs in `key` now on some gateway: the session is `running` and its turn
    /// was begun, or its lease renewed ([`Store::renew_session_turns`]), at `fresh_since` or
    /// later. A turn whose gateway died stops counting once its lease lapses.
    pub async fn session_turn_live(&self, key: &str, fresh_since: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "SELECT 1 FROM sessions WHERE session_key = $1 AND state = 'running' AND updated_at >= $2",
        )
        .bind(key)
        .bind(fresh_since)
        .fetch_optional(self.pool())
        .await?
        .is_some())
    }

    /// Renews the turn leases of `keys`, the sessions whose turns this process runs now.
    pub async fn renew_session_turns(&self, keys: &[String]) -> Result<(), StoreError> {
        for chunk in keys.chunks(64) {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE sessions SET updated_at = $1 WHERE state = 'running' AND session_key IN ({})",
                crate::placeholders(2, chunk.len())
            )))
            .bind(now_ms());
            for key in chunk {
                query = query.bind(key);
            }
            query.execute(self.pool()).await?;
        }
        Ok(())
    }

    /// Whether a turn of `agent` and `owner` may run in `key`: the session is new or theirs.
    /// [`Store::begin_turn`] refuses the others itself; this lets the runtime refuse before it
    /// reads the session's settings and history.
    pub async fn check_session_owner(
        &self,
        key: &str,
        agent: &str,
        owner: Option<&str>,
    ) -> Result<(), StoreError> {
        valid_session_key(key)?;
        if self.owned_session(key, Some(agent), owner).await?.is_some()
            || self.session(key).await?.is_none()
        {
            Ok(())
        } else {
            Err(taken(key))
        }
    }

    /// Appends a finished turn's messages (neutral JSON, in order), adds its token counts and
    /// marks the session idle, all in one transaction.
    pub async fn finish_turn(
        &self,
        key: &str,
        turn: i64,
        messages: &[String],
        stop: &str,
        input_tokens: i64,
        output_tokens: i64,
    ) -> Result<(), StoreError> {
        self.finish_turn_delivering(
            key,
            turn,
            messages,
            stop,
            (input_tokens, output_tokens),
            &[],
        )
        .await
    }

    /// [`Store::finish_turn`] for a turn that took the results of `delivered` child runs from
    /// the outbox ([`Store::pending_deliveries`]): they are marked delivered in the same
    /// transaction that saves the turn, so a result reaches the session exactly once (a turn
    /// that crashed before saving never took it; a second turn cannot take it again).
    pub async fn finish_turn_delivering(
        &self,
        key: &str,
        turn: i64,
        messages: &[String],
        stop: &str,
        (input_tokens, output_tokens): (i64, i64),
        delivered: &[String],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        for child in delivered {
            let marked = sqlx::query(
                "UPDATE run_outbox SET delivered_at = $3 WHERE parent_session = $1 AND child_id = $2 AND delivered_at = 0",
            )
            .bind(key)
            .bind(child)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if marked.rows_affected() != 1 {
                return Err(StoreError::Invalid {
                    what: "delivery",
                    reason: format!(
                        "the result of run {child:?} was delivered to {key:?} already (or never waited for it)"
                    ),
                });
            }
        }
        let updated = sqlx::query(
            "UPDATE sessions SET state = 'idle', checkpoint = '', last_stop = $1, input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, updated_at = $4 WHERE session_key = $5",
        )
        .bind(stop)
        .bind(input_tokens)
        .bind(output_tokens)
        .bind(now)
        .bind(key)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(StoreError::Invalid {
                what: "session key",
                reason: format!("no session {key:?}: begin_turn first"),
            });
        }
        let next: i64 = sqlx::query(
            "SELECT COALESCE(MAX(seq), 0) AS last FROM session_messages WHERE session_key = $1",
        )
        .bind(key)
        .fetch_one(&mut *tx)
        .await?
        .try_get("last")?;
        for (i, message) in messages.iter().enumerate() {
            sqlx::query(
                "INSERT INTO session_messages (session_key, seq, turn, message, created_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(key)
            .bind(next + 1 + i64::try_from(i).unwrap_or(i64::MAX - next - 1))
            .bind(turn)
            .bind(message)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The messages of `key`, oldest first, at most `limit` of the newest when given.
    pub async fn session_messages(
        &self,
        key: &str,
        limit: Option<i64>,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT message FROM (SELECT seq, message FROM session_messages WHERE session_key = $1 ORDER BY seq DESC LIMIT $2) newest ORDER BY seq",
        )
        .bind(key)
        .bind(limit.unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get("message").map_err(StoreError::from))
            .collect()
    }

    /// The messages after the session's summary, oldest first, with their sequence numbers.
    pub async fn session_messages_after(
        &self,
        key: &str,
        after: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, message FROM session_messages WHERE session_key = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(key)
        .bind(after)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("seq")?, r.try_get("message")?)))
            .collect()
    }

    /// Records that `summary` stands for every message up to `through`. A summary covering
    /// less than the stored one is ignored (two compactions racing keep the longer). The
    /// messages stay stored; only what later turns are given changes.
    pub async fn compact_session(
        &self,
        key: &str,
        through: i64,
        summary: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE sessions SET summary = $1, summary_through = $2, updated_at = $3 WHERE session_key = $4 AND summary_through < $2",
        )
        .bind(summary)
        .bind(through)
        .bind(now_ms())
        .bind(key)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One session, whoever owns it: for the runtime, about a key it already checked. What a
    /// caller asks for goes through [`Store::owned_session`].
    pub async fn session(&self, key: &str) -> Result<Option<SessionRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM sessions WHERE session_key = $1"
        )))
        .bind(key)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| record(&r)).transpose()
    }

    /// Session `key` if it belongs to `owner` (the end user; `None`: calls that name no user,
    /// which see only unowned sessions) and, when given, to `agent`. Another user's session is
    /// `None`, the same as one that does not exist.
    pub async fn owned_session(
        &self,
        key: &str,
        agent: Option<&str>,
        owner: Option<&str>,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM sessions WHERE session_key = $1 AND owner = $2 AND ($3 = '' OR agent_key = $3)"
        )))
        .bind(key)
        .bind(owner.unwrap_or_default())
        .bind(agent.unwrap_or_default())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| record(&r)).transpose()
    }

    /// `owner`'s sessions (see [`Store::owned_session`]), most recently active first; only
    /// `agent`'s when given.
    pub async fn sessions(
        &self,
        agent: Option<&str>,
        owner: Option<&str>,
        limit: i64,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM sessions WHERE ($1 = '' OR agent_key = $1) AND owner = $2 ORDER BY updated_at DESC, session_key LIMIT $3"
        )))
        .bind(agent.unwrap_or(""))
        .bind(owner.unwrap_or_default())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record).collect()
    }

    /// Marks every turn still running as interrupted (a gateway starting after a crash); the
    /// number of sessions marked.
    pub async fn mark_interrupted_turns(&self) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE sessions SET state = 'interrupted', last_stop = 'interrupted', updated_at = $1 WHERE state = 'running'",
        )
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// The settings stored for session `key` (name → JSON value); empty when none are.
    pub async fn session_settings(
        &self,
        key: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
        let rows = sqlx::query("SELECT name, value FROM session_settings WHERE session_key = $1")
            .bind(key)
            .fetch_all(self.pool())
            .await?;
        let mut settings = serde_json::Map::new();
        for row in &rows {
            let name: String = row.try_get("name")?;
            let value: String = row.try_get("value")?;
            // A value that no longer parses is skipped rather than failing every turn.
            if let Ok(value) = serde_json::from_str(&value) {
                settings.insert(name, value);
            }
        }
        Ok(settings)
    }

    /// Stores setting `name` of session `key`, which must exist.
    pub async fn set_session_setting(
        &self,
        key: &str,
        name: &str,
        value: &serde_json::Value,
    ) -> Result<(), StoreError> {
        if self.session(key).await?.is_none() {
            return Err(StoreError::Invalid {
                what: "session",
                reason: format!("{key:?} is not a stored session"),
            });
        }
        sqlx::query(
            "INSERT INTO session_settings (session_key, name, value, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (session_key, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(name)
        .bind(value.to_string())
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

//! Agents, users and their context files (`SOUL.md`, `USER.md`, …).

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// GoClaw's two agent kinds: open agents keep every context file per user (with the agent's own
/// file as the template); predefined agents share their files, and only `USER.md` is per user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentType {
    Open,
    Predefined,
}

impl AgentType {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentType::Open => "open",
            AgentType::Predefined => "predefined",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "open" => Ok(AgentType::Open),
            "predefined" => Ok(AgentType::Predefined),
            other => Err(StoreError::Invalid {
                what: "agent type",
                reason: format!("{other:?}; expected open or predefined"),
            }),
        }
    }
}

impl std::str::FromStr for AgentType {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// One agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    pub key: String,
    pub agent_type: AgentType,
    /// JSON settings.
    pub settings: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub(crate) fn valid_key(what: &'static str, key: &str) -> Result<(), StoreError> {
    let ok = (1..=128).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what,
            reason: format!("{key:?}: use 1-128 characters from A-Z a-z 0-9 _ - ."),
        })
    }
}

/// Context file names are plain file names (`SOUL.md`), never paths.
fn valid_file_name(file: &str) -> Result<(), StoreError> {
    let ok = (1..=128).contains(&file.len())
        && !file.contains(['/', '\\', '\0'])
        && file != "."
        && file != "..";
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "context file name",
            reason: format!("{file:?}: use a plain file name such as SOUL.md (no directories)"),
        })
    }
}

impl Store {
    /// Creates an agent, or updates its type and settings if it exists (one statement).
    pub async fn upsert_agent(
        &self,
        key: &str,
        agent_type: AgentType,
        settings: &str,
    ) -> Result<(), StoreError> {
        valid_key("agent key", key)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO agents (key, agent_type, settings, created_at, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key) DO UPDATE SET agent_type = excluded.agent_type, settings = excluded.settings, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(agent_type.as_str())
        .bind(settings)
        .bind(now)
        .bind(now)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Creates an open agent with empty settings unless one with this key exists; an existing
    /// agent is left as it is. Returns true if it was created. One conditional statement, so
    /// concurrent starts of many instances are safe. An existing agent costs one read (no write
    /// lock), which keeps every start after the first fast.
    pub async fn ensure_agent(&self, key: &str) -> Result<bool, StoreError> {
        valid_key("agent key", key)?;
        if self.agent(key).await?.is_some() {
            return Ok(false);
        }
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO agents (key, agent_type, settings, created_at, updated_at) VALUES ($1, $2, '{}', $3, $4) \
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(AgentType::Open.as_str())
        .bind(now)
        .bind(now)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One agent.
    pub async fn agent(&self, key: &str) -> Result<Option<AgentRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT key, agent_type, settings, created_at, updated_at FROM agents WHERE key = $1",
        )
        .bind(key)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| record(&r)).transpose()
    }

    /// The agents among `keys` that exist, by key: one query however many (a turn's prompt
    /// lists its delegation targets with it).
    pub async fn agents_in(&self, keys: &[&str]) -> Result<Vec<AgentRecord>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=keys.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT key, agent_type, settings, created_at, updated_at FROM agents WHERE key IN ({}) ORDER BY key",
            placeholders.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for key in keys {
            query = query.bind(*key);
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter().map(record).collect()
    }

    /// Every agent, by key.
    pub async fn agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT key, agent_type, settings, created_at, updated_at FROM agents ORDER BY key",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record).collect()
    }

    /// Creates a user if missing.
    pub async fn ensure_user(&self, id: &str) -> Result<(), StoreError> {
        valid_key("user id", id)?;
        sqlx::query(
            "INSERT INTO users (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Sets an agent-level context file.
    pub async fn set_agent_file(
        &self,
        agent: &str,
        file: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        valid_file_name(file)?;
        self.require_agent(agent).await?;
        sqlx::query(
            "INSERT INTO agent_context_files (agent_key, file_name, content, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (agent_key, file_name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
        )
        .bind(agent)
        .bind(file)
        .bind(content)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Sets a user's own copy of a context file.
    pub async fn set_user_file(
        &self,
        agent: &str,
        user: &str,
        file: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        valid_file_name(file)?;
        self.require_agent(agent).await?;
        valid_key("user id", user)?;
        sqlx::query(
            "INSERT INTO user_context_files (agent_key, user_id, file_name, content, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (agent_key, user_id, file_name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
        )
        .bind(agent)
        .bind(user)
        .bind(file)
        .bind(content)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The agent-level file.
    pub async fn agent_file(&self, agent: &str, file: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT content FROM agent_context_files WHERE agent_key = $1 AND file_name = $2",
        )
        .bind(agent)
        .bind(file)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(|r| r.try_get::<String, _>("content")).transpose()?)
    }

    /// The user's own file, without fallback.
    pub async fn user_file(
        &self,
        agent: &str,
        user: &str,
        file: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT content FROM user_context_files WHERE agent_key = $1 AND user_id = $2 AND file_name = $3")
            .bind(agent)
            .bind(user)
            .bind(file)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.try_get::<String, _>("content")).transpose()?)
    }

    /// Deletes a user's file; returns whether it existed.
    pub async fn delete_user_file(
        &self,
        agent: &str,
        user: &str,
        file: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM user_context_files WHERE agent_key = $1 AND user_id = $2 AND file_name = $3")
            .bind(agent)
            .bind(user)
            .bind(file)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes an agent-level file; returns whether it existed.
    pub async fn delete_agent_file(&self, agent: &str, file: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM agent_context_files WHERE agent_key = $1 AND file_name = $2")
                .bind(agent)
                .bind(file)
                .execute(self.pool())
                .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes an agent, its context files (its own and its users') and its agent links; returns whether it
    /// existed. Its sessions and memory stay: they are the users' history, and an agent created
    /// again under the same key finds them.
    pub async fn delete_agent(&self, key: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        for statement in [
            "DELETE FROM agent_context_files WHERE agent_key = $1",
            "DELETE FROM user_context_files WHERE agent_key = $1",
            "DELETE FROM agent_links WHERE source = $1 OR target = $1",
        ] {
            sqlx::query(statement).bind(key).execute(&mut *tx).await?;
        }
        let done = sqlx::query("DELETE FROM agents WHERE key = $1")
            .bind(key)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// The names of a user's own files for an agent.
    pub async fn user_files(&self, agent: &str, user: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT file_name FROM user_context_files WHERE agent_key = $1 AND user_id = $2 ORDER BY file_name",
        )
        .bind(agent)
        .bind(user)
        .fetch_all(self.pool())
        .await?;
        file_names(&rows)
    }

    /// Names of an agent's files.
    pub async fn agent_files(&self, agent: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT file_name FROM agent_context_files WHERE agent_key = $1 ORDER BY file_name",
        )
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        file_names(&rows)
    }

    async fn require_agent(&self, agent: &str) -> Result<(), StoreError> {
        match self.agent(agent).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound {
                what: "agent",
                key: agent.to_string(),
            }),
        }
    }
}

/// The `file_name` column of `rows`.
fn file_names(rows: &[sqlx::any::AnyRow]) -> Result<Vec<String>, StoreError> {
    rows.iter()
        .map(|r| {
            r.try_get::<String, _>("file_name")
                .map_err(StoreError::from)
        })
        .collect()
}

fn record(row: &sqlx::any::AnyRow) -> Result<AgentRecord, StoreError> {
    Ok(AgentRecord {
        key: row.try_get("key")?,
        agent_type: AgentType::parse(&row.try_get::<String, _>("agent_type")?)?,
        settings: row.try_get("settings")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl Store {
    /// The context files an agent sees for a user, merged in this order: `base` files injected by
    /// the resolver (such as `DELEGATION.md`), then the agent's own files, then — for open agents
    /// every file, for predefined agents only `USER.md` — the user's own copies. A later layer
    /// replaces a file of the same name; files only in an earlier layer are kept, so a base-only
    /// file like `DELEGATION.md` survives per-user overrides. Sorted by name.
    pub async fn context_files(
        &self,
        agent: &str,
        user: &str,
        base: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let record = self
            .agent(agent)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "agent",
                key: agent.to_string(),
            })?;
        let mut merged: std::collections::BTreeMap<String, String> = base.iter().cloned().collect();
        let rows =
            sqlx::query("SELECT file_name, content FROM agent_context_files WHERE agent_key = $1")
                .bind(agent)
                .fetch_all(self.pool())
                .await?;
        for row in &rows {
            merged.insert(row.try_get("file_name")?, row.try_get("content")?);
        }
        if !user.is_empty() {
            let rows = sqlx::query("SELECT file_name, content FROM user_context_files WHERE agent_key = $1 AND user_id = $2")
                .bind(agent)
                .bind(user)
                .fetch_all(self.pool())
                .await?;
            for row in &rows {
                let name: String = row.try_get("file_name")?;
                if record.agent_type == AgentType::Open || name == "USER.md" {
                    merged.insert(name, row.try_get("content")?);
                }
            }
        }
        Ok(merged.into_iter().collect())
    }
}

impl Store {
    /// Replaces a context file only if it still holds `expected` (`None`: must not exist) —
    /// compare-and-set on the content, so concurrent edits never overwrite one another. Returns
    /// whether the write happened. `user` empty means the agent-level file.
    pub async fn replace_context_file(
        &self,
        agent: &str,
        user: &str,
        file: &str,
        expected: Option<&str>,
        content: &str,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let done = match (user.is_empty(), expected) {
            (true, Some(old)) => {
                sqlx::query("UPDATE agent_context_files SET content = $1, updated_at = $2 WHERE agent_key = $3 AND file_name = $4 AND content = $5")
                    .bind(content)
                    .bind(now)
                    .bind(agent)
                    .bind(file)
                    .bind(old)
                    .execute(self.pool())
                    .await?
            }
            (false, Some(old)) => {
                sqlx::query(
                    "UPDATE user_context_files SET content = $1, updated_at = $2 WHERE agent_key = $3 AND user_id = $4 AND file_name = $5 AND content = $6",
                )
                .bind(content)
                .bind(now)
                .bind(agent)
                .bind(user)
                .bind(file)
                .bind(old)
                .execute(self.pool())
                .await?
            }
            (true, None) => {
                sqlx::query(
                    "INSERT INTO agent_context_files (agent_key, file_name, content, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (agent_key, file_name) DO NOTHING",
                )
                .bind(agent)
                .bind(file)
                .bind(content)
                .bind(now)
                .execute(self.pool())
                .await?
            }
            (false, None) => {
                sqlx::query(
                    "INSERT INTO user_context_files (agent_key, user_id, file_name, content, updated_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (agent_key, user_id, file_name) DO NOTHING",
                )
                .bind(agent)
                .bind(user)
                .bind(file)
                .bind(content)
                .bind(now)
                .execute(self.pool())
                .await?
            }
        };
        Ok(done.rows_affected() == 1)
    }
}

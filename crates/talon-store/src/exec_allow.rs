//! "Allow always" answers for shell commands: whole normalised commands, per agent.
//!
//! GoClaw kept a global, in-memory set of *program names* (so approving `git status` approved
//! `git push --force`, and `./evil` collided with `evil`). Here the key is the complete
//! normalised command — every segment of it — and the agent that was approved.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// Longest command text stored (normalised commands longer than this are never remembered).
pub const MAX_ALLOWED_COMMAND: usize = 8192;

impl Store {
    /// Remembers `command` as always allowed for `agent`. Idempotent.
    pub async fn allow_command(&self, agent: &str, command: &str) -> Result<(), StoreError> {
        if command.is_empty() || command.len() > MAX_ALLOWED_COMMAND {
            return Err(StoreError::Invalid {
                what: "allowed command",
                reason: format!(
                    "it must be 1 to {MAX_ALLOWED_COMMAND} bytes long, got {}",
                    command.len()
                ),
            });
        }
        sqlx::query(
            "INSERT INTO exec_allowed_commands (agent_key, command, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_key, command) DO NOTHING",
        )
        .bind(agent)
        .bind(command)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Every (agent, command) remembered, sorted.
    pub async fn allowed_commands(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT agent_key, command FROM exec_allowed_commands ORDER BY agent_key, command",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("agent_key")?, r.try_get("command")?)))
            .collect()
    }

    /// Forgets one remembered command; returns whether it was there.
    pub async fn revoke_command(&self, agent: &str, command: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM exec_allowed_commands WHERE agent_key = $1 AND command = $2")
                .bind(agent)
                .bind(command)
                .execute(self.pool())
                .await?;
        Ok(done.rows_affected() > 0)
    }
}

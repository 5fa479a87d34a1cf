//! Named leases: a piece of work one gateway does at a time, among the gateways sharing the
//! store (a Telegram bot's updates are read by one of them: Telegram hands each update to
//! whichever reader asks, so two would split a chat's messages). The holder renews its lease;
//! when it dies, another takes the lease once it has run out.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

impl Store {
    /// Takes or renews the lease `name` for `owner` until `until` (Unix ms); `false` while
    /// another owner holds it.
    pub async fn hold_lease(
        &self,
        name: &str,
        owner: &str,
        until: i64,
    ) -> Result<bool, StoreError> {
        let held = sqlx::query(
            "INSERT INTO leases (name, owner, until_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms \
             WHERE leases.owner = excluded.owner OR leases.until_ms < $4 \
             RETURNING owner",
        )
        .bind(name)
        .bind(owner)
        .bind(until)
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?;
        Ok(match held {
            Some(row) => row.try_get::<String, _>("owner")? == owner,
            None => false,
        })
    }

    /// Gives the lease `name` up if `owner` holds it.
    pub async fn release_lease(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND owner = $2")
            .bind(name)
            .bind(owner)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

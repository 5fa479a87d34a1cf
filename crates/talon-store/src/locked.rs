//! A transaction that holds named write locks, so that a statement counting or checking rows
//! and the write that depends on it act as one across gateways: on PostgreSQL transaction-scoped
//! advisory locks on the names, on SQLite the database's one writer (`BEGIN IMMEDIATE`). The
//! run limits and the team board's checks take theirs through it.

use crate::{Engine, Store, StoreError};

/// A transaction holding named write locks.
pub(crate) struct Locked {
    pub(crate) conn: sqlx::pool::PoolConnection<sqlx::Any>,
    open: bool,
}

impl Locked {
    /// Begins the transaction holding the locks named `keys` (taken in the order given: callers
    /// name the tenant first, then any agent, so two transactions never wait on each other in
    /// a cycle).
    pub(crate) async fn begin(store: &Store, keys: &[String]) -> Result<Self, StoreError> {
        let mut conn = store.pool().acquire().await?;
        match store.engine() {
            Engine::Sqlite => {
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
            }
            Engine::Postgres => {
                sqlx::raw_sql("BEGIN").execute(&mut *conn).await?;
                // The lock is taken before the counting statement starts, so that statement's
                // snapshot sees every run a gateway that held the lock before has created.
                for key in keys {
                    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                        .bind(key)
                        .execute(&mut *conn)
                        .await?;
                }
            }
        }
        Ok(Self { conn, open: true })
    }

    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        self.open = false;
        sqlx::raw_sql("COMMIT").execute(&mut *self.conn).await?;
        Ok(())
    }

    pub(crate) async fn rollback(mut self) {
        self.open = false;
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *self.conn).await;
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if self.open {
            // A transaction left open would hold the lock: the connection is not returned.
            self.conn.close_on_drop();
        }
    }
}

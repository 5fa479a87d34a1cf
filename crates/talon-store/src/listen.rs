//! PostgreSQL's LISTEN, for processes that share one database: a channel's notifications wake
//! a [`tokio::sync::Notify`]. Used for MCP changes (`talon_mcp`) and for runs (`talon_runs`: a
//! run was cancelled or ended). On SQLite (one process) nothing listens; callers poll.

use std::sync::Arc;
use std::time::Duration;

use crate::Store;

impl Store {
    /// Wakes `wake` (`notify_waiters`) whenever another process notifies `channel`, and once
    /// after each (re)connection (a change may have landed meanwhile); reconnects with backoff
    /// if the listening connection drops. A no-op on SQLite. The listener stops when `wake` has
    /// no other owner.
    pub(crate) fn listen(&self, channel: &'static str, wake: Arc<tokio::sync::Notify>) {
        let Some(url) = self.listen_url.clone() else {
            return;
        };
        tokio::spawn(async move {
            let mut backoff = Duration::from_secs(1);
            while Arc::strong_count(&wake) > 1 {
                match sqlx::postgres::PgListener::connect(&url).await {
                    Ok(mut listener) => {
                        if let Err(e) = listener.listen(channel).await {
                            tracing::warn!(channel, error = %e, "cannot LISTEN");
                        } else {
                            backoff = Duration::from_secs(1);
                            wake.notify_waiters();
                            wake.notify_one();
                            while let Ok(Some(_)) = listener.try_recv().await {
                                wake.notify_waiters();
                                wake.notify_one();
                                if Arc::strong_count(&wake) == 1 {
                                    return;
                                }
                            }
                        }
                    }
                    Err(e) => tracing::warn!(channel, error = %e, "cannot connect to LISTEN"),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        });
    }
}

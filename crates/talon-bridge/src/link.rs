//! A server's connection over time: health pings, reconnection with backoff, and the clear
//! error its tools give while it is down.
//!
//! Every [`PING_EVERY`] the supervisor pings the server (and it notices at once when the process
//! exits or a call finds the pipe closed). A server that does not answer is reconnected with
//! exponential backoff from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`], at most [`ATTEMPTS`] times;
//! then it rests for [`COOLDOWN`] and the cycle starts again. Its tools stay listed meanwhile and
//! fail fast with a message saying what is happening.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::Notify;

use crate::ServerConfig;
use crate::server::Server;

/// Health-check interval.
pub const PING_EVERY: Duration = Duration::from_secs(30);
/// First wait before reconnecting.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(2);
/// Longest wait between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Attempts before a cooldown.
pub const ATTEMPTS: u32 = 10;
/// Rest after [`ATTEMPTS`] failed attempts.
pub const COOLDOWN: Duration = Duration::from_secs(300);

/// Where a link stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Connected,
    /// Reconnecting; the attempt in progress or next.
    Reconnecting {
        attempt: u32,
        last_error: String,
    },
    /// Every attempt failed; resting before the next round.
    CoolingDown {
        last_error: String,
    },
}

/// One configured server's connection, replaced on reconnect.
#[derive(Debug)]
pub struct Link {
    pub config: ServerConfig,
    current: RwLock<Option<Arc<Server>>>,
    status: Mutex<Status>,
    /// Wakes the supervisor (a call found the server gone).
    wake: Notify,
}

impl Link {
    pub(crate) fn new(config: ServerConfig, server: Arc<Server>) -> Self {
        Self {
            config,
            current: RwLock::new(Some(server)),
            status: Mutex::new(Status::Connected),
            wake: Notify::new(),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Where the link stands.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_status(&self, status: Status) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }

    /// The live server, or the message its tools give while it is down.
    pub fn server(&self) -> Result<Arc<Server>, String> {
        let current = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match current {
            Some(server) if server.is_alive() => Ok(server),
            _ => {
                self.wake.notify_one();
                Err(match self.status() {
                    Status::Connected => format!(
                        "MCP server {:?} has disconnected; Talon is reconnecting it. Try again in a few seconds.",
                        self.name()
                    ),
                    Status::Reconnecting {
                        attempt,
                        last_error,
                    } => format!(
                        "MCP server {:?} is disconnected; reconnect attempt {attempt} of {ATTEMPTS} is under way (last error: {last_error}). Try again in a few seconds.",
                        self.name()
                    ),
                    Status::CoolingDown { last_error } => format!(
                        "MCP server {:?} is down: {ATTEMPTS} reconnect attempts failed (last error: {last_error}); Talon tries again in {} minutes. Its tools cannot be used until then.",
                        self.name(),
                        COOLDOWN.as_secs() / 60
                    ),
                })
            }
        }
    }

    /// Reports that a call found the server gone.
    pub fn lost(&self) {
        self.wake.notify_one();
    }

    /// Keeps the link up: pings, and reconnects as the module docs say. `reconnected` is called
    /// with each new server (to re-list its tools). Returns when the link is dropped elsewhere.
    pub(crate) async fn supervise(self: Arc<Self>, reconnected: impl Fn(&Arc<Self>, &Arc<Server>)) {
        loop {
            let _ = tokio::time::timeout(PING_EVERY, self.wake.notified()).await;
            if Arc::strong_count(&self) == 1 {
                return;
            }
            let current = self
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let healthy = match &current {
                Some(server) if server.is_alive() => {
                    server.ping(Duration::from_secs(10)).await.is_ok()
                }
                _ => false,
            };
            if healthy {
                continue;
            }
            tracing::warn!(server = %self.name(), "MCP server is not answering; reconnecting");
            *self.current.write().unwrap_or_else(PoisonError::into_inner) = None;
            if let Some(old) = current.and_then(|s| Arc::try_unwrap(s).ok()) {
                old.close(Duration::from_secs(5)).await;
            }
            let server = self.reconnect().await;
            *self.current.write().unwrap_or_else(PoisonError::into_inner) =
                Some(Arc::clone(&server));
            self.set_status(Status::Connected);
            tracing::info!(server = %self.name(), "MCP server reconnected");
            reconnected(&self, &server);
        }
    }

    /// Starts the server again until it answers, with backoff and cooldowns.
    async fn reconnect(&self) -> Arc<Server> {
        loop {
            let mut backoff = FIRST_BACKOFF;
            let mut last_error = String::from("the process exited");
            for attempt in 1..=ATTEMPTS {
                self.set_status(Status::Reconnecting {
                    attempt,
                    last_error: last_error.clone(),
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                match Server::start(self.name(), &self.config.stdio, self.config.startup_timeout)
                    .await
                {
                    Ok(server) => return Arc::new(server),
                    Err(e) => {
                        tracing::warn!(server = %self.name(), attempt, error = %e, "MCP reconnect failed");
                        last_error = e.to_string();
                    }
                }
            }
            self.set_status(Status::CoolingDown { last_error });
            tokio::time::sleep(COOLDOWN).await;
        }
    }
}

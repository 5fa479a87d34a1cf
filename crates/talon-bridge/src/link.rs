//! A server's connection over time: health pings, reconnection with backoff, and the clear
//! error its tools give while it is down.
//!
//! Every [`PING_EVERY`] the supervisor pings the server (and it notices at once when the process
//! exits or a call finds the pipe closed). A server that does not answer is reconnected with
//! exponential backoff from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`], at most [`ATTEMPTS`] times;
//! then it rests for [`COOLDOWN`] and the cycle starts again. Its tools stay listed meanwhile and
//! fail fast with a message saying what is happening.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use talon_core::CallContext;

use tokio::sync::Notify;

use crate::ServerConfig;
use crate::access::{self, Access};
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
pub struct Link {
    pub config: ServerConfig,
    current: RwLock<Option<Arc<Server>>>,
    status: Mutex<Status>,
    /// Wakes the supervisor (a call found the server gone, or the link is shut down).
    wake: Notify,
    /// Set when the server is removed: the supervisor closes it and stops.
    shut: AtomicBool,
    /// Where the callers' grants come from; `None` lets every caller through.
    access: Option<Arc<dyn Access>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("config", &self.config)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Link {
    pub(crate) fn new(
        config: ServerConfig,
        server: Arc<Server>,
        access: Option<Arc<dyn Access>>,
    ) -> Self {
        Self {
            config,
            current: RwLock::new(Some(server)),
            status: Mutex::new(Status::Connected),
            wake: Notify::new(),
            shut: AtomicBool::new(false),
            access,
        }
    }

    /// Whether the caller in `ctx` may use `tool` (a raw name; `None` for resources) of this
    /// server; `Err` says why not ([`access::decide`]).
    pub async fn authorize(&self, ctx: &CallContext, tool: Option<&str>) -> Result<(), String> {
        access::Permits::new(self.access.clone(), ctx)
            .check(&self.config, tool)
            .await
    }

    /// Disconnects for good (the server was removed): the supervisor closes the session.
    pub(crate) fn shut_down(&self) {
        self.shut.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn is_shut(&self) -> bool {
        self.shut.load(Ordering::SeqCst)
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
            _ if self.is_shut() => Err(format!(
                "MCP server {:?} was removed; its tools are no longer available.",
                self.name()
            )),
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
            if self.is_shut() || Arc::strong_count(&self) == 1 {
                let old = self
                    .current
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(old) = old.and_then(|s| Arc::try_unwrap(s).ok()) {
                    old.close(Duration::from_secs(5)).await;
                }
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
            let Some(server) = self.reconnect().await else {
                return;
            };
            *self.current.write().unwrap_or_else(PoisonError::into_inner) =
                Some(Arc::clone(&server));
            self.set_status(Status::Connected);
            tracing::info!(server = %self.name(), "MCP server reconnected");
            reconnected(&self, &server);
        }
    }

    /// Waits `period` (calls that find the server down do not shorten it); false when the
    /// link is shut down meanwhile.
    async fn rest(&self, period: Duration) -> bool {
        let until = tokio::time::Instant::now() + period;
        while !self.is_shut() {
            if tokio::time::timeout_at(until, self.wake.notified())
                .await
                .is_err()
            {
                return true;
            }
        }
        false
    }

    /// Starts the server again until it answers, with backoff and cooldowns; `None` once the
    /// link is shut down.
    async fn reconnect(&self) -> Option<Arc<Server>> {
        loop {
            let mut backoff = FIRST_BACKOFF;
            let mut last_error = String::from("the process exited");
            for attempt in 1..=ATTEMPTS {
                self.set_status(Status::Reconnecting {
                    attempt,
                    last_error: last_error.clone(),
                });
                if !self.rest(backoff).await {
                    return None;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                match Server::start(
                    self.name(),
                    &self.config.transport,
                    self.config.startup_timeout,
                )
                .await
                {
                    Ok(server) => return Some(Arc::new(server)),
                    Err(e) => {
                        tracing::warn!(server = %self.name(), attempt, error = %e, "MCP reconnect failed");
                        last_error = e.to_string();
                    }
                }
            }
            self.set_status(Status::CoolingDown { last_error });
            if !self.rest(COOLDOWN).await {
                return None;
            }
        }
    }
}

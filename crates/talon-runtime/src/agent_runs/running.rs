//! The turns running in this process, by session: so a turn can be cancelled from elsewhere
//! (`POST /v1/sessions/{key}/cancel`, a run's cancellation) and an announcement waits for the
//! session's own turn to end — on any gateway: the supervisor renews the stored turn's lease of
//! each session running here, and an announcer reads it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::engine::TurnEngine;

/// The turns running now: by session, a serial number (so a turn removes only its own entry)
/// and its cancellation.
#[derive(Default)]
pub(super) struct RunningTurns {
    next: u64,
    by_session: HashMap<String, (u64, CancellationToken)>,
}

/// A running turn's entry in [`TurnEngine`]'s registry; dropping it removes the entry.
pub(super) struct RunningTurn {
    running: Arc<Mutex<RunningTurns>>,
    session: String,
    serial: u64,
}

impl Drop for RunningTurn {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running
            .by_session
            .get(&self.session)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            running.by_session.remove(&self.session);
        }
    }
}

impl TurnEngine {
    /// Cancels the turn running in `session`; `false` when none is.
    pub fn cancel(&self, session: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        match running.by_session.get(session) {
            Some((_, cancel)) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether a turn runs in `session` in this process now.
    pub fn is_running(&self, session: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_session
            .contains_key(session)
    }

    /// The sessions whose turns run in this process now (their turn leases are renewed).
    pub(crate) fn running_sessions(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_session
            .keys()
            .cloned()
            .collect()
    }

    /// Whether a turn runs in `session` anywhere: here, or on another gateway that has kept
    /// the session's turn lease (see [`talon_store::Store::session_turn_live`]) within the
    /// last lease. A store that cannot be read counts as running: an announcement waits
    /// rather than starting a second turn in the session.
    pub(crate) async fn turn_runs_anywhere(&self, session: &str) -> bool {
        if self.is_running(session) {
            return true;
        }
        let lease = i64::try_from(self.lease().as_millis()).unwrap_or(i64::MAX);
        let now = i64::try_from(talon_core::waiting::unix_ms(std::time::SystemTime::now()))
            .unwrap_or(i64::MAX);
        self.store
            .session_turn_live(session, now.saturating_sub(lease))
            .await
            .unwrap_or(true)
    }

    pub(super) fn register(&self, session: &str, cancel: &CancellationToken) -> RunningTurn {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.next += 1;
        let serial = running.next;
        running
            .by_session
            .insert(session.to_string(), (serial, cancel.clone()));
        RunningTurn {
            running: Arc::clone(&self.running),
            session: session.to_string(),
            serial,
        }
    }
}

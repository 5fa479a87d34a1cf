//! Tool state kept per session key (TodoWrite's list, Bash's working directory), with bounded
//! memory: beyond [`MAX_SESSIONS`] the least recently written session is forgotten.

use std::collections::HashMap;
use std::sync::Mutex;

/// Sessions whose state is kept in memory.
pub const MAX_SESSIONS: usize = 10_000;

/// A value per session key, evicting the least recently written beyond [`MAX_SESSIONS`].
#[derive(Debug)]
pub struct SessionMap<T> {
    inner: Mutex<Inner<T>>,
}

#[derive(Debug)]
struct Inner<T> {
    /// Bumped by every write; stamps entries for eviction.
    clock: u64,
    entries: HashMap<String, (u64, T)>,
}

impl<T> Default for SessionMap<T> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                clock: 0,
                entries: HashMap::new(),
            }),
        }
    }
}

impl<T: Clone> SessionMap<T> {
    /// The session's value, if any.
    pub fn get(&self, session: &str) -> Option<T> {
        self.inner
            .lock()
            .ok()
            .and_then(|i| i.entries.get(session).map(|(_, v)| v.clone()))
    }

    /// Sets the session's value, forgetting the least recently written session when full.
    pub fn insert(&self, session: &str, value: T) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.clock += 1;
        let stamp = inner.clock;
        inner.entries.insert(session.to_string(), (stamp, value));
        if inner.entries.len() > MAX_SESSIONS
            && let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone())
        {
            inner.entries.remove(&oldest);
        }
    }
}

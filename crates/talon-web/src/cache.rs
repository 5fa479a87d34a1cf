//! A short-lived, bounded cache of fetch results (Claude Code's WebFetch keeps pages for 15
//! minutes), so a model that reads the same page twice in a task does not fetch it twice.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an entry is served.
pub const TTL: Duration = Duration::from_secs(15 * 60);
/// Entries kept at most; the oldest goes first.
pub const MAX_ENTRIES: usize = 100;

/// Values by key, each served for [`TTL`], at most [`MAX_ENTRIES`].
#[derive(Debug)]
pub struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
    ttl: Duration,
    max: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> Default for Cache<K, V> {
    fn default() -> Self {
        Self::new(TTL, MAX_ENTRIES)
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Cache<K, V> {
    /// A cache with its own limits.
    pub fn new(ttl: Duration, max: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            max: max.max(1),
        }
    }

    /// The value for `key` if it is younger than the TTL.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(key) {
            Some((at, value)) if at.elapsed() < self.ttl => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value`, evicting expired entries and then the oldest ones beyond the bound.
    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.ttl;
        entries.retain(|_, (at, _)| at.elapsed() < ttl);
        while entries.len() >= self.max {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    entries.remove(&k);
                }
                None => break,
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_oldest_are_evicted() {
        let cache: Cache<u32, &str> = Cache::new(Duration::from_millis(50), 2);
        cache.put(1, "a");
        cache.put(2, "b");
        cache.put(3, "c");
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.get(&3), Some("c"));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.get(&3), None);
    }
}

//! Per-session rate limiting with bounded memory.
//!
//! GCRA (the generic cell rate algorithm): each key stores one instant, its "theoretical arrival
//! time" (TAT). A call is allowed when `TAT - now <= burst_tolerance`; allowing it moves the TAT
//! one emission interval (`1 hour / limit`) later. In any window of length T at most
//! `burst + T / interval` calls pass, so with the defaults (150/hour, burst 30) a session gets 30
//! calls at once and then one every 24 s.
//!
//! A key whose TAT is in the past is indistinguishable from a key never seen, so it can be dropped
//! without changing any decision: idle keys are swept whenever a shard grows past its sweep mark.
//! Memory is therefore bounded by the number of keys active in the last `burst × interval`,
//! unlike GoClaw's limiter, which keeps every session's timestamps forever. Keys are spread over
//! shards so concurrent sessions rarely contend on one lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// GoClaw's default: 150 tool calls per hour per session.
pub const DEFAULT_PER_HOUR: u32 = 150;
/// Default burst: calls allowed back to back before the hourly pace applies.
pub const DEFAULT_BURST: u32 = 30;

const SHARDS: usize = 32;
const SWEEP_MIN: usize = 64;

/// A refused call: how long until the next call would be allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool rate limit exceeded: {per_hour} calls/hour for this session (burst {burst}); retry in {}s",
    retry_after.as_secs().max(1)
)]
pub struct RateLimited {
    pub per_hour: u32,
    pub burst: u32,
    pub retry_after: Duration,
}

struct Shard {
    tats: HashMap<String, Instant>,
    sweep_at: usize,
}

/// A keyed GCRA limiter. `limit_per_hour == 0` disables limiting (returns `None` from `new`).
pub struct RateLimiter {
    per_hour: u32,
    burst: u32,
    interval: Duration,
    tolerance: Duration,
    hasher: RandomState,
    shards: Vec<Mutex<Shard>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("per_hour", &self.per_hour)
            .field("burst", &self.burst)
            .finish()
    }
}

impl RateLimiter {
    /// A limiter allowing `per_hour` calls per hour per key with `burst` back to back.
    /// Returns `None` when `per_hour` is 0 (limiting off). A burst of 0 is treated as 1.
    pub fn new(per_hour: u32, burst: u32) -> Option<Self> {
        if per_hour == 0 {
            return None;
        }
        let burst = burst.max(1);
        let interval = Duration::from_secs(3600) / per_hour;
        Some(Self {
            per_hour,
            burst,
            interval,
            tolerance: interval * (burst - 1),
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        tats: HashMap::new(),
                        sweep_at: SWEEP_MIN,
                    })
                })
                .collect(),
        })
    }

    fn shard(&self, key: &str) -> &Mutex<Shard> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    /// Counts a call for `key` now.
    pub fn check(&self, key: &str) -> Result<(), RateLimited> {
        self.check_at(key, Instant::now())
    }

    /// Counts a call for `key` at `now` (exposed for deterministic tests).
    pub fn check_at(&self, key: &str, now: Instant) -> Result<(), RateLimited> {
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let tat = shard
            .tats
            .get(key)
            .copied()
            .filter(|t| *t > now)
            .unwrap_or(now);
        let allow_at = tat.checked_sub(self.tolerance).unwrap_or(now);
        if allow_at > now {
            return Err(RateLimited {
                per_hour: self.per_hour,
                burst: self.burst,
                retry_after: allow_at - now,
            });
        }
        let next = tat + self.interval;
        match shard.tats.get_mut(key) {
            Some(slot) => *slot = next,
            None => {
                shard.tats.insert(key.to_string(), next);
                if shard.tats.len() >= shard.sweep_at {
                    shard.tats.retain(|_, t| *t > now);
                    shard.sweep_at = (shard.tats.len() * 2).max(SWEEP_MIN);
                }
            }
        }
        Ok(())
    }

    /// Number of keys currently held (idle keys may linger until their shard's next sweep).
    pub fn tracked_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|s| s.tats.len()).unwrap_or(0))
            .sum()
    }

    /// Drops every idle key now (also happens automatically as shards grow).
    pub fn sweep(&self) {
        self.sweep_at(Instant::now());
    }

    /// Drops every key idle at `now`.
    pub fn sweep_at(&self, now: Instant) {
        for shard in &self.shards {
            if let Ok(mut shard) = shard.lock() {
                shard.tats.retain(|_, t| *t > now);
                shard.sweep_at = (shard.tats.len() * 2).max(SWEEP_MIN);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn zero_disables() {
        assert!(RateLimiter::new(0, 10).is_none());
    }

    #[test]
    fn burst_then_paced() {
        let rl = RateLimiter::new(3600, 3).expect("enabled"); // one per second, burst 3
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(rl.check_at("s", t0).is_ok());
        }
        let err = rl
            .check_at("s", t0)
            .expect_err("fourth call in the same instant is refused");
        assert_eq!(err.retry_after, Duration::from_secs(1));
        assert!(err.to_string().contains("3600 calls/hour"), "{err}");
        assert!(rl.check_at("s", t0 + Duration::from_millis(999)).is_err());
        assert!(rl.check_at("s", t0 + Duration::from_secs(1)).is_ok());
        assert!(rl.check_at("s", t0 + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn keys_are_independent() {
        let rl = RateLimiter::new(1, 1).expect("enabled");
        let t0 = Instant::now();
        assert!(rl.check_at("a", t0).is_ok());
        assert!(rl.check_at("a", t0).is_err());
        assert!(rl.check_at("b", t0).is_ok());
    }

    #[test]
    fn window_expiry_restores_the_full_burst() {
        let rl = RateLimiter::new(60, 2).expect("enabled"); // one per minute
        let t0 = Instant::now();
        assert!(rl.check_at("s", t0).is_ok());
        assert!(rl.check_at("s", t0).is_ok());
        assert!(rl.check_at("s", t0).is_err());
        let later = t0 + Duration::from_secs(600);
        assert!(rl.check_at("s", later).is_ok());
        assert!(rl.check_at("s", later).is_ok());
        assert!(rl.check_at("s", later).is_err());
    }

    #[test]
    fn idle_keys_are_evicted_so_memory_is_bounded() {
        let rl = RateLimiter::new(3600, 1).expect("enabled");
        let t0 = Instant::now();
        for i in 0..10_000 {
            // Each key is idle one second after its call; calls are spaced so keys expire.
            let now = t0 + Duration::from_secs(2 * i as u64);
            rl.check_at(&format!("session-{i}"), now)
                .expect("first call of a key");
        }
        // Without eviction this would be 10,000.
        assert!(
            rl.tracked_keys() < SHARDS * SWEEP_MIN,
            "tracked {}",
            rl.tracked_keys()
        );
        rl.sweep_at(t0 + Duration::from_secs(30_000));
        assert_eq!(rl.tracked_keys(), 0);
    }

    #[test]
    fn exact_under_concurrency_with_many_keys() {
        // 16 threads × 64 keys, each thread hammering every key 20 times at the same instant:
        // exactly `burst` calls per key may pass, never more, never fewer.
        let rl = Arc::new(RateLimiter::new(10, 7).expect("enabled"));
        let t0 = Instant::now();
        let allowed: Vec<std::thread::JoinHandle<Vec<usize>>> = (0..16)
            .map(|_| {
                let rl = Arc::clone(&rl);
                std::thread::spawn(move || {
                    let mut per_key = vec![0usize; 64];
                    for _ in 0..20 {
                        for (k, count) in per_key.iter_mut().enumerate() {
                            if rl.check_at(&format!("key-{k}"), t0).is_ok() {
                                *count += 1;
                            }
                        }
                    }
                    per_key
                })
            })
            .collect();
        let mut totals = vec![0usize; 64];
        for handle in allowed {
            for (k, c) in handle.join().expect("thread").into_iter().enumerate() {
                totals[k] += c;
            }
        }
        assert!(totals.iter().all(|&t| t == 7), "{totals:?}");
    }
}

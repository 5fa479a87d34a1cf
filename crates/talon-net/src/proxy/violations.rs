//! The log of refused destinations, reported to the model after a command.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::guard::Refusal;

/// One refused destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The host as asked for (normalised, or escaped when it was not a valid host).
    pub host: String,
    /// The port as asked for.
    pub port: u16,
    /// `host:port`, IPv6 in brackets.
    pub target: String,
    /// Why it was refused, in model-facing words.
    pub reason: String,
    /// When.
    pub at: SystemTime,
}

impl Violation {
    /// The violation a refusal describes, stamped now.
    pub fn from_refusal(refusal: &Refusal) -> Self {
        Self {
            host: refusal.host.clone(),
            port: refusal.port,
            target: refusal.target.clone(),
            reason: refusal.reason.to_string(),
            at: SystemTime::now(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "network: connection to {} refused ({})",
            self.target, self.reason
        )
    }
}

/// How many violations are kept between drains; older ones are counted, not kept.
pub const MAX_VIOLATIONS: usize = 100;

#[derive(Debug, Default)]
struct ViolationLog {
    list: VecDeque<Violation>,
    dropped: usize,
}

/// A shared log of refused destinations. Cloning shares the log.
#[derive(Debug, Clone, Default)]
pub struct Violations {
    inner: Arc<Mutex<ViolationLog>>,
}

impl Violations {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, ViolationLog> {
        // A panic while holding the lock cannot leave the log inconsistent; keep using it.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a violation, dropping the oldest beyond [`MAX_VIOLATIONS`].
    pub fn record(&self, violation: Violation) {
        let mut log = self.lock();
        if log.list.len() >= MAX_VIOLATIONS {
            log.list.pop_front();
            log.dropped += 1;
        }
        log.list.push_back(violation);
    }

    /// Takes every recorded violation, oldest first, leaving the log empty.
    pub fn drain(&self) -> Vec<Violation> {
        let mut log = self.lock();
        log.dropped = 0;
        log.list.drain(..).collect()
    }

    /// How many violations are waiting to be drained.
    pub fn len(&self) -> usize {
        self.lock().list.len()
    }

    /// Whether nothing is waiting to be drained.
    pub fn is_empty(&self) -> bool {
        self.lock().list.is_empty()
    }

    /// Drains the log into lines for the model (`network: connection to … refused (…)`), or
    /// `None` when nothing was refused.
    pub fn report(&self) -> Option<String> {
        let (list, dropped) = {
            let mut log = self.lock();
            let dropped = std::mem::take(&mut log.dropped);
            (log.list.drain(..).collect::<Vec<_>>(), dropped)
        };
        if list.is_empty() {
            return None;
        }
        let mut lines: Vec<String> = Vec::with_capacity(list.len() + 1);
        if dropped > 0 {
            lines.push(format!(
                "network: {dropped} earlier refused connections not shown"
            ));
        }
        lines.extend(list.iter().map(Violation::to_string));
        Some(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_keep_the_latest_and_report() {
        let v = Violations::new();
        assert_eq!(v.report(), None);
        for i in 0..(MAX_VIOLATIONS + 3) {
            v.record(Violation {
                host: format!("h{i}.test"),
                port: 443,
                target: format!("h{i}.test:443"),
                reason: "not in the allowed domains".into(),
                at: SystemTime::now(),
            });
        }
        assert_eq!(v.len(), MAX_VIOLATIONS);
        let report = v.report().expect("something to report");
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines[0], "network: 3 earlier refused connections not shown");
        assert_eq!(
            lines[1],
            "network: connection to h3.test:443 refused (not in the allowed domains)"
        );
        assert_eq!(lines.len(), MAX_VIOLATIONS + 1);
        assert!(v.is_empty());
    }
}

//! Claude Code's per-session read state: Edit and Write refuse to touch an existing file the
//! session has not read, or that changed on disk since it was read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Files remembered per process; the least recently touched are forgotten beyond this.
pub const MAX_ENTRIES: usize = 50_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    mtime_ns: i128,
    /// Fingerprint of the whole content when the whole file was read (a touch without changes
    /// is then not a modification).
    digest: Option<u64>,
    tick: u64,
}

/// What a check against the read state says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    NotRead,
    Modified,
    Fresh,
}

/// Session key and real path of a file.
type Key = (String, PathBuf);

/// A logical clock and what each session saw.
#[derive(Debug, Default)]
struct Inner {
    tick: u64,
    seen: HashMap<Key, Seen>,
}

/// Shared by Read, Write, Edit and NotebookEdit.
#[derive(Debug, Default)]
pub struct ReadState {
    inner: Mutex<Inner>,
}

/// A cheap content fingerprint (FNV-1a).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl ReadState {
    /// Records a read (or a write by the session, which counts as knowing the content).
    pub fn record(&self, session: &str, path: &Path, mtime_ns: i128, whole: Option<&[u8]>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.tick += 1;
        let seen = Seen {
            mtime_ns,
            digest: whole.map(digest),
            tick: inner.tick,
        };
        inner
            .seen
            .insert((session.to_string(), path.to_path_buf()), seen);
        if inner.seen.len() > MAX_ENTRIES
            && let Some(oldest) = inner
                .seen
                .iter()
                .min_by_key(|(_, s)| s.tick)
                .map(|(k, _)| k.clone())
        {
            inner.seen.remove(&oldest);
        }
    }

    /// Checks a file about to be changed against what the session saw.
    pub fn check(&self, session: &str, path: &Path, mtime_ns: i128, current: &[u8]) -> Freshness {
        let Ok(guard) = self.inner.lock() else {
            return Freshness::NotRead;
        };
        match guard.seen.get(&(session.to_string(), path.to_path_buf())) {
            None => Freshness::NotRead,
            Some(seen) if seen.mtime_ns == mtime_ns => Freshness::Fresh,
            Some(seen) if seen.digest == Some(digest(current)) => Freshness::Fresh,
            Some(_) => Freshness::Modified,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states() {
        let s = ReadState::default();
        let p = Path::new("/w/a");
        assert_eq!(s.check("s", p, 1, b"x"), Freshness::NotRead);
        s.record("s", p, 1, Some(b"x"));
        assert_eq!(s.check("s", p, 1, b"x"), Freshness::Fresh);
        assert_eq!(
            s.check("s", p, 2, b"x"),
            Freshness::Fresh,
            "touched but unchanged"
        );
        assert_eq!(s.check("s", p, 2, b"y"), Freshness::Modified);
        assert_eq!(
            s.check("other", p, 1, b"x"),
            Freshness::NotRead,
            "per session"
        );
        s.record("s", p, 3, None);
        assert_eq!(
            s.check("s", p, 4, b"x"),
            Freshness::Modified,
            "partial reads compare mtime only"
        );
    }
}

//! A waiting room: requests a person must answer (approvals, questions), each with one answer
//! channel. The brokers ([`crate::approvals::Approvals`], [`crate::questions::Questions`]) add
//! their own announcing and timeouts; this holds what they share, so "answered, timed out or
//! never existed" means the same everywhere.
//!
//! Several users share one `talon serve` token (issue 22 item 4's class), so every request
//! belongs to the user of the call that made it ([`Owned`]): a user lists and answers only their
//! own, and another user's request is "never existed" to them, like one that does not exist.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::oneshot;

struct Entry<R, A> {
    request: R,
    answer: oneshot::Sender<A>,
}

/// A waiting request's user: the user of the call that made it (`None`: a call naming no user).
pub trait Owned {
    fn owner(&self) -> Option<&str>;
}

/// Requests of type `R` waiting for an answer of type `A`, by id.
pub struct WaitingRoom<R, A> {
    entries: Mutex<HashMap<String, Entry<R, A>>>,
    capacity: usize,
}

impl<R: Clone, A> std::fmt::Debug for WaitingRoom<R, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("waiting", &self.lock().len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Unix milliseconds of `t` (0 before the epoch).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl<R: Clone, A> WaitingRoom<R, A> {
    /// A room holding at most `capacity` requests at once.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry<R, A>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many requests wait now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Admits `request` under `id`; `None` when the room is full. The request leaves the room
    /// when it is answered or when the returned ticket is dropped (the waiter timed out or was
    /// cancelled), so nothing is left waiting for a caller that has gone.
    pub fn admit(&self, id: String, request: R) -> Option<Ticket<'_, R, A>> {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            return None;
        }
        let (answer, receiver) = oneshot::channel();
        entries.insert(id.clone(), Entry { request, answer });
        Some(Ticket {
            room: self,
            id,
            receiver: Some(receiver),
        })
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }
}

impl<R: Clone + Owned, A> WaitingRoom<R, A> {
    /// The requests of `user`'s calls waiting now (in no particular order); `None`: those of
    /// calls that named no user.
    pub fn requests(&self, user: Option<&str>) -> Vec<R> {
        self.lock()
            .values()
            .filter(|e| e.request.owner() == user)
            .map(|e| e.request.clone())
            .collect()
    }

    /// Answers `user`'s request `id` if `accept` agrees to the answer for it; `Ok(None)` when
    /// no such request of that user waits (another user's is not told apart from a missing
    /// one). The waiter may have just timed out, in which case the answer is moot.
    pub fn answer<E>(
        &self,
        id: &str,
        user: Option<&str>,
        answer: A,
        accept: impl FnOnce(&R) -> Result<(), E>,
    ) -> Result<Option<R>, E> {
        let mut entries = self.lock();
        let Some(entry) = entries.get(id).filter(|e| e.request.owner() == user) else {
            return Ok(None);
        };
        accept(&entry.request)?;
        let Some(entry) = entries.remove(id) else {
            return Ok(None);
        };
        let _ = entry.answer.send(answer);
        Ok(Some(entry.request))
    }
}

/// A request's place in a [`WaitingRoom`]; dropping it withdraws the request.
pub struct Ticket<'a, R: Clone, A> {
    room: &'a WaitingRoom<R, A>,
    id: String,
    receiver: Option<oneshot::Receiver<A>>,
}

impl<R: Clone, A> Ticket<'_, R, A> {
    /// Waits up to `timeout` for the answer, or for `elsewhere` (another way of asking, such
    /// as a terminal prompt) to give one; `None` if neither did.
    pub async fn wait(
        mut self,
        timeout: std::time::Duration,
        elsewhere: impl std::future::Future<Output = Option<A>>,
    ) -> Option<A> {
        let receiver = self.receiver.take()?;
        let first = async {
            tokio::select! {
                answer = receiver => answer.ok(),
                Some(answer) = elsewhere => Some(answer),
            }
        };
        tokio::time::timeout(timeout, first).await.ok().flatten()
    }
}

impl<R: Clone, A> Drop for Ticket<'_, R, A> {
    fn drop(&mut self) {
        self.room.remove(&self.id);
    }
}

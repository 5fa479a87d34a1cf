//! A call's progress reports, forwarded to the client as `notifications/progress`.
//!
//! A tool reports progress synchronously (a [`talon_core::ProgressSink`] is a plain callback) and
//! the client may be slow, so a task of its own sends the reports, in order. Two things are
//! bounded or guaranteed here:
//!
//! - **Memory.** Every report is sent while the client keeps up (clients and the conformance
//!   suite count them). A client slower than the reports gets the first [`QUEUE`] waiting ones
//!   and then the latest: once the queue is full, each new report replaces the one held beside
//!   it until the queue has drained (each cut to
//!   [`talon_core::events::MAX_PROGRESS_MESSAGE_BYTES`]). Progress only ever grows, so the latest
//!   says all the dropped ones did. A queue of every report held a gigabyte for a slow client in
//!   the review of issue 22 (item 9).
//! - **Order against the result.** A tool's last report is often made just before it returns;
//!   the result must not overtake it, or the client (which stops listening at the result) misses
//!   it. [`Forwarder::flush`] waits until every report made so far has been handed to the
//!   transport, and the call's result is sent only after.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use talon_core::ProgressUpdate;

use crate::Notify;

/// How many progress reports wait for a slow client before only the latest is kept.
pub(crate) const QUEUE: usize = 32;

/// How long a call's result waits for its progress reports to reach a client that stopped
/// reading: the result is more important than the reports.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// What the sink and the sending task share.
#[derive(Default)]
struct Shared {
    /// The newest report once the queue was full; later ones replace it.
    held: Mutex<Option<ProgressUpdate>>,
    /// Reports made and not yet handed to the transport (queued, plus one if held).
    pending: AtomicUsize,
    /// The client cannot be reached: nothing more will be sent.
    closed: AtomicBool,
    /// Woken whenever `pending` drops to zero or the client goes away.
    idle: tokio::sync::Notify,
}

impl Shared {
    fn take_held(&self) -> Option<ProgressUpdate> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// One report was sent (or could not be).
    fn sent(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.idle.notify_waiters();
    }

    fn drained(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.pending.load(Ordering::Acquire) == 0
    }
}

/// Forwards one call's progress reports for the client's `token`.
pub(crate) struct Forwarder {
    queue: tokio::sync::mpsc::Sender<ProgressUpdate>,
    shared: Arc<Shared>,
}

impl Forwarder {
    /// Starts the task that sends the reports; it ends when every sink is dropped and the last
    /// report is sent, or when the client cannot be reached.
    pub(crate) fn start(notify: impl Notify, token: ProgressToken) -> Self {
        let (queue, mut next) = tokio::sync::mpsc::channel::<ProgressUpdate>(QUEUE);
        let shared = Arc::new(Shared::default());
        let task = Arc::clone(&shared);
        tokio::spawn(async move {
            loop {
                // Queued reports are older than a held one, which is sent once the queue is empty.
                let update = if let Ok(update) = next.try_recv() {
                    update
                } else if let Some(update) = task.take_held() {
                    update
                } else if let Some(update) = next.recv().await {
                    update
                } else if let Some(update) = task.take_held() {
                    // The sinks are gone; a report held meanwhile is the last.
                    update
                } else {
                    return;
                };
                let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
                param.total = update.total;
                param.message = update.message;
                if notify.progress(param).await.is_err() {
                    task.close();
                    return;
                }
                task.sent();
            }
        });
        Self { queue, shared }
    }

    /// The callback a tool reports through.
    pub(crate) fn sink(&self) -> talon_core::ProgressSink {
        let queue = self.queue.clone();
        let shared = Arc::clone(&self.shared);
        talon_core::ProgressSink(Arc::new(move |update: ProgressUpdate| {
            let update = update.bounded();
            let mut held = shared.held.lock().unwrap_or_else(PoisonError::into_inner);
            // Once a report is held, later ones replace it, so the order is kept.
            if held.is_some() {
                *held = Some(update);
                return;
            }
            // Counted before the task can see it, so a flush never finds it uncounted.
            shared.pending.fetch_add(1, Ordering::AcqRel);
            if let Err(full) = queue.try_send(update) {
                *held = Some(full.into_inner());
            }
        }))
    }

    /// Waits until every report made so far has been handed to the transport (at most
    /// [`FLUSH_LIMIT`]), so the call's result, sent next, comes after them.
    pub(crate) async fn flush(self) {
        let shared = Arc::clone(&self.shared);
        // The task ends once the last sink (a tool may keep its context) is gone.
        drop(self);
        let drained = async {
            loop {
                let woken = shared.idle.notified();
                if shared.drained() {
                    return;
                }
                woken.await;
            }
        };
        let _ = tokio::time::timeout(FLUSH_LIMIT, drained).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::LoggingMessageNotificationParam;

    /// A client that takes each progress notification only when the test lets it.
    #[derive(Clone)]
    struct SlowClient {
        gate: Arc<tokio::sync::Semaphore>,
        got: Arc<std::sync::Mutex<Vec<ProgressNotificationParam>>>,
    }

    impl SlowClient {
        fn new(permits: usize) -> Self {
            Self {
                gate: Arc::new(tokio::sync::Semaphore::new(permits)),
                got: Arc::default(),
            }
        }

        fn got(&self) -> Vec<ProgressNotificationParam> {
            self.got.lock().expect("not poisoned").clone()
        }
    }

    impl Notify for SlowClient {
        async fn log(&self, _: LoggingMessageNotificationParam) -> Result<(), String> {
            Ok(())
        }
        async fn progress(&self, param: ProgressNotificationParam) -> Result<(), String> {
            let permit = self.gate.acquire().await.map_err(|e| e.to_string())?;
            permit.forget();
            // A transport yields while it writes; the result must still wait for it.
            tokio::task::yield_now().await;
            self.got.lock().map_err(|e| e.to_string())?.push(param);
            Ok(())
        }
        async fn tools_changed(&self) -> Result<(), String> {
            Ok(())
        }
    }

    fn token() -> ProgressToken {
        ProgressToken(rmcp::model::NumberOrString::Number(1))
    }

    fn report(progress: f64, message: Option<String>) -> ProgressUpdate {
        ProgressUpdate {
            progress,
            total: Some(100.0),
            message,
        }
    }

    /// Issue 22 item 9: progress forwarded to a client slower than the reports queued without
    /// bound (1 GB). Now the latest report waits, cut to size, and the client still gets it.
    #[tokio::test]
    async fn h22_9_progress_to_a_slow_client_keeps_only_the_latest() {
        use talon_core::events::MAX_PROGRESS_MESSAGE_BYTES;
        let client = SlowClient::new(0);
        let forwarder = Forwarder::start(client.clone(), token());
        let sink = forwarder.sink();
        let huge = "m".repeat(1024 * 1024);
        for n in 0..1000 {
            (sink.0)(report(f64::from(n), Some(huge.clone())));
            tokio::task::yield_now().await;
        }
        drop(sink);
        // The client takes what is offered: at most the report it was handed while stuck,
        // the queue, then the latest.
        client.gate.add_permits(1000);
        forwarder.flush().await;
        let got = client.got();
        assert!(
            got.len() <= QUEUE + 2,
            "{} reports were queued for the client",
            got.len()
        );
        let last = got.last().expect("the latest report arrives");
        assert_eq!(last.progress, 999.0);
        let message = last.message.as_deref().unwrap_or_default();
        assert!(
            message.len() <= MAX_PROGRESS_MESSAGE_BYTES,
            "{}",
            message.len()
        );
    }

    /// The conformance suite's `tools-call-with-progress` saw two of three reports now and then:
    /// the last was made just before the tool returned, and the result overtook it. A flush
    /// returns only once every report made before it has reached the client.
    #[tokio::test]
    async fn a_flush_waits_for_every_report_made_before_it() {
        let client = SlowClient::new(usize::MAX >> 4);
        let forwarder = Forwarder::start(client.clone(), token());
        let sink = forwarder.sink();
        for progress in [0.0, 50.0, 100.0] {
            (sink.0)(report(progress, None));
        }
        // The tool may keep its context (and the sink) past its return; the flush still ends.
        forwarder.flush().await;
        let got: Vec<f64> = client.got().iter().map(|p| p.progress).collect();
        assert_eq!(got, [0.0, 50.0, 100.0]);
        drop(sink);
    }

    /// A client that stopped reading does not hold the result back for ever.
    #[tokio::test(start_paused = true)]
    async fn a_flush_gives_up_on_a_client_that_stopped_reading() {
        let client = SlowClient::new(0);
        let forwarder = Forwarder::start(client.clone(), token());
        (forwarder.sink().0)(report(1.0, None));
        forwarder.flush().await;
        assert!(client.got().is_empty());
    }
}

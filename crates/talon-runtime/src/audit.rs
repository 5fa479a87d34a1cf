//! The pipeline's audit sink over the store: records are queued without blocking the call and
//! written in batches by a background task. If the queue is full (the database is down or slow),
//! records are dropped with a warning rather than slowing tool calls.
//!
//! The writer waits briefly after the first record of a burst so that a busy client's calls share
//! one transaction instead of paying one write each; [`StoreAudit::close`] flushes what is queued
//! before a process exits (`talon tool call` makes one call and ends).

use std::sync::Mutex;
use std::time::Duration;

use talon_core::events::{AuditRecord, AuditSink};
use talon_store::{AuditEntry, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Records queued before new ones are dropped.
const QUEUE: usize = 10_000;
/// Records written per transaction.
const BATCH: usize = 256;
/// How long the writer collects a burst before writing it.
const LINGER: Duration = Duration::from_millis(100);

/// Sends audit records to the store.
pub struct StoreAudit {
    /// `None` once closed.
    tx: Mutex<Option<mpsc::Sender<AuditEntry>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Cut the writer's wait short: the process is exiting.
    closing: CancellationToken,
}

impl StoreAudit {
    /// Starts the writer task on the current runtime.
    pub fn start(store: Store) -> Self {
        let (tx, mut rx) = mpsc::channel::<AuditEntry>(QUEUE);
        let closing = CancellationToken::new();
        let stop = closing.clone();
        let writer = tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                // Sleep instead of waiting on the queue: records sent meanwhile wake nobody.
                if batch.len() < BATCH {
                    tokio::select! {
                        () = tokio::time::sleep(LINGER) => {}
                        () = stop.cancelled() => {}
                    }
                }
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(entry) => batch.push(entry),
                        Err(_) => break,
                    }
                }
                if let Err(e) = store.record_audit(&batch).await {
                    tracing::warn!(error = %e, records = batch.len(), "audit records could not be written");
                }
                batch.clear();
            }
        });
        Self {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            closing,
        }
    }

    /// Stops accepting records and waits until every queued one is written.
    pub async fn close(&self) {
        self.closing.cancel();
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer
            && let Err(e) = writer.await
        {
            tracing::warn!(error = %e, "the audit writer stopped abnormally");
        }
    }
}

impl AuditSink for StoreAudit {
    fn record(&self, record: AuditRecord) {
        let entry = AuditEntry {
            tool: record.tool.to_string(),
            session_key: record.session_key.to_string(),
            agent_key: record.agent_key.map(|a| a.to_string()),
            user_id: record.user,
            args_digest: record.args_digest,
            is_error: record.is_error,
            duration_us: i64::try_from(record.duration.as_micros()).unwrap_or(i64::MAX),
            stage: record.stage.map(str::to_string),
        };
        let sent = match self.tx.lock() {
            Ok(tx) => tx.as_ref().map(|tx| tx.try_send(entry).is_ok()),
            Err(_) => Some(false),
        };
        match sent {
            Some(true) => {}
            Some(false) => tracing::warn!("audit queue full; a record was dropped"),
            None => tracing::warn!("audit record after shutdown; dropped"),
        }
    }
}

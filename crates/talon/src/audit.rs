//! The pipeline's audit sink over the store: records are queued without blocking the call and
//! written in batches by a background task. If the queue is full (the database is down or slow),
//! records are dropped with a warning rather than slowing tool calls.

use talon_core::events::{AuditRecord, AuditSink};
use talon_store::{AuditEntry, Store};
use tokio::sync::mpsc;

/// Records queued before new ones are dropped.
const QUEUE: usize = 10_000;
/// Records written per transaction.
const BATCH: usize = 256;

/// Sends audit records to the store.
pub struct StoreAudit {
    tx: mpsc::Sender<AuditEntry>,
}

impl StoreAudit {
    /// Starts the writer task on the current runtime.
    pub fn start(store: Store) -> Self {
        let (tx, mut rx) = mpsc::channel::<AuditEntry>(QUEUE);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                if let Err(e) = store.record_audit(&batch).await {
                    tracing::warn!(error = %e, records = batch.len(), "audit records could not be written");
                }
                batch.clear();
            }
        });
        Self { tx }
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
        if self.tx.try_send(entry).is_err() {
            tracing::warn!("audit queue full; a record was dropped");
        }
    }
}

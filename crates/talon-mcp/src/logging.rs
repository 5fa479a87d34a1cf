//! MCP logging: `logging/setLevel` and `notifications/message` for tool starts, ends and warnings.
//!
//! A client sees what a call did beyond its result: that it started, how it ended and how long it
//! took, and warnings such as files a search skipped. The level is per client session (one
//! handler per stdio process or HTTP session) and starts at `warning`, so clients that never set
//! a level get warnings only; `logging/setLevel info` adds each call's end, `debug` its start.
//!
//! rmcp marks the logging API deprecated (SEP-2577 plans its removal from a future protocol
//! revision); every current client still speaks it, so the crate allows the deprecation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::{Value, json};
use talon_core::CallOutcome;

use crate::Notify;

/// The logger name on every message.
const LOGGER: &str = "talon";

/// A call's log messages that may wait for a client slower than the tool (each is a short JSON
/// value a Talon tool wrote): beyond this, messages are dropped and the client is told how many,
/// rather than queued without end (issue 22 item 9).
pub(crate) const MAX_QUEUED_LOG_MESSAGES: usize = 256;

/// A session's minimum level, shared by its handler clones.
#[derive(Debug, Clone)]
pub(crate) struct LogLevel(Arc<AtomicU8>);

impl Default for LogLevel {
    fn default() -> Self {
        Self(Arc::new(AtomicU8::new(rank(LoggingLevel::Warning))))
    }
}

/// Above every level: nothing is sent.
const OFF: u8 = 8;

/// Severity order of the MCP (syslog) levels.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl LogLevel {
    /// The level of one 2026-07-28 request, which carries it in `_meta`
    /// (`io.modelcontextprotocol/logLevel`): without one the request gets no log messages at
    /// all (SEP-2575), whatever the session's level.
    pub(crate) fn for_request(level: Option<LoggingLevel>) -> Self {
        Self(Arc::new(AtomicU8::new(level.map_or(OFF, rank))))
    }

    /// `logging/setLevel`.
    pub(crate) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    fn enabled(&self, level: LoggingLevel) -> bool {
        rank(level) >= self.0.load(Ordering::Relaxed)
    }

    /// Sends `data` at `level` if the session wants it. A client that went away is not an error
    /// for the call, so send failures are only traced.
    pub(crate) async fn send(&self, peer: &impl Notify, level: LoggingLevel, data: Value) {
        if !self.enabled(level) {
            return;
        }
        let message = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
        if let Err(e) = peer.log(message).await {
            tracing::debug!(error = %e, "cannot send an MCP log message");
        }
    }

    /// A sink for a running tool's own log messages ([`talon_core::CallContext::log`]): sent to
    /// the client in order, filtered by this level, and flushed by [`ToolLog::flush`] so they
    /// arrive before the call's result. At most [`MAX_QUEUED_LOG_MESSAGES`] wait for a slow
    /// client; later ones are dropped, and the client is told how many.
    pub(crate) fn tool_log(&self, notify: impl Notify) -> ToolLog {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Queued>(MAX_QUEUED_LOG_MESSAGES);
        let dropped = Arc::new(AtomicU64::new(0));
        let level = self.clone();
        let lost = Arc::clone(&dropped);
        tokio::spawn(async move {
            // The note on dropped messages goes where the queue ran dry (after the messages
            // queued before the drops) or at the call's end, whichever comes first.
            while let Some(item) = rx.recv().await {
                match item {
                    Queued::Message(message) => {
                        level
                            .send(&notify, mcp_level(message.level), message.data)
                            .await;
                        if rx.is_empty() {
                            level.report_dropped(&notify, &lost).await;
                        }
                    }
                    Queued::Flush(done) => {
                        level.report_dropped(&notify, &lost).await;
                        let _ = done.send(());
                    }
                }
            }
        });
        ToolLog { queue: tx, dropped }
    }

    /// Tells the client how many of a call's log messages were dropped since the last note.
    async fn report_dropped(&self, peer: &impl Notify, dropped: &AtomicU64) {
        let missed = dropped.swap(0, Ordering::Relaxed);
        if missed > 0 {
            let message = format!(
                "{missed} log messages were dropped: the client read them more slowly than the tool wrote them"
            );
            let note = json!({"event": "log_dropped", "dropped": missed, "message": message});
            self.send(peer, LoggingLevel::Warning, note).await;
        }
    }

    /// `debug`: a call is starting.
    pub(crate) async fn call_started(&self, peer: &impl Notify, tool: &str) {
        self.send(
            peer,
            LoggingLevel::Debug,
            json!({"event": "tool_start", "tool": tool}),
        )
        .await;
    }

    /// `info` (or `error` when it failed): how a call ended; then each of its warnings at
    /// `warning`.
    pub(crate) async fn call_ended(&self, peer: &impl Notify, outcome: &CallOutcome) {
        let level = if outcome.output.is_error {
            LoggingLevel::Error
        } else {
            LoggingLevel::Info
        };
        let mut data = json!({
            "event": "tool_end",
            "tool": outcome.tool,
            "ok": !outcome.output.is_error,
            "elapsed_ms": outcome.elapsed.as_secs_f64() * 1000.0,
        });
        if let Some(stage) = outcome.failed_stage {
            data["failed_stage"] = json!(stage);
        }
        self.send(peer, level, data).await;
        for warning in &outcome.output.warnings {
            self.send(
                peer,
                LoggingLevel::Warning,
                json!({"event": "tool_warning", "tool": outcome.tool, "message": warning}),
            )
            .await;
        }
    }
}

/// What a tool's log queue carries: its messages, and the call's end.
enum Queued {
    Message(talon_core::LogMessage),
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The queue of one call's log messages (see [`LogLevel::tool_log`]).
pub(crate) struct ToolLog {
    queue: tokio::sync::mpsc::Sender<Queued>,
    /// Messages dropped because the queue was full, not yet reported.
    dropped: Arc<AtomicU64>,
}

impl ToolLog {
    /// The sink the call's context carries.
    pub(crate) fn sink(&self) -> talon_core::LogSink {
        let (queue, dropped) = (self.queue.clone(), Arc::clone(&self.dropped));
        talon_core::LogSink(Arc::new(move |message| {
            if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) =
                queue.try_send(Queued::Message(message))
            {
                dropped.fetch_add(1, Ordering::Relaxed);
            }
        }))
    }

    /// Waits until every message logged so far has been sent.
    pub(crate) async fn flush(self) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.queue.send(Queued::Flush(done)).await.is_ok() {
            let _ = sent.await;
        }
    }
}

fn mcp_level(level: talon_core::LogLevel) -> LoggingLevel {
    use talon_core::LogLevel as L;
    match level {
        L::Debug => LoggingLevel::Debug,
        L::Info => LoggingLevel::Info,
        L::Notice => LoggingLevel::Notice,
        L::Warning => LoggingLevel::Warning,
        L::Error => LoggingLevel::Error,
        L::Critical => LoggingLevel::Critical,
        L::Alert => LoggingLevel::Alert,
        L::Emergency => LoggingLevel::Emergency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_filter_by_severity() {
        let level = LogLevel::default();
        assert!(level.enabled(LoggingLevel::Warning));
        assert!(level.enabled(LoggingLevel::Error));
        assert!(!level.enabled(LoggingLevel::Info));
        level.set(LoggingLevel::Debug);
        assert!(level.enabled(LoggingLevel::Debug));
        level.set(LoggingLevel::Emergency);
        assert!(!level.enabled(LoggingLevel::Alert));
    }

    #[test]
    fn a_request_without_a_level_gets_no_messages() {
        let silent = LogLevel::for_request(None);
        assert!(!silent.enabled(LoggingLevel::Emergency));
        let info = LogLevel::for_request(Some(LoggingLevel::Info));
        assert!(info.enabled(LoggingLevel::Info));
        assert!(!info.enabled(LoggingLevel::Debug));
    }

    /// Sends each log message only when the test lets it; records what it sent.
    #[derive(Clone)]
    struct SlowClient {
        gate: Arc<tokio::sync::Semaphore>,
        got: Arc<std::sync::Mutex<Vec<Value>>>,
    }

    impl Notify for SlowClient {
        async fn log(&self, param: LoggingMessageNotificationParam) -> Result<(), String> {
            let permit = self.gate.acquire().await.map_err(|e| e.to_string())?;
            permit.forget();
            self.got.lock().map_err(|e| e.to_string())?.push(param.data);
            Ok(())
        }
        async fn progress(&self, _: rmcp::model::ProgressNotificationParam) -> Result<(), String> {
            Ok(())
        }
        async fn tools_changed(&self) -> Result<(), String> {
            Ok(())
        }
    }

    /// Issue 22 item 9: a call's log messages queued without bound for a slow client. Now at
    /// most [`MAX_QUEUED_LOG_MESSAGES`] wait, and the client learns how many were dropped.
    #[tokio::test]
    async fn h22_9_log_messages_to_a_slow_client_are_bounded() {
        let client = SlowClient {
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            got: Arc::default(),
        };
        let level = LogLevel::default();
        let log = level.tool_log(client.clone());
        let sink = log.sink();
        let written = 10_000;
        for n in 0..written {
            (sink.0)(talon_core::LogMessage {
                level: talon_core::LogLevel::Warning,
                data: json!(format!("line {n}")),
            });
        }
        drop(sink);
        client.gate.add_permits(written + 10);
        log.flush().await;
        let got = client.got.lock().expect("not poisoned").clone();
        assert!(
            got.len() <= MAX_QUEUED_LOG_MESSAGES + 2,
            "{} were queued",
            got.len()
        );
        let note = got.last().expect("a note");
        assert_eq!(note["event"], "log_dropped", "{note}");
        let sent = u64::try_from(got.len() - 1).expect("fits");
        assert_eq!(note["dropped"].as_u64(), Some(10_000 - sent));
    }
}

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
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::{Value, json};
use talon_core::CallOutcome;

use crate::Notify;

/// The logger name on every message.
const LOGGER: &str = "talon";

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
    /// arrive before the call's result.
    pub(crate) fn tool_log(&self, notify: impl Notify) -> ToolLog {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Queued>();
        let level = self.clone();
        tokio::spawn(async move {
            while let Some(item) = rx.recv().await {
                match item {
                    Queued::Message(message) => {
                        level
                            .send(&notify, mcp_level(message.level), message.data)
                            .await;
                    }
                    Queued::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        ToolLog(tx)
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
pub(crate) struct ToolLog(tokio::sync::mpsc::UnboundedSender<Queued>);

impl ToolLog {
    /// The sink the call's context carries.
    pub(crate) fn sink(&self) -> talon_core::LogSink {
        let tx = self.0.clone();
        talon_core::LogSink(Arc::new(move |message| {
            let _ = tx.send(Queued::Message(message));
        }))
    }

    /// Waits until every message logged so far has been sent.
    pub(crate) async fn flush(self) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.0.send(Queued::Flush(done)).is_ok() {
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
}

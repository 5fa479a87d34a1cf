//! Talon's side of a session, whichever client speaks the protocol (rmcp for HTTP and SSE,
//! [`crate::stdio_client`] for child processes): it hears `notifications/tools/list_changed`,
//! routes the server's `notifications/progress` to the call that asked for them, and passes
//! elicitation on to the one caller in flight whose client can ask its user (declining, with the
//! reason logged, when there is none or several). Sampling requests get "method not found"
//! (Talon does not declare the capability, and sampling is deprecated by SEP-2577).
//!
//! A server is someone else's program, so what it can make Talon hold is bounded by the limits
//! below (issue 22 item 9): progress for a token no call in flight sent is dropped at once (it
//! used to be kept, 540 MB of it), a progress message is cut to
//! [`talon_core::events::MAX_PROGRESS_MESSAGE_BYTES`], and only [`MAX_SERVER_REQUESTS`] of the
//! server's requests are worked on at a time; the rest are refused with an error. What Talon
//! writes to a stdio server is bounded by [`talon_jsonrpc::limits`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::Value;
use talon_core::{ClientHandle, ProgressSink, ProgressUpdate};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The server's requests Talon works on at once (elicitations waiting for a person; a `ping` is
/// answered at once and does not count). One call asks one question at a time; a few allow for
/// parallel calls. Beyond this, a request gets an error answer at once rather than a task and a
/// question put to the user, so a server sending thousands of them costs Talon nothing lasting.
pub const MAX_SERVER_REQUESTS: usize = 4;

/// Progress reports kept for calls being sent over rmcp, whose token Talon learns only once the
/// request is out (at most one report per token, the latest, each with its message cut). Only
/// calls in that window can have such reports, so a handful is plenty; when no call is being
/// sent, a report for an unknown token is dropped at once.
pub const EARLY_REPORTS: usize = 16;

/// See the module docs. Cheap to clone; clones share their state.
#[derive(Clone)]
pub struct Watcher {
    pub(crate) tools_changed: Arc<Notify>,
    /// Where progress reports go (one lock for sinks and early reports, so none falls between).
    progress: Arc<Mutex<ProgressRoutes>>,
    /// Calls in flight whose caller's client can answer elicitations, by token.
    pub(crate) clients: Arc<Mutex<HashMap<ProgressToken, ClientHandle>>>,
    /// Places for the server's requests being worked on ([`MAX_SERVER_REQUESTS`]).
    requests: Arc<Semaphore>,
    counters: Arc<Counters>,
}

impl Default for Watcher {
    fn default() -> Self {
        Self {
            tools_changed: Arc::default(),
            progress: Arc::default(),
            clients: Arc::default(),
            requests: Arc::new(Semaphore::new(MAX_SERVER_REQUESTS)),
            counters: Arc::default(),
        }
    }
}

/// What a session holds and has dropped on Talon's side, within the limits of
/// this module and [`talon_jsonrpc::limits`] (issue 22 item 9). For operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Messages waiting to be written to a stdio server, with the peaks and refusals (zero for
    /// HTTP and SSE, whose writes rmcp owns).
    pub unwritten: talon_jsonrpc::Backlog,
    /// Progress reports kept for calls being sent.
    pub early_reports: usize,
    /// Progress reports dropped because no call in flight had their token.
    pub stray_reports: u64,
    /// The server's requests refused because [`crate::watcher::MAX_SERVER_REQUESTS`] were
    /// being worked on.
    pub refused_requests: u64,
}

/// What the watcher dropped or refused.
#[derive(Default)]
struct Counters {
    /// Progress reports for tokens no call in flight had.
    stray_reports: AtomicU64,
    /// Server requests refused because [`MAX_SERVER_REQUESTS`] were being worked on.
    refused_requests: AtomicU64,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// What Talon says about itself in `initialize`.
    pub(crate) fn client_config() -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info = rmcp::model::Implementation::new("talon", env!("CARGO_PKG_VERSION"));
        // Servers may ask for the user's input; Talon passes the question to its own caller's
        // client when it can, and declines otherwise.
        let mut elicitation = rmcp::model::ElicitationCapability::default();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::default());
        info.capabilities.elicitation = Some(elicitation);
        info
    }

    /// Passes a progress report to the call that sent its token. A report for a token no call
    /// registered is dropped, unless a call is being sent over rmcp (see [`Watcher::opening`]):
    /// then the latest report per token is kept, the last [`EARLY_REPORTS`] tokens, until the
    /// call registers or the sending ends.
    pub(crate) fn progressed(&self, params: ProgressNotificationParam) {
        let token = params.progress_token;
        let update = ProgressUpdate {
            progress: params.progress,
            total: params.total,
            message: params.message,
        }
        .bounded();
        let sink = {
            let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.sinks.get(&token) {
                Some(sink) => sink.clone(),
                None if routes.opening > 0 => {
                    routes.early.retain(|(t, _)| t != &token);
                    if routes.early.len() == EARLY_REPORTS {
                        routes.early.pop_front();
                    }
                    routes.early.push_back((token, update));
                    return;
                }
                None => {
                    self.counters.stray_reports.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        };
        (sink.0)(update);
    }

    /// Marks a call as being sent over rmcp until the returned guard drops: rmcp picks the
    /// request's progress token as it sends it, so a fast server can report before the call
    /// registers. When the last such call is out, reports nobody claimed are dropped.
    pub(crate) fn opening(&self) -> Opening {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .opening += 1;
        Opening {
            watcher: self.clone(),
        }
    }

    /// A place for one of the server's requests, or `None` (counted) when
    /// [`MAX_SERVER_REQUESTS`] are being worked on.
    pub(crate) fn request_slot(&self) -> Option<OwnedSemaphorePermit> {
        let slot = Arc::clone(&self.requests).try_acquire_owned().ok();
        if slot.is_none() {
            self.counters
                .refused_requests
                .fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    /// What the session holds and has dropped on Talon's side (what waits to be written is
    /// the protocol client's; see [`crate::Server::held`]).
    pub(crate) fn held(&self) -> Held {
        let early_reports = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .early
            .len();
        Held {
            unwritten: talon_jsonrpc::Backlog::default(),
            early_reports,
            stray_reports: self.counters.stray_reports.load(Ordering::Relaxed),
            refused_requests: self.counters.refused_requests.load(Ordering::Relaxed),
        }
    }

    /// Routes `token`'s progress reports to `progress` and the server's elicitations to
    /// `client` while the returned registration lives (one call in flight).
    pub(crate) fn register(
        &self,
        token: &ProgressToken,
        progress: Option<ProgressSink>,
        client: Option<ClientHandle>,
    ) -> Registration {
        if let Some(sink) = progress {
            let early = {
                let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
                routes.sinks.insert(token.clone(), sink.clone());
                let at = routes.early.iter().position(|(t, _)| t == token);
                at.and_then(|at| routes.early.remove(at))
            };
            if let Some((_, update)) = early {
                (sink.0)(update);
            }
        }
        if let Some(client) = client {
            self.clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token.clone(), client);
        }
        Registration {
            watcher: self.clone(),
            token: token.clone(),
        }
    }

    /// The answer to an `elicitation/create` request with `params`, as the protocol's result
    /// (a decline when nobody can be asked).
    pub(crate) async fn elicit(&self, params: Value) -> Value {
        use crate::elicit::decline;
        let handles: Vec<ClientHandle> = self
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let [client] = handles.as_slice() else {
            return if handles.is_empty() {
                decline("no call in flight has a client that can ask its user")
            } else {
                decline("several calls are in flight; Talon cannot tell whose user to ask")
            };
        };
        crate::elicit::ask(client, params).await
    }
}

/// The error a server's request gets when [`MAX_SERVER_REQUESTS`] are being worked on.
pub(crate) fn too_many_requests() -> String {
    format!(
        "too many requests in flight: Talon works on at most {MAX_SERVER_REQUESTS} of this server's requests at a time; wait for an answer before sending another"
    )
}

/// Calls in flight that want progress, by the token sent with them, and reports that came
/// before their call registered.
#[derive(Default)]
struct ProgressRoutes {
    sinks: HashMap<ProgressToken, ProgressSink>,
    /// Calls being sent over rmcp ([`Watcher::opening`]).
    opening: usize,
    /// The latest report per token not yet registered, oldest first; only while `opening`.
    early: VecDeque<(ProgressToken, ProgressUpdate)>,
}

/// A call being sent; see [`Watcher::opening`].
pub(crate) struct Opening {
    watcher: Watcher,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let mut routes = self
            .watcher
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        routes.opening = routes.opening.saturating_sub(1);
        if routes.opening == 0 {
            let stray = routes.early.len();
            routes.early.clear();
            self.watcher
                .counters
                .stray_reports
                .fetch_add(stray as u64, Ordering::Relaxed);
        }
    }
}

/// A call's entries in the watcher (progress sink, elicitation client), removed when dropped.
pub(crate) struct Registration {
    watcher: Watcher,
    token: ProgressToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.watcher
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sinks
            .remove(&self.token);
        self.watcher
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

impl rmcp::ClientHandler for Watcher {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        Self::client_config()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progressed(params);
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let Some(_slot) = self.request_slot() else {
            return Err(rmcp::ErrorData::invalid_request(too_many_requests(), None));
        };
        let params = serde_json::to_value(&request).unwrap_or(Value::Null);
        let answer = self.elicit(params).await;
        Ok(serde_json::from_value(answer).unwrap_or_else(|e| {
            tracing::warn!("the client's elicitation answer does not parse ({e}); declined");
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Decline)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    /// A sink that records the progress values it receives.
    fn recorder() -> (ProgressSink, Arc<Mutex<Vec<f64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let sink = ProgressSink(Arc::new(move |u: ProgressUpdate| {
            into.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(u.progress);
        }));
        (sink, seen)
    }

    fn seen(record: &Arc<Mutex<Vec<f64>>>) -> Vec<f64> {
        record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    #[test]
    fn reports_sent_before_the_call_registers_reach_it_the_latest_per_token() {
        let watcher = Watcher::default();
        let sending = watcher.opening();
        watcher.progressed(ProgressNotificationParam::new(token(7), 1.0));
        watcher.progressed(ProgressNotificationParam::new(token(8), 5.0));
        watcher.progressed(ProgressNotificationParam::new(token(7), 2.0));
        let (sink, record) = recorder();
        let registration = watcher.register(&token(7), Some(sink), None);
        watcher.progressed(ProgressNotificationParam::new(token(7), 3.0));
        assert_eq!(seen(&record), vec![2.0, 3.0]);
        drop(registration);
        watcher.progressed(ProgressNotificationParam::new(token(7), 4.0));
        assert_eq!(
            seen(&record),
            vec![2.0, 3.0],
            "nothing after the call ended"
        );
        // Token 8's report waits for its call while a call is being sent.
        let (sink, record) = recorder();
        let _other = watcher.register(&token(8), Some(sink), None);
        assert_eq!(seen(&record), vec![5.0]);
        drop(sending);
        assert_eq!(watcher.held().early_reports, 0);
    }

    #[test]
    fn reports_nobody_claims_age_out() {
        let watcher = Watcher::default();
        let _sending = watcher.opening();
        let total = i64::try_from(EARLY_REPORTS).unwrap_or(i64::MAX) + 10;
        for n in 0..total {
            watcher.progressed(ProgressNotificationParam::new(token(n), 1.0));
        }
        assert_eq!(watcher.held().early_reports, EARLY_REPORTS);
        let (sink, record) = recorder();
        let _oldest = watcher.register(&token(0), Some(sink), None);
        assert!(seen(&record).is_empty(), "the oldest reports were dropped");
        let (sink, record) = recorder();
        let _newest = watcher.register(&token(total - 1), Some(sink), None);
        assert_eq!(seen(&record), vec![1.0]);
    }

    /// Issue 22 item 9: progress for calls that do not exist was kept (540 MB from one
    /// server). Now it is dropped at once, and what reaches a call is cut to size.
    #[test]
    fn h22_9_progress_for_unknown_tokens_is_dropped_and_messages_are_cut() {
        use talon_core::events::MAX_PROGRESS_MESSAGE_BYTES;
        let watcher = Watcher::default();
        let huge = "m".repeat(1024 * 1024);
        for n in 0..1000 {
            let mut report = ProgressNotificationParam::new(token(n), 1.0);
            report.message = Some(huge.clone());
            watcher.progressed(report);
        }
        let held = watcher.held();
        assert_eq!(
            held.early_reports, 0,
            "reports for calls that do not exist were kept"
        );
        assert_eq!(held.stray_reports, 1000);
        let messages = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&messages);
        let sink = ProgressSink(Arc::new(move |u: ProgressUpdate| {
            into.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(u.message.unwrap_or_default());
        }));
        let _call = watcher.register(&token(5000), Some(sink), None);
        let mut report = ProgressNotificationParam::new(token(5000), 1.0);
        report.message = Some(huge);
        watcher.progressed(report);
        let messages = messages.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(messages.len(), 1);
        assert!(messages[0].len() <= MAX_PROGRESS_MESSAGE_BYTES);
    }

    #[test]
    fn h22_9_server_requests_beyond_the_limit_are_refused() {
        let watcher = Watcher::default();
        let slots: Vec<_> = (0..MAX_SERVER_REQUESTS)
            .map(|_| watcher.request_slot().expect("a free slot"))
            .collect();
        assert!(watcher.request_slot().is_none());
        assert_eq!(watcher.held().refused_requests, 1);
        drop(slots);
        assert!(watcher.request_slot().is_some());
    }
}

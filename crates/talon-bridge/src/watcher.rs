//! Talon's side of a session, whichever client speaks the protocol (rmcp for HTTP and SSE,
//! [`crate::stdio_client`] for child processes): it hears `notifications/tools/list_changed`,
//! routes the server's `notifications/progress` to the call that asked for them, and passes
//! elicitation on to the one caller in flight whose client can ask its user (declining, with the
//! reason logged, when there is none or several). Sampling requests get "method not found"
//! (Talon does not declare the capability, and sampling is deprecated by SEP-2577).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::Value;
use talon_core::{ClientHandle, ProgressSink, ProgressUpdate};
use tokio::sync::Notify;

/// See the module docs. Cheap to clone; clones share their state.
#[derive(Clone, Default)]
pub struct Watcher {
    pub(crate) tools_changed: Arc<Notify>,
    /// Where progress reports go (one lock for sinks and early reports, so none falls between).
    progress: Arc<Mutex<ProgressRoutes>>,
    /// Calls in flight whose caller's client can answer elicitations, by token.
    pub(crate) clients: Arc<Mutex<HashMap<ProgressToken, ClientHandle>>>,
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

    /// Passes a progress report to the call that sent its token. A report for a token not yet
    /// registered is kept (the last [`EARLY_REPORTS`]): rmcp picks a request's token as it sends
    /// it, so a fast server can report before the call registers.
    pub(crate) fn progressed(&self, params: ProgressNotificationParam) {
        let sink = {
            let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.sinks.get(&params.progress_token) {
                Some(sink) => sink.clone(),
                None => {
                    if routes.early.len() == EARLY_REPORTS {
                        routes.early.pop_front();
                    }
                    routes.early.push_back(params);
                    return;
                }
            }
        };
        deliver(&sink, params);
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
                let (mine, others): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut routes.early)
                    .into_iter()
                    .partition(|p| &p.progress_token == token);
                routes.early = others;
                mine
            };
            for params in early {
                deliver(&sink, params);
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

/// How many progress reports for unregistered tokens a session keeps (stale ones, for calls
/// that already ended, age out).
const EARLY_REPORTS: usize = 32;

/// Calls in flight that want progress, by the token sent with them, and reports that came
/// before their call registered.
#[derive(Default)]
struct ProgressRoutes {
    sinks: HashMap<ProgressToken, ProgressSink>,
    early: VecDeque<ProgressNotificationParam>,
}

fn deliver(sink: &ProgressSink, params: ProgressNotificationParam) {
    (sink.0)(ProgressUpdate {
        progress: params.progress,
        total: params.total,
        message: params.message,
    });
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
    fn reports_sent_before_the_call_registers_reach_it_in_order() {
        let watcher = Watcher::default();
        watcher.progressed(ProgressNotificationParam::new(token(7), 1.0));
        watcher.progressed(ProgressNotificationParam::new(token(8), 5.0));
        watcher.progressed(ProgressNotificationParam::new(token(7), 2.0));
        let (sink, record) = recorder();
        let registration = watcher.register(&token(7), Some(sink), None);
        watcher.progressed(ProgressNotificationParam::new(token(7), 3.0));
        assert_eq!(seen(&record), vec![1.0, 2.0, 3.0]);
        drop(registration);
        watcher.progressed(ProgressNotificationParam::new(token(7), 4.0));
        assert_eq!(
            seen(&record),
            vec![1.0, 2.0, 3.0],
            "nothing after the call ended"
        );
        // Token 8's report is still waiting for its call.
        let (sink, record) = recorder();
        let _other = watcher.register(&token(8), Some(sink), None);
        assert_eq!(seen(&record), vec![5.0]);
    }

    #[test]
    fn reports_nobody_claims_age_out() {
        let watcher = Watcher::default();
        let total = i64::try_from(EARLY_REPORTS).unwrap_or(i64::MAX) + 10;
        for n in 0..total {
            watcher.progressed(ProgressNotificationParam::new(token(n), 1.0));
        }
        let kept = watcher
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .early
            .len();
        assert_eq!(kept, EARLY_REPORTS);
        let (sink, record) = recorder();
        let _oldest = watcher.register(&token(0), Some(sink), None);
        assert!(seen(&record).is_empty(), "the oldest reports were dropped");
        let (sink, record) = recorder();
        let _newest = watcher.register(&token(total - 1), Some(sink), None);
        assert_eq!(seen(&record), vec![1.0]);
    }
}

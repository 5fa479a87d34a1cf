//! Talon's side of a session, whichever client speaks the protocol (rmcp for HTTP and SSE,
//! [`crate::stdio_client`] for child processes): it hears `notifications/tools/list_changed`,
//! routes the server's `notifications/progress` to the call that asked for them, and passes
//! elicitation on to the one caller in flight whose client can ask its user (declining, with the
//! reason logged, when there is none or several). Sampling requests get "method not found"
//! (Talon does not declare the capability, and sampling is deprecated by SEP-2577).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::{Value, json};
use talon_core::{ClientHandle, ProgressSink, ProgressUpdate};
use tokio::sync::Notify;

/// See the module docs. Cheap to clone; clones share their state.
#[derive(Clone, Default)]
pub struct Watcher {
    pub(crate) tools_changed: Arc<Notify>,
    /// Calls in flight that want progress, by the token sent with them.
    pub(crate) progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
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

    /// Passes a progress report to the call that sent `token`, if it is still waiting.
    pub(crate) fn progressed(&self, params: ProgressNotificationParam) {
        let sink = self
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&params.progress_token)
            .cloned();
        if let Some(sink) = sink {
            (sink.0)(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
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
            self.progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token.clone(), sink);
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
        let decline = |why: &str| {
            tracing::warn!("an MCP server asked for the user's input; declined: {why}");
            json!({"action": "decline"})
        };
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
        match client.0.elicit(params).await {
            Ok(answer) if answer.get("action").and_then(Value::as_str).is_some() => answer,
            Ok(answer) => decline(&format!(
                "the client's answer is not an elicitation result: {answer}"
            )),
            Err(e) => decline(&e),
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

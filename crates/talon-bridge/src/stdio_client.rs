//! Talon's own MCP client for servers run as child processes (newline-delimited JSON-RPC over
//! stdin and stdout).
//!
//! Why not rmcp here: a bridged call is on the hot path of every MCP tool, and rmcp's client
//! hands each message through its service task and a task per outgoing message, and parses
//! every answer into a typed result that the bridge turns back into JSON at once. This client
//! writes a request from the calling task, has one reader task complete the waiting call, and
//! keeps answers as JSON: a bridged `echo` costs about half the time in Talon (docs/BENCHMARKS.md).
//! rmcp still serves the HTTP transports, where the network dwarfs such costs.
//!
//! What it speaks: `initialize` / `notifications/initialized`, requests with a pending map by id,
//! `notifications/cancelled` for calls abandoned before their answer, `_meta.progressToken` on
//! calls, and from the server: `ping`, `elicitation/create` (through the [`Watcher`]),
//! `notifications/progress`, `notifications/tools/list_changed` and `notifications/message`
//! (logged). Lines that are not JSON-RPC are logged and skipped; a line over
//! [`talon_jsonrpc::MAX_MESSAGE_BYTES`] ends the session, as does the server closing its stdout.
//!
//! The reader never waits on the server: a `ping` or an unknown request is answered through the
//! bounded backlog of [`talon_jsonrpc::Peer::post`], an elicitation on a task of its own, at
//! most [`crate::watcher::MAX_SERVER_REQUESTS`] at a time (more get an error answer). A server
//! that floods requests without reading its input gets the answers that fit the backlog; the
//! rest are dropped, and Talon's memory stays bounded (issue 22 item 9).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use serde_json::{Value, json};
use talon_jsonrpc::{LineReader, Message, Peer, RpcError, codes};
use tokio::process::{Child, ChildStdin, ChildStdout};

pub use talon_jsonrpc::{Answer, RequestError};

use crate::watcher::Watcher;

/// What the server is told when Talon abandons a call before its answer.
const CANCELLED: &str = "the caller cancelled the call";

/// A running session with a child process.
pub struct StdioClient {
    server: String,
    peer: Arc<Peer<ChildStdin>>,
    child: Mutex<Option<Child>>,
    watcher: Watcher,
}

impl std::fmt::Debug for StdioClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioClient")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl StdioClient {
    /// Takes over a spawned child (stdin and stdout piped) and completes the handshake.
    pub async fn start(server: &str, mut child: Child, watcher: Watcher) -> Result<Self, String> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the process has no stdin or stdout pipe".into());
        };
        let client = Self {
            server: server.to_string(),
            peer: Peer::new(stdin),
            child: Mutex::new(Some(child)),
            watcher,
        };
        tokio::spawn(read_loop(
            server.to_string(),
            stdout,
            Arc::clone(&client.peer),
            client.watcher.clone(),
        ));
        let hello = serde_json::to_value(Watcher::client_config()).map_err(|e| e.to_string())?;
        let answer = client
            .peer
            .request("initialize", hello, None)
            .await
            .map_err(|e| e.to_string())?;
        if answer
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(format!(
                "the initialize answer has no protocolVersion: {answer}"
            ));
        }
        client
            .peer
            .notify("notifications/initialized", None::<Value>)
            .await
            .map_err(|e| e.to_string())?;
        Ok(client)
    }

    /// Whether the session is up: the reader runs and the process has not exited.
    pub fn is_alive(&self) -> bool {
        if self.peer.closed().is_cancelled() {
            return false;
        }
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        match child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) | None => false,
        }
    }

    /// Sends request `method` and waits for its answer (no timeout: the caller has one);
    /// `cancel_on_drop` tells the server when the caller gives up first.
    pub async fn request(&self, method: &str, params: Value, cancel_on_drop: bool) -> Answer {
        self.peer
            .request(method, params, cancel_on_drop.then_some(CANCELLED))
            .await
    }

    /// `tools/call` with a progress token; progress reports and elicitations of the call reach
    /// the watcher's entries for that token while it runs.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        progress: Option<talon_core::ProgressSink>,
        client: Option<talon_core::ClientHandle>,
    ) -> Answer {
        let ticket = self.peer.register();
        let id = ticket.id();
        let token = ProgressToken(NumberOrString::Number(id));
        let _registered = self.watcher.register(&token, progress, client);
        let mut params = json!({"name": tool, "_meta": {"progressToken": id}});
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        self.peer
            .exchange(ticket, "tools/call", params, Some(CANCELLED))
            .await
    }

    /// What waits to be written to the server, and the most that ever did.
    pub fn backlog(&self) -> talon_jsonrpc::Backlog {
        self.peer.backlog()
    }

    /// Ends the session: closes stdin (a well-behaved server exits), waits up to `grace`, then
    /// kills the process; either way it is reaped. A server that stopped reading cannot hold
    /// this up: a write stuck on its full pipe ends when the process is killed.
    pub async fn close(self, grace: Duration) {
        self.peer.shut();
        let closed = tokio::time::timeout(grace, self.peer.close()).await.is_ok();
        let child = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut child) = child
            && (!closed || tokio::time::timeout(grace, child.wait()).await.is_err())
        {
            let _ = child.kill().await;
        }
    }
}

/// Reads the server's messages until its stdout ends; answers complete waiting requests,
/// requests are answered, notifications reach the watcher.
async fn read_loop(
    server: String,
    stdout: ChildStdout,
    peer: Arc<Peer<ChildStdin>>,
    watcher: Watcher,
) {
    let mut reader = LineReader::new(stdout);
    loop {
        let line = match reader.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(server = %server, "ending the session: {e}");
                break;
            }
        };
        match talon_jsonrpc::parse(line) {
            Ok(message) => dispatch(&server, message, &peer, &watcher),
            Err(e) => {
                let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
                tracing::warn!(server = %server, "skipped a line: {e}: {shown}");
            }
        }
    }
    // Every call still waiting learns the session is over.
    peer.shut();
}

fn dispatch(server: &str, message: Message, peer: &Arc<Peer<ChildStdin>>, watcher: &Watcher) {
    match message {
        Message::Answer { id, outcome } => {
            if !peer.resolve(&id, outcome) {
                tracing::debug!(server = %server, "skipped an answer to request {id}, no longer awaited");
            }
        }
        // A request from the server: the reader answers at once, or hands it to a task of its
        // own (an elicitation waits for a person), never more than the watcher allows.
        Message::Request { id, method, params } => {
            let outcome = match method.as_str() {
                "ping" => Ok(json!({})),
                "elicitation/create" => match watcher.request_slot() {
                    Some(slot) => {
                        let (peer, watcher) = (Arc::clone(peer), watcher.clone());
                        tokio::spawn(async move {
                            let _slot = slot;
                            let answer = watcher.elicit(params).await;
                            if let Err(e) = peer.respond(&id, answer).await {
                                tracing::debug!("cannot answer the server's elicitation: {e}");
                            }
                        });
                        return;
                    }
                    None => Err(RpcError::new(
                        codes::INVALID_REQUEST,
                        crate::watcher::too_many_requests(),
                    )),
                },
                other => Err(RpcError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: {other}"),
                )),
            };
            if let Err(e) = peer.post_answer(&id, outcome) {
                // Logged when the count of refusals doubles, not for each of a flood.
                let refused = peer.backlog().refused;
                if refused.is_power_of_two() {
                    tracing::warn!(server = %server, refused, "cannot answer the server's {method} request: {e}");
                }
            }
        }
        Message::Notification { method, params } => notification(server, &method, params, watcher),
    }
}

fn notification(server: &str, method: &str, params: Value, watcher: &Watcher) {
    match method {
        "notifications/tools/list_changed" => watcher.tools_changed.notify_one(),
        "notifications/progress" => {
            match serde_json::from_value::<ProgressNotificationParam>(params) {
                Ok(progress) => watcher.progressed(progress),
                Err(_) => {
                    tracing::warn!(server = %server, "skipped a malformed progress notification")
                }
            }
        }
        "notifications/message" => {
            tracing::info!(server = %server, level = %params["level"], "{}", params["data"]);
        }
        _ => {}
    }
}

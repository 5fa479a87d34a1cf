//! `talon mcp`'s transport: MCP over stdin and stdout, served by a loop of Talon's own.
//!
//! Why not rmcp's server here: every bridged call that a local client makes crosses this loop,
//! and profiling a bridged `echo` showed rmcp's server side (its service task, a task per
//! message, typed parsing of each request and answer) taking about a fifth of `talon mcp`'s CPU
//! per call. This loop reads a line, parses it once with [`talon_jsonrpc`] (the framing Talon's
//! MCP client shares), answers quick requests in place and runs each `tools/call` on a task of
//! its own, which writes its answer itself. rmcp still serves streamable HTTP
//! ([`crate::http_service`]); both reach `TalonMcp::run_call`.
//!
//! What it speaks: `initialize` (protocol versions 2024-11-05 to 2025-11-25: the client's when
//! known, else the newest) and `notifications/initialized`, `ping`, `tools/list`, `tools/call`
//! with `_meta.progressToken` and `notifications/cancelled`, `logging/setLevel`, empty
//! resource, template and prompt lists (as rmcp answers them), and toward the client
//! `notifications/tools/list_changed`, `notifications/progress`, `notifications/message` and
//! `elicitation/create` when the client declared the capability. Anything else gets a JSON-RPC
//! error saying what was wrong. When the client closes stdin, calls still running get
//! [`EOF_GRACE`] to answer and are then cancelled.
//!
//! Clients of the 2026-07-28 protocol have no `initialize`: they open with `server/discover` or
//! carry the protocol version in each request's `_meta`, and they follow list changes through
//! `subscriptions/listen`. Such a session is handed to rmcp, which speaks that revision, with the
//! bytes read so far, before anything else has happened in it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::model::{
    JsonObject, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, ProtocolVersion,
};
use serde::Deserialize;
use serde_json::{Value, json};
use talon_jsonrpc::{LineReader, Message, Peer, RpcError, codes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::{IncomingCall, McpError, Notify, TalonMcp};

/// How long calls still running may take to answer once the client has closed stdin.
pub const EOF_GRACE: Duration = Duration::from_secs(2);

/// The newest protocol version this loop speaks (the last one with an `initialize` handshake).
const NEWEST: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// Serves MCP over stdin/stdout until the client closes stdin. Pipes (as MCP clients launch
/// servers) are driven without blocking threads; anything else falls back to blocking handles.
pub async fn serve_stdio(handler: TalonMcp) -> Result<(), McpError> {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    serve(handler, reader, writer).await
}

/// The `_meta` key of a 2026-07-28 request's protocol version.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// How the loop over the client's lines ended.
enum Ended {
    /// The client closed stdin (`Ok`) or broke the framing.
    Closed(Result<(), McpError>),
    /// The client speaks the 2026-07-28 protocol; its first such line.
    Modern(Vec<u8>),
}

/// Whether `message` opens a 2026-07-28 session (see the module docs).
fn is_modern(message: &Message) -> bool {
    match message {
        Message::Request { method, params, .. } => {
            method == "server/discover" || params["_meta"].get(META_PROTOCOL_VERSION).is_some()
        }
        Message::Notification { .. } | Message::Answer { .. } => false,
    }
}

/// Serves one MCP session reading requests from `reader` and writing to `writer`, until
/// `reader` ends (`Ok`) or breaks the framing (an error saying how).
pub async fn serve<R, W>(handler: TalonMcp, reader: R, writer: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(Session {
        handler,
        peer: Peer::new(writer),
        elicits: OnceLock::new(),
        calls: Mutex::new(HashMap::new()),
        tasks: TaskTracker::new(),
        forwarding: AtomicBool::new(false),
    });
    let mut lines = LineReader::new(reader);
    let ended = loop {
        match lines.next_line().await {
            Ok(Some(line)) => match talon_jsonrpc::parse(line) {
                Ok(message) if !session.initialized() && is_modern(&message) => {
                    break Ended::Modern(line.to_vec());
                }
                Ok(message) => session.dispatch(message).await,
                Err(e) => session.refuse(&Value::Null, e.to_rpc()).await,
            },
            Ok(None) => break Ended::Closed(Ok(())),
            Err(e) => {
                break Ended::Closed(Err(McpError(format!(
                    "the client's input ended the session: {e}"
                ))));
            }
        }
    };
    match ended {
        Ended::Closed(result) => {
            session.finish().await;
            result
        }
        Ended::Modern(mut replay) => {
            // Nothing has started yet: no call runs before `initialize`.
            let Some(writer) = session.peer.take_writer().await else {
                return Err(McpError("the session's output is already closed".into()));
            };
            replay.push(b'\n');
            let (buffered, reader) = lines.into_parts();
            replay.extend_from_slice(&buffered);
            let reader = std::io::Cursor::new(replay).chain(reader);
            crate::rmcp_server::serve_stream(session.handler.clone(), reader, writer).await
        }
    }
}

/// One client session.
struct Session<W> {
    handler: TalonMcp,
    peer: Arc<Peer<W>>,
    /// Set by `initialize`: whether the client answers `elicitation/create`.
    elicits: OnceLock<bool>,
    /// Calls running, by their request id as JSON text, for `notifications/cancelled`.
    calls: Mutex<HashMap<String, CancellationToken>>,
    tasks: TaskTracker,
    /// Whether tool list changes are being forwarded (from the first `notifications/initialized`).
    forwarding: AtomicBool,
}

/// `initialize`'s parameters, as far as Talon needs them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Initialize {
    protocol_version: String,
    #[serde(default)]
    capabilities: Value,
}

/// `tools/call`'s parameters.
#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(rename = "_meta", default)]
    meta: Option<CallMeta>,
}

#[derive(Deserialize)]
struct CallMeta {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<ProgressToken>,
}

#[derive(Deserialize)]
struct SetLevel {
    level: LoggingLevel,
}

#[derive(Deserialize)]
struct Cancelled {
    #[serde(rename = "requestId")]
    request_id: Value,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Session<W> {
    /// Whether `initialize` has succeeded.
    fn initialized(&self) -> bool {
        self.elicits.get().is_some()
    }

    async fn dispatch(self: &Arc<Self>, message: Message) {
        match message {
            Message::Request { id, method, params } => self.request(id, &method, params).await,
            Message::Notification { method, params } => self.notification(&method, params),
            Message::Answer { id, outcome } => {
                if !self.peer.resolve(&id, outcome) {
                    tracing::debug!("skipped an answer to request {id}, no longer awaited");
                }
            }
        }
    }

    async fn request(self: &Arc<Self>, id: Value, method: &str, params: Value) {
        if !self.initialized() && !matches!(method, "initialize" | "ping") {
            let error = RpcError::new(
                codes::INVALID_REQUEST,
                format!("the session is not initialized: send `initialize` before `{method}`"),
            );
            return self.refuse(&id, error).await;
        }
        let answer = match method {
            "initialize" => self.initialize(params),
            "ping" => Ok(json!({})),
            "tools/list" => to_json(ListToolsResult::with_all_items(self.handler.tools().await)),
            "tools/call" => match self.call(&id, params) {
                Ok(()) => return,
                Err(error) => Err(error),
            },
            "logging/setLevel" => serde_json::from_value::<SetLevel>(params)
                .map(|p| {
                    self.handler.set_log_level(p.level);
                    json!({})
                })
                .map_err(|e| invalid_params(method, "{\"level\": \"debug\"|\"info\"|…}", e)),
            "resources/list" => to_json(ListResourcesResult::default()),
            "resources/templates/list" => to_json(ListResourceTemplatesResult::default()),
            "prompts/list" => to_json(ListPromptsResult::default()),
            other => Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {other} (Talon serves tools and logging)"),
            )),
        };
        let sent = match answer {
            Ok(result) => self.peer.respond(&id, result).await,
            Err(error) => self.peer.respond_error(&id, &error).await,
        };
        if let Err(e) = sent {
            tracing::debug!("cannot answer {method}: {e}");
        }
    }

    fn initialize(&self, params: Value) -> Result<Value, RpcError> {
        let hello: Initialize = serde_json::from_value(params).map_err(|e| {
            invalid_params(
                "initialize",
                "{\"protocolVersion\", \"capabilities\", \"clientInfo\"}",
                e,
            )
        })?;
        let elicits = hello
            .capabilities
            .get("elicitation")
            .is_some_and(|c| !c.is_null());
        if self.elicits.set(elicits).is_err() {
            return Err(RpcError::new(
                codes::INVALID_REQUEST,
                "the session is already initialized",
            ));
        }
        let mut info = self.handler.server_info();
        info.protocol_version = ProtocolVersion::known_up_to(&NEWEST)
            .iter()
            .find(|v| v.as_str() == hello.protocol_version)
            .cloned()
            .unwrap_or(NEWEST);
        to_json(info)
    }

    /// Starts a call on a task of its own; the task answers it, unless the client cancelled it.
    /// Parameters that are not a call are refused at once.
    fn call(self: &Arc<Self>, id: &Value, params: Value) -> Result<(), RpcError> {
        let params: CallParams = serde_json::from_value(params).map_err(|e| {
            invalid_params(
                "tools/call",
                "{\"name\": \"<tool>\", \"arguments\": {…}}",
                e,
            )
        })?;
        let key = id.to_string();
        let cancel = CancellationToken::new();
        match self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
        {
            // Two calls under one id could not be told apart (answers, cancellation).
            Entry::Occupied(_) => {
                return Err(RpcError::new(
                    codes::INVALID_REQUEST,
                    format!(
                        "request id {key} is already in use by a running tools/call: \
                         give every request of the session an id of its own"
                    ),
                ));
            }
            Entry::Vacant(slot) => {
                slot.insert(cancel.clone());
            }
        }
        let client = (self.elicits.get() == Some(&true))
            .then(|| talon_core::ClientHandle(Arc::new(ElicitingClient(Arc::clone(&self.peer)))));
        let call = IncomingCall {
            session: self.handler.session_key.clone(),
            cancel: cancel.clone(),
            name: params.name,
            arguments: params.arguments,
            progress_token: params.meta.and_then(|m| m.progress_token),
            client,
            notify: Arc::clone(&self.peer),
            log_level: None,
        };
        let (session, id) = (Arc::clone(self), id.clone());
        self.tasks.spawn(async move {
            let result = session.handler.run_call(call).await;
            session
                .calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            // A cancelled request gets no answer (the client has stopped waiting for one).
            if !cancel.is_cancelled()
                && let Err(e) = session.peer.respond(&id, result).await
            {
                tracing::debug!("cannot answer tools/call {id}: {e}");
            }
        });
        Ok(())
    }

    fn notification(self: &Arc<Self>, method: &str, params: Value) {
        match method {
            "notifications/initialized" => self.forward_tool_list_changes(),
            "notifications/cancelled" => {
                let Ok(cancelled) = serde_json::from_value::<Cancelled>(params) else {
                    tracing::debug!("skipped a cancellation without a requestId");
                    return;
                };
                let token = self
                    .calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&cancelled.request_id.to_string())
                    .cloned();
                if let Some(token) = token {
                    token.cancel();
                }
            }
            _ => {}
        }
    }

    /// Forwards tool list changes for the rest of the session, from the first
    /// `notifications/initialized` however often the client sends it.
    fn forward_tool_list_changes(&self) {
        if !self.forwarding.swap(true, Ordering::SeqCst) {
            self.handler
                .forward_tool_list_changes(Arc::clone(&self.peer), self.peer.closed().clone());
        }
    }

    async fn refuse(&self, id: &Value, error: RpcError) {
        if let Err(e) = self.peer.respond_error(id, &error).await {
            tracing::debug!("cannot send an error to the client: {e}");
        }
    }

    /// The client closed stdin: calls running get [`EOF_GRACE`] to answer, then are cancelled
    /// and given as long again to wind down.
    async fn finish(&self) {
        self.tasks.close();
        if tokio::time::timeout(EOF_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            for token in self
                .calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
            {
                token.cancel();
            }
            let _ = tokio::time::timeout(EOF_GRACE, self.tasks.wait()).await;
        }
        self.peer.shut();
    }
}

fn to_json(value: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(codes::INTERNAL_ERROR, e.to_string()))
}

fn invalid_params(method: &str, expected: &str, error: serde_json::Error) -> RpcError {
    RpcError::new(
        codes::INVALID_PARAMS,
        format!("invalid {method} parameters ({error}); expected {expected}"),
    )
}

impl<W: AsyncWrite + Unpin + Send + 'static> Notify for Arc<Peer<W>> {
    async fn log(&self, param: LoggingMessageNotificationParam) -> Result<(), String> {
        self.notify("notifications/message", Some(param))
            .await
            .map_err(|e| e.to_string())
    }

    async fn progress(&self, param: ProgressNotificationParam) -> Result<(), String> {
        self.notify("notifications/progress", Some(param))
            .await
            .map_err(|e| e.to_string())
    }

    async fn tools_changed(&self) -> Result<(), String> {
        self.notify("notifications/tools/list_changed", None::<Value>)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The client, for elicitations a tool passes on (from bridged servers or AskUserQuestion).
struct ElicitingClient<W>(Arc<Peer<W>>);

impl<W: AsyncWrite + Unpin + Send + 'static> talon_core::ClientRequests for ElicitingClient<W> {
    fn elicit(&self, params: Value) -> talon_core::context::ClientFuture {
        let peer = Arc::clone(&self.0);
        Box::pin(async move {
            peer.request(
                "elicitation/create",
                params,
                Some("the call that asked was cancelled"),
            )
            .await
            .map_err(|e| format!("asking the client failed: {e}"))
        })
    }
}

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
//! [`MAX_MESSAGE_BYTES`] ends the session, as does the server closing its stdout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::watcher::Watcher;

/// The longest message accepted from a server (a tool's answer may be large; a line without end
/// is not).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A failed request.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    Rpc { code: i64, message: String },
    /// The session ended before the answer.
    Closed,
    /// The request could not be written.
    Write(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Rpc { code, message } => write!(f, "the server answered error {code}: {message}"),
            Self::Closed => f.write_str("the server closed the connection"),
            Self::Write(e) => write!(f, "cannot write to the server: {e}"),
        }
    }
}

type Answer = Result<Value, RequestError>;
type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Answer>>>>;

/// One message from the server, any kind.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

#[derive(Deserialize)]
struct RpcError {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
}

/// Writes whole messages, one at a time.
struct Writer(tokio::sync::Mutex<ChildStdin>);

impl Writer {
    async fn send(&self, message: &Value) -> Result<(), RequestError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| RequestError::Write(e.to_string()))?;
        line.push(b'\n');
        let mut stdin = self.0.lock().await;
        stdin
            .write_all(&line)
            .await
            .map_err(|e| RequestError::Write(e.to_string()))
    }
}

/// A running session with a child process.
pub struct StdioClient {
    server: String,
    writer: Arc<Writer>,
    pending: Pending,
    next_id: AtomicI64,
    /// Cancelled when the reader ends (the server closed its stdout or broke the protocol).
    closed: CancellationToken,
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

/// A request whose answer is awaited; dropping it before the answer forgets it and, for calls
/// that asked, tells the server `notifications/cancelled`.
struct Waiting<'a> {
    client: &'a StdioClient,
    id: i64,
    cancel_on_drop: bool,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.client
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        if self.cancel_on_drop && !self.client.closed.is_cancelled() {
            let writer = Arc::clone(&self.client.writer);
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": self.id, "reason": "the caller cancelled the call"}});
            tokio::spawn(async move {
                let _ = writer.send(&note).await;
            });
        }
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
            writer: Arc::new(Writer(tokio::sync::Mutex::new(stdin))),
            pending: Pending::default(),
            next_id: AtomicI64::new(0),
            closed: CancellationToken::new(),
            child: Mutex::new(Some(child)),
            watcher,
        };
        tokio::spawn(read_loop(
            server.to_string(),
            stdout,
            Arc::clone(&client.pending),
            // Weak: closing the session must close stdin even while the reader runs.
            Arc::downgrade(&client.writer),
            client.watcher.clone(),
            client.closed.clone(),
        ));
        let hello = serde_json::to_value(Watcher::client_config()).map_err(|e| e.to_string())?;
        let answer = client
            .request("initialize", hello, false)
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
            .writer
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .map_err(|e| e.to_string())?;
        Ok(client)
    }

    /// Whether the session is up: the reader runs and the process has not exited.
    pub fn is_alive(&self) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        match child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) | None => false,
        }
    }

    /// Sends request `method` and waits for its answer (no timeout: the caller has one).
    pub async fn request(&self, method: &str, params: Value, cancel_on_drop: bool) -> Answer {
        let (id, receiver) = self.register();
        self.exchange(id, receiver, method, params, cancel_on_drop)
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
        let (id, receiver) = self.register();
        let token = ProgressToken(NumberOrString::Number(id));
        let _registered = Registered::new(&self.watcher, &token, progress, client);
        let mut params = json!({"name": tool, "_meta": {"progressToken": id}});
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        self.exchange(id, receiver, "tools/call", params, true)
            .await
    }

    /// Sends request `id` (already registered) and waits for its answer or the session's end;
    /// dropped before either, it withdraws the request (and cancels it if `cancel_on_drop`).
    async fn exchange(
        &self,
        id: i64,
        receiver: oneshot::Receiver<Answer>,
        method: &str,
        params: Value,
        cancel_on_drop: bool,
    ) -> Answer {
        let mut waiting = Waiting {
            client: self,
            id,
            cancel_on_drop,
            answered: false,
        };
        self.writer
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let answer = tokio::select! {
            answer = receiver => answer.unwrap_or(Err(RequestError::Closed)),
            () = self.closed.cancelled() => Err(RequestError::Closed),
        };
        waiting.answered = true;
        answer
    }

    fn register(&self) -> (i64, oneshot::Receiver<Answer>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, sender);
        (id, receiver)
    }

    /// Ends the session: closes stdin (a well-behaved server exits), waits up to `grace`, then
    /// kills the process; either way it is reaped.
    pub async fn close(self, grace: Duration) {
        self.closed.cancel();
        drop(self.writer);
        let child = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut child) = child
            && tokio::time::timeout(grace, child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// A call's entries in the watcher (progress sink, elicitation client), removed when dropped.
struct Registered<'a> {
    watcher: &'a Watcher,
    token: ProgressToken,
}

impl<'a> Registered<'a> {
    fn new(
        watcher: &'a Watcher,
        token: &ProgressToken,
        progress: Option<talon_core::ProgressSink>,
        client: Option<talon_core::ClientHandle>,
    ) -> Self {
        if let Some(sink) = progress {
            watcher
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token.clone(), sink);
        }
        if let Some(client) = client {
            watcher
                .clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token.clone(), client);
        }
        Self {
            watcher,
            token: token.clone(),
        }
    }
}

impl Drop for Registered<'_> {
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

/// Reads the server's messages until its stdout ends; answers complete waiting requests,
/// requests are answered, notifications reach the watcher.
async fn read_loop(
    server: String,
    stdout: ChildStdout,
    pending: Pending,
    writer: std::sync::Weak<Writer>,
    watcher: Watcher,
    closed: CancellationToken,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(server = %server, "ending the session: {e}");
                break;
            }
        }
        let text = trim_end(&line);
        if text.is_empty() {
            continue;
        }
        let message: Incoming = match serde_json::from_slice(text) {
            Ok(m) => m,
            Err(e) => {
                let shown = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
                tracing::warn!(server = %server, "skipped a line that is not JSON-RPC ({e}): {shown}");
                continue;
            }
        };
        dispatch(&server, message, &pending, &writer, &watcher);
    }
    closed.cancel();
    // Every call still waiting learns the session is over.
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

fn dispatch(
    server: &str,
    message: Incoming,
    pending: &Pending,
    writer: &std::sync::Weak<Writer>,
    watcher: &Watcher,
) {
    match (message.method, message.id) {
        // An answer to one of Talon's requests.
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                tracing::warn!(server = %server, "skipped an answer to unknown request {id}");
                return;
            };
            let answer = match (message.result, message.error) {
                (_, Some(e)) => Err(RequestError::Rpc {
                    code: e.code,
                    message: e.message,
                }),
                (Some(result), None) => Ok(result),
                (None, None) => Ok(Value::Null),
            };
            let waiter = pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(waiter) = waiter {
                let _ = waiter.send(answer);
            }
        }
        // A request from the server: answered on a task of its own (an elicitation waits for
        // a person) so the reader goes on.
        (Some(method), Some(id)) => {
            let (writer, watcher) = (writer.clone(), watcher.clone());
            let params = message.params.unwrap_or(Value::Null);
            tokio::spawn(async move {
                let reply = match method.as_str() {
                    "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                    "elicitation/create" => {
                        let answer = watcher.elicit(params).await;
                        json!({"jsonrpc": "2.0", "id": id, "result": answer})
                    }
                    other => json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601, "message": format!("method not found: {other}")}}),
                };
                if let Some(writer) = writer.upgrade() {
                    let _ = writer.send(&reply).await;
                }
            });
        }
        (Some(method), None) => notification(server, &method, message.params, watcher),
        (None, None) => {
            tracing::warn!(server = %server, "skipped a message with neither id nor method")
        }
    }
}

fn notification(server: &str, method: &str, params: Option<Value>, watcher: &Watcher) {
    match method {
        "notifications/tools/list_changed" => watcher.tools_changed.notify_one(),
        "notifications/progress" => {
            match params.map(serde_json::from_value::<ProgressNotificationParam>) {
                Some(Ok(progress)) => watcher.progressed(progress),
                _ => tracing::warn!(server = %server, "skipped a malformed progress notification"),
            }
        }
        "notifications/message" => {
            let params = params.unwrap_or(Value::Null);
            tracing::info!(server = %server, level = %params["level"], "{}", params["data"]);
        }
        _ => {}
    }
}

/// Reads one line into `line` (without a limit beyond [`MAX_MESSAGE_BYTES`]); `false` at EOF.
async fn read_line(
    reader: &mut BufReader<ChildStdout>,
    line: &mut Vec<u8>,
) -> Result<bool, String> {
    loop {
        let buffer = reader.fill_buf().await.map_err(|e| e.to_string())?;
        if buffer.is_empty() {
            return Ok(!line.is_empty());
        }
        let (take, done) = match memchr(b'\n', buffer) {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if line.len() + take > MAX_MESSAGE_BYTES {
            return Err(format!(
                "the server sent a message over {MAX_MESSAGE_BYTES} bytes"
            ));
        }
        line.extend_from_slice(&buffer[..take]);
        reader.consume(take);
        if done {
            return Ok(true);
        }
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|b| *b == needle)
}

fn trim_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    &line[..end]
}

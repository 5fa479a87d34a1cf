//! A scripted mock model provider: an HTTP server speaking both the OpenAI Chat Completions and
//! the Anthropic Messages APIs, answering each request with the next [`Turn`] of a [`Script`].
//!
//! It exists so Talon's provider clients and agent loop can be tested end to end over real HTTP
//! (streaming, retries, truncated streams, idle timeouts) without a network or an API key, and so
//! users can run offline demos with `talon mock-provider --script FILE`.
//!
//! Endpoints:
//! - `POST /v1/chat/completions`: OpenAI Chat Completions, streamed (SSE) when `stream` is true.
//! - `POST /v1/messages`: Anthropic Messages, streamed (SSE) when `stream` is true.
//! - `GET /_mock/requests`: the JSON array of every request body received, in order.

mod anthropic;
mod embeddings;
mod openai;
mod script;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use script::{Script, ScriptedCall, Turn, Usage};

/// How long [`MockServer::shutdown`] waits for open connections before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The model name answered with when a request names none.
const DEFAULT_MODEL: &str = "mock-model";

/// Why the mock provider could not load its script or serve.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// The script text is not a valid script; the message names the turn and field at fault.
    #[error("invalid mock script: {0}")]
    InvalidScript(String),
    /// The script file is not a valid script; the message names the turn and field at fault.
    #[error("invalid mock script {}: {message}", path.display())]
    InvalidScriptFile {
        /// The file read.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The script file could not be read.
    #[error("cannot read mock script {}: {source}", path.display())]
    ReadScript {
        /// The file asked for.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The listening socket could not be bound.
    #[error("cannot bind the mock provider to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server failed while serving.
    #[error("the mock provider failed while serving: {0}")]
    Serve(std::io::Error),
}

/// A running mock provider bound to a local port, for tests.
///
/// Dropping it stops the server; [`MockServer::shutdown`] stops it and waits for it to finish.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<MockState>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), MockError>>>,
}

impl MockServer {
    /// Binds `addr` (e.g. `127.0.0.1:0`) and serves `script` until dropped or `shutdown` is called.
    pub async fn start(script: Script, addr: SocketAddr) -> Result<MockServer, MockError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MockError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| MockError::Bind { addr, source })?;
        let state = Arc::new(MockState::new(script));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_state(Arc::clone(&state), listener, async move {
            // A dropped sender means the server was dropped: stop as well.
            let _ = stopped.await;
        }));
        tracing::debug!(addr = %local, "mock provider listening");
        Ok(MockServer {
            addr: local,
            state,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The base URL of the server, e.g. `http://127.0.0.1:PORT` (append `/v1/...`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request body received so far, in order, so tests can check what a client sent.
    pub fn requests(&self) -> Vec<Value> {
        self.state.log().requests.clone()
    }

    /// Stops the server, letting open responses finish for a few seconds before cutting them.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Serves `script` on `listener` until `shutdown` completes (used by `talon mock-provider`);
/// `/v1/embeddings` answers with `embedder`'s vectors, or hashed words without one.
pub async fn serve(
    script: Script,
    embedder: Option<Arc<dyn talon_embed::Embedder>>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), MockError> {
    let mut state = MockState::new(script);
    state.embedder = embedder;
    serve_state(Arc::new(state), listener, shutdown).await
}

async fn serve_state(
    state: Arc<MockState>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), MockError> {
    let app = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/_mock/requests", get(recorded_requests))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/_mock/embeddings", get(embeddings::embedded))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(MockError::Serve)
}

/// The script and what has happened so far, shared by all connections.
struct MockState {
    script: Script,
    log: Mutex<Log>,
    /// What `/v1/embeddings` answers with; hashed words without one.
    embedder: Option<Arc<dyn talon_embed::Embedder>>,
    /// Texts embedded so far.
    embedded: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Log {
    requests: Vec<Value>,
    answered: usize,
    /// Turns used up (answers from `after_tool_results` use none).
    consumed: usize,
    /// Turns used up per conversation of [`Script::conversations`].
    per_conversation: Vec<usize>,
}

/// Which API a request came in on, for its answer and error formats.
#[derive(Debug, Clone, Copy)]
enum Api {
    OpenAi,
    Anthropic,
}

/// What an endpoint needs to answer one request with one successful turn.
pub(crate) struct Reply {
    /// The 0-based number of this answer, used in ids.
    pub(crate) seq: usize,
    /// The model the request named.
    pub(crate) model: String,
    /// Whether the client asked for a stream.
    pub(crate) stream: bool,
    /// Whether the client asked for a usage chunk (OpenAI `stream_options.include_usage`).
    pub(crate) include_usage: bool,
    /// The scripted answer.
    pub(crate) turn: Turn,
}

impl MockState {
    fn new(script: Script) -> Self {
        MockState {
            script,
            log: Mutex::new(Log::default()),
            embedder: None,
            embedded: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        // The log stays consistent even if a holder panicked: each update is a single push/add.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `request` and takes the turn answering it: its number and the turn, or `None`
    /// when the script ran out.
    fn take(&self, request: Value) -> (usize, Option<Turn>) {
        let run_id = last_run_id(&request.to_string());
        let (seq, turn) = self.pick(request);
        (seq, turn.map(|turn| with_run_id(turn, run_id.as_deref())))
    }

    fn pick(&self, request: Value) -> (usize, Option<Turn>) {
        let after_tools = self
            .script
            .after_tool_results
            .as_ref()
            .filter(|_| ends_with_tool_results(&request))
            .cloned();
        let mut log = self.log();
        log.requests.push(request);
        let seq = log.answered;
        log.answered += 1;
        if after_tools.is_some() {
            return (seq, after_tools);
        }
        let request = log.requests.last().unwrap_or(&Value::Null);
        let (first, last) = (user_text(request, false), user_text(request, true));
        if let Some((c, conversation)) =
            self.script
                .conversations
                .iter()
                .enumerate()
                .find(|(_, conversation)| {
                    let text = if conversation.last { &last } else { &first };
                    text.contains(&conversation.when)
                })
        {
            if log.per_conversation.len() <= c {
                log.per_conversation.resize(c + 1, 0);
            }
            let next = log.per_conversation[c];
            log.per_conversation[c] += 1;
            let turns = &conversation.turns;
            return (seq, turns.get(next).or(turns.last()).cloned());
        }
        let next = log.consumed;
        log.consumed += 1;
        let turns = &self.script.turns;
        let turn = match turns.get(next) {
            Some(turn) => Some(turn.clone()),
            None if self.script.repeat_last => turns.last().cloned(),
            None => None,
        };
        (seq, turn)
    }
}

/// The last agent run id (`run-` and 32 hex digits) in `text`, for scripts that call a tool
/// with the id an earlier call returned (`{{last_run_id}}`).
fn last_run_id(text: &str) -> Option<String> {
    text.rmatch_indices("run-").find_map(|(at, _)| {
        let id = text.get(at..at + 36)?;
        id[4..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| id.to_string())
    })
}

/// `turn` with `{{last_run_id}}` in its tool calls' arguments replaced by `run_id`.
fn with_run_id(mut turn: Turn, run_id: Option<&str>) -> Turn {
    let Some(run_id) = run_id else {
        return turn;
    };
    for call in &mut turn.tool_calls {
        let text = call.arguments.to_string();
        if text.contains("{{last_run_id}}")
            && let Ok(value) = serde_json::from_str(&text.replace("{{last_run_id}}", run_id))
        {
            call.arguments = value;
        }
    }
    turn
}

/// The text of the request's first (`last`: last) user message (either API; text parts
/// joined).
fn user_text(request: &Value, last: bool) -> String {
    let is_user = |m: &&Value| m.get("role").and_then(Value::as_str) == Some("user");
    let messages = request.get("messages").and_then(Value::as_array);
    let found = messages.and_then(|m| {
        if last {
            m.iter().rev().find(is_user)
        } else {
            m.iter().find(is_user)
        }
    });
    match found.and_then(|m| m.get("content")) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether the request's last message carries tool results (OpenAI `role: tool`, Anthropic a
/// user message with `tool_result` blocks).
fn ends_with_tool_results(request: &Value) -> bool {
    let Some(last) = request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
    else {
        return false;
    };
    last.get("role").and_then(Value::as_str) == Some("tool")
        || last
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            })
}

async fn chat_completions(State(state): State<Arc<MockState>>, body: Bytes) -> Response {
    answer(&state, Api::OpenAi, &body).await
}

async fn messages(State(state): State<Arc<MockState>>, body: Bytes) -> Response {
    answer(&state, Api::Anthropic, &body).await
}

async fn recorded_requests(State(state): State<Arc<MockState>>) -> Response {
    axum::Json(state.log().requests.clone()).into_response()
}

async fn answer(state: &MockState, api: Api, body: &[u8]) -> Response {
    let request: Value = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(e) => {
            let message = format!("the request body is not valid JSON: {e}");
            return error_response(api, 400, &message, None);
        }
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_MODEL)
        .to_owned();
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);

    let (seq, turn) = state.take(request);
    let Some(turn) = turn else {
        let message = format!(
            "the mock's script has no turn left ({} turns were scripted)",
            state.script.turns.len()
        );
        tracing::warn!("{message}");
        return error_response(api, 500, &message, None);
    };
    tracing::debug!(?api, seq, stream, "mock provider answering");
    if turn.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(turn.delay_ms)).await;
    }
    if let Some(status) = turn.status {
        let message = turn.error.as_deref().unwrap_or("scripted error");
        return error_response(api, status, message, turn.retry_after);
    }
    let reply = Reply {
        seq,
        model,
        stream,
        include_usage,
        turn,
    };
    match api {
        Api::OpenAi => openai::reply(&reply),
        Api::Anthropic => anthropic::reply(&reply),
    }
}

/// An error answer in `api`'s error format, with `Retry-After` when given.
fn error_response(api: Api, status: u16, message: &str, retry_after: Option<u64>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match api {
        Api::OpenAi => openai::error_body(status, message),
        Api::Anthropic => anthropic::error_body(status, message),
    };
    let mut response = (code, axum::Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A complete JSON answer.
fn json_response(body: &Value) -> Response {
    axum::Json(body).into_response()
}

/// An SSE answer sending `events` (already framed) one by one, with the turn's pacing and
/// breakage applied while the body is being written, so delays really happen on the wire.
fn sse_response(mut events: Vec<String>, turn: &Turn) -> Response {
    if turn.cut_stream {
        let keep = (events.len() / 2).max(1);
        events.truncate(keep);
    }
    let chunk_delay = Duration::from_millis(turn.chunk_delay_ms);
    let stall = Duration::from_millis(turn.stall_ms);
    let frames = futures::stream::unfold(
        (events.into_iter(), 0usize),
        move |(mut events, sent)| async move {
            let event = events.next()?;
            if sent == 1 && !stall.is_zero() {
                tokio::time::sleep(stall).await;
            }
            if sent > 0 && !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(event)), (events, sent + 1)))
        },
    );
    let mut response = Response::new(Body::from_stream(frames));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Seconds since the Unix epoch, for OpenAI's `created`.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `text` cut into word-sized pieces (each word with the whitespace after it) that join back
/// to `text`, so a client sees it arrive in several deltas.
fn split_words(text: &str) -> Vec<&str> {
    text.split_inclusive(char::is_whitespace).collect()
}

/// `text` cut into at least two pieces (when it has two characters or more) at character
/// boundaries, so a client has to join partial JSON fragments.
fn split_fragments(text: &str) -> Vec<&str> {
    let chars = text.chars().count();
    if chars < 2 {
        return vec![text];
    }
    let size = chars.div_ceil(3).max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    for (n, (at, _)) in text.char_indices().enumerate() {
        if n > 0 && n % size == 0 {
            pieces.push(&text[start..at]);
            start = at;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::{split_fragments, split_words};

    #[test]
    fn words_join_back() {
        let text = "Hello there,  world\nagain";
        let words = split_words(text);
        assert!(words.len() >= 2);
        assert_eq!(words.concat(), text);
    }

    #[test]
    fn fragments_join_back_and_are_several() {
        for text in ["{}", "{\"a\":1}", "{\"path\":\"é/ü\"}", "abc"] {
            let pieces = split_fragments(text);
            assert!(pieces.len() >= 2, "{text}: {pieces:?}");
            assert_eq!(pieces.concat(), text);
        }
        assert_eq!(split_fragments("x"), vec!["x"]);
    }
}

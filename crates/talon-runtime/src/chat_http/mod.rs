//! The agent over HTTP, served by `talon serve` behind the gateway's bearer token.
//!
//! | Route | |
//! |---|---|
//! | `POST /v1/chat/completions` | OpenAI-compatible (streaming or not): `model` names the agent |
//! | `POST /v1/messages` | Anthropic-compatible (streaming or not), the same semantics |
//! | `GET /v1/models`, `GET /v1/models/{agent}` | the agents, as OpenAI lists models |
//! | `POST /v1/sessions/{key}/messages` | one turn in a stored session: `{"text", "agent"?, "user"?}` |
//! | `POST /v1/sessions/{key}/cancel[?user=]` | cancels the turn running in the session |
//! | `GET /v1/sessions[?agent=&user=&limit=]` | stored sessions, most recent first |
//! | `GET /v1/sessions/{key}[?user=]` | one session and its messages |
//!
//! Several users share one gateway token, so sessions belong to their user: every route sees
//! only the sessions of the user it names (`user` in the body or the query; none: only sessions
//! of no user), another user's session answers "not found" like a nonexistent one, and a turn
//! never runs in another user's session. A named session's key carries the user
//! (`agent:<agent>:http:user:<user>:<name>`), and so does a stateless call's, which keeps one
//! user's stateless calls from sharing another's rate limit and background commands.
//!
//! The two model APIs are drop-in replacements for OpenAI's and Anthropic's: stateless (the
//! client sends the conversation each time) unless the request names a session (`"session"` in
//! the body or an `X-Talon-Session` header): then the stored session is continued and only the
//! last user message is taken. The client's system or developer messages follow the agent's own
//! system prompt; its tools are offered beside the agent's and run by the client (see
//! [`client_turn`]); sampling settings reach the provider or are refused with a 400 naming the
//! setting, never dropped. The agent's own tool calls run here, and the reply shows them (a
//! `talon` field, and `talon` events in a stream).
//!
//! Every turn runs on a task of its own: a client that disconnects cancels its turn, which is
//! then saved as cancelled rather than cut off half-way. Tools' questions to the user wait on
//! `/v1/questions`, approvals on `/v1/approvals`.

mod anthropic;
mod client_turn;
mod openai;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{FromRef, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use talon_agent::{Message, RunEvent, TurnStop};
use tokio_util::sync::CancellationToken;

use crate::agent_runs::{ApiTurn, Ran, RunError, TurnRequest};
use crate::runner::Runner;

/// What the routes share.
#[derive(Clone)]
struct ApiState {
    runner: Runner,
    /// Turns waiting for their client's tool results.
    continuations: Arc<client_turn::Continuations>,
}

impl FromRef<ApiState> for Runner {
    fn from_ref(state: &ApiState) -> Runner {
        state.runner.clone()
    }
}

/// The routes over `runner`.
pub fn routes(runner: Runner) -> Router {
    let state = ApiState {
        runner,
        continuations: Arc::default(),
    };
    Router::new()
        .route("/v1/chat/completions", post(openai::completions))
        .route("/v1/messages", post(anthropic::messages_route))
        .route("/v1/models", get(list_models))
        .route("/v1/models/{model}", get(show_model))
        .route("/v1/sessions", get(list_sessions))
        .route("/v1/sessions/{key}", get(show_session))
        .route("/v1/sessions/{key}/messages", post(session_message))
        .route("/v1/sessions/{key}/cancel", post(cancel_turn))
        .with_state(state)
}

/// Why a model API request failed, for each API to say in its own shape.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    kind: ErrorKind,
    param: Option<String>,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    InvalidRequest,
    ModelNotFound,
    Server,
    /// The store cannot be reached: 503 with `Retry-After`.
    Unavailable,
    Provider,
    PromptBlocked,
}

impl ApiError {
    fn invalid(param: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            kind: ErrorKind::InvalidRequest,
            param: param.map(str::to_string),
            message: message.into(),
        }
    }

    /// A model (here: an agent) that does not exist: 404.
    fn model_not_found(model: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            kind: ErrorKind::ModelNotFound,
            param: Some("model".into()),
            message: format!(
                "The model {model:?} does not exist: it names a Talon agent (GET /v1/models lists them; create one with `talon agents create {model}`)"
            ),
        }
    }

    /// How a finished turn failed, if it did.
    fn of_turn(stop: &TurnStop) -> Option<Self> {
        let (status, kind, why) = match stop {
            TurnStop::Failed(why) => (StatusCode::BAD_GATEWAY, ErrorKind::Provider, why),
            TurnStop::PromptBlocked(why) => {
                (StatusCode::BAD_REQUEST, ErrorKind::PromptBlocked, why)
            }
            _ => return None,
        };
        Some(Self {
            status,
            kind,
            param: None,
            message: why.clone(),
        })
    }

    /// OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
    fn openai_body(&self) -> Value {
        let (kind, code) = match self.kind {
            ErrorKind::InvalidRequest => ("invalid_request_error", None),
            ErrorKind::ModelNotFound => ("invalid_request_error", Some("model_not_found")),
            ErrorKind::Server => ("server_error", None),
            ErrorKind::Unavailable => ("service_unavailable", Some("store_unavailable")),
            ErrorKind::Provider => ("provider_error", None),
            ErrorKind::PromptBlocked => ("prompt_blocked", None),
        };
        json!({"error": {"message": self.message, "type": kind, "param": self.param,
                         "code": code}})
    }

    /// Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`.
    fn anthropic_body(&self) -> Value {
        let kind = match self.kind {
            ErrorKind::InvalidRequest | ErrorKind::PromptBlocked => "invalid_request_error",
            ErrorKind::ModelNotFound => "not_found_error",
            ErrorKind::Server | ErrorKind::Provider => "api_error",
            ErrorKind::Unavailable => "overloaded_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": self.message}})
    }

    fn openai(&self) -> Response {
        self.with_retry_after((self.status, Json(self.openai_body())).into_response())
    }

    fn anthropic(&self) -> Response {
        self.with_retry_after((self.status, Json(self.anthropic_body())).into_response())
    }

    /// Tells the client when to try again, when waiting is what helps.
    fn with_retry_after(&self, mut response: Response) -> Response {
        if self.kind == ErrorKind::Unavailable {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(talon_gateway::RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Invalid(m) | RunError::UnknownAgent(m) => Self::invalid(None, m),
            RunError::Store(m) => Self {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                kind: ErrorKind::Server,
                param: None,
                message: m,
            },
            e @ RunError::Unavailable(_) => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                kind: ErrorKind::Unavailable,
                param: None,
                message: e.to_string(),
            },
        }
    }
}

impl From<talon_store::StoreError> for ApiError {
    /// An unreachable database is 503 with `Retry-After` (try again), anything else 500.
    fn from(e: talon_store::StoreError) -> Self {
        if e.is_unavailable() {
            RunError::Unavailable(e.to_string()).into()
        } else {
            RunError::Store(e.to_string()).into()
        }
    }
}

/// A response naming its agent and session for the request log.
trait Labelled {
    fn labelled(self, labels: talon_gateway::RequestLabels) -> Response;
}

impl Labelled for Response {
    fn labelled(mut self, labels: talon_gateway::RequestLabels) -> Response {
        self.extensions_mut().insert(labels);
        self
    }
}

/// Whether a stream shows `event` as the agent's activity (its text goes out as text).
fn shows_activity(event: &RunEvent) -> bool {
    !matches!(event, RunEvent::Text { .. } | RunEvent::Usage { .. })
}

/// A server-sent event stream of what arrives on `rx`; dropping it (the client went away)
/// drops `guard`, which cancels the turn.
fn sse(
    rx: tokio::sync::mpsc::UnboundedReceiver<axum::response::sse::Event>,
    guard: tokio_util::sync::DropGuard,
) -> Response {
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, std::convert::Infallible>(event), (rx, guard)))
    });
    axum::response::sse::Sse::new(stream).into_response()
}

/// A model API's request body, or what is wrong with it.
fn request_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("the request body is not valid: {e}")))
}

/// The session a request names in the `X-Talon-Session` header.
fn session_header(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("x-talon-session")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn error(status: StatusCode, kind: &str, message: impl std::fmt::Display) -> Response {
    talon_gateway::openai_error(status, kind, None, None, message)
}

/// An agent as OpenAI describes a model.
fn model_json(agent: &talon_store::AgentRecord) -> Value {
    json!({"id": agent.key, "object": "model", "created": agent.created_at / 1000,
           "owned_by": "talon"})
}

/// `GET /v1/models`: every agent, so clients and UIs that pick a model find them.
async fn list_models(State(runner): State<Runner>) -> Response {
    match runner.store().agents().await {
        Ok(agents) => Json(json!({"object": "list",
                                  "data": agents.iter().map(model_json).collect::<Vec<_>>()}))
        .into_response(),
        Err(e) => ApiError::from(e).openai(),
    }
}

/// `GET /v1/models/{agent}`.
async fn show_model(State(runner): State<Runner>, Path(model): Path<String>) -> Response {
    let key = agent_of(&model).map_or_else(
        || runner.engine().default_agent().to_string(),
        str::to_string,
    );
    match runner.store().agent(&key).await {
        Ok(Some(agent)) => Json(model_json(&agent)).into_response(),
        Ok(None) => ApiError::model_not_found(&model).openai(),
        Err(e) => ApiError::from(e).openai(),
    }
}

fn run_error(e: RunError) -> Response {
    ApiError::from(e).openai()
}

/// A turn's request with owned fields, to run on a task of its own.
struct Turn {
    agent: Option<String>,
    user: Option<String>,
    session: Option<String>,
    history: Vec<Message>,
    prompt: String,
    api: ApiTurn,
}

/// Runs `turn` on its own task, so the turn ends properly (cancelled, and saved as such) when
/// the client goes away: dropping the returned guard cancels it.
fn spawn_turn(
    runner: Runner,
    turn: Turn,
    events: impl Fn(RunEvent) + Send + Sync + 'static,
) -> (
    tokio::task::JoinHandle<Result<Ran, RunError>>,
    tokio_util::sync::DropGuard,
) {
    let cancel = CancellationToken::new();
    let guard = cancel.clone().drop_guard();
    let task = tokio::spawn(async move {
        runner
            .run(
                TurnRequest {
                    agent: turn.agent.as_deref(),
                    user: turn.user.as_deref(),
                    session: turn.session,
                    history: turn.history,
                    prompt: turn.prompt,
                    channel: "http",
                    client: None,
                    permission_mode: None,
                    cancel,
                    api: turn.api,
                    child: None,
                    delivering: Vec::new(),
                    origin: None,
                },
                &events,
            )
            .await
    });
    (task, guard)
}

/// Waits for a spawned turn (see [`spawn_turn`]).
async fn finished(task: tokio::task::JoinHandle<Result<Ran, RunError>>) -> Result<Ran, RunError> {
    task.await
        .map_err(|e| RunError::Store(format!("the turn's task failed: {e}")))?
}

fn agent_of(model: &str) -> Option<&str> {
    match model.strip_prefix("agent:").unwrap_or(model) {
        "" | "default" | "talon" => None,
        agent => Some(agent),
    }
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionMessage {
    text: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

async fn session_message(
    State(runner): State<Runner>,
    Path(key): Path<String>,
    Json(body): Json<SessionMessage>,
) -> Response {
    if body.text.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "text is empty",
        );
    }
    let turn = Turn {
        agent: body.agent,
        user: body.user,
        session: Some(key),
        history: Vec::new(),
        prompt: body.text,
        api: ApiTurn::default(),
    };
    let (task, _guard) = spawn_turn(runner, turn, |_| {});
    let ran = finished(task).await;
    match ran {
        Ok(ran) => Json(json!({
            "agent": ran.agent,
            "session": ran.session,
            "text": ran.outcome.text,
            "stop": ran.outcome.stop,
            "usage": ran.outcome.usage,
            "iterations": ran.outcome.iterations,
            "messages": ran.outcome.messages,
            "previous_turn_interrupted": ran.previous_interrupted,
        }))
        .into_response(),
        Err(e) => run_error(e),
    }
}

/// The user a query names (`?user=`).
#[derive(Debug, Deserialize)]
struct UserQuery {
    user: Option<String>,
}

impl UserQuery {
    fn user(&self) -> Option<&str> {
        named(&self.user)
    }
}

/// A user given in a query; empty is none.
fn named(user: &Option<String>) -> Option<&str> {
    user.as_deref().filter(|u| !u.is_empty())
}

/// Session `key` if it is `user`'s; another user's is `Ok(None)`, like one that does not exist.
async fn owned(
    runner: &Runner,
    key: &str,
    user: Option<&str>,
) -> Result<Option<talon_store::SessionRecord>, Response> {
    runner
        .store()
        .owned_session(key, None, user)
        .await
        .map_err(|e| ApiError::from(e).openai())
}

async fn cancel_turn(
    State(runner): State<Runner>,
    Path(key): Path<String>,
    Query(q): Query<UserQuery>,
) -> Response {
    let mine = match owned(&runner, &key, q.user()).await {
        Ok(found) => found.is_some(),
        Err(response) => return response,
    };
    if mine && runner.engine().cancel(&key) {
        Json(json!({"ok": true, "session": key})).into_response()
    } else {
        error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no turn is running in session {key:?}"),
        )
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    agent: Option<String>,
    user: Option<String>,
    limit: Option<i64>,
}

async fn list_sessions(State(runner): State<Runner>, Query(q): Query<ListQuery>) -> Response {
    let user = named(&q.user);
    match runner
        .store()
        .sessions(
            q.agent.as_deref(),
            user,
            q.limit.unwrap_or(100).clamp(1, 1000),
        )
        .await
    {
        Ok(list) => Json(json!({"sessions": list})).into_response(),
        Err(e) => ApiError::from(e).openai(),
    }
}

async fn show_session(
    State(runner): State<Runner>,
    Path(key): Path<String>,
    Query(q): Query<UserQuery>,
) -> Response {
    let session = match owned(&runner, &key, q.user()).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no session {key:?} of this user; GET /v1/sessions?user=… lists them"),
            );
        }
        Err(response) => return response,
    };
    match runner.engine().history(&key).await {
        Ok(messages) => Json(json!({"session": session, "messages": messages})).into_response(),
        Err(e) => run_error(e),
    }
}

//! The agent over HTTP, served by `talon serve` behind the gateway's bearer token.
//!
//! | Route | |
//! |---|---|
//! | `POST /v1/chat/completions` | OpenAI-compatible (streaming or not): `model` names the agent |
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
//! `/v1/chat/completions` is stateless like OpenAI's (the client sends the conversation each
//! time) unless the request names a session (`"session"` in the body or an
//! `X-Talon-Session` header): then the stored session is continued and only the last user
//! message is taken. The agent's own system prompt applies; system messages from the client
//! are refused rather than silently dropped.
//!
//! Every turn runs on a task of its own: a client that disconnects cancels its turn, which is
//! then saved as cancelled rather than cut off half-way. Tools' questions to the user wait on
//! `/v1/questions`, approvals on `/v1/approvals`.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use talon_agent::{Message, RunEvent, TurnStop};
use tokio_util::sync::CancellationToken;

use crate::agent_runs::{Ran, RunError, Runner, TurnRequest};

/// The routes over `runner`.
pub fn routes(runner: Runner) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/models", get(list_models))
        .route("/v1/models/{model}", get(show_model))
        .route("/v1/sessions", get(list_sessions))
        .route("/v1/sessions/{key}", get(show_session))
        .route("/v1/sessions/{key}/messages", post(session_message))
        .route("/v1/sessions/{key}/cancel", post(cancel_turn))
        .with_state(runner)
}

fn error(status: StatusCode, kind: &str, message: impl std::fmt::Display) -> Response {
    talon_gateway::openai_error(status, kind, None, None, message)
}

/// OpenAI's answer for a model (here: an agent) that does not exist: 404 `model_not_found`.
fn model_not_found(model: &str) -> Response {
    talon_gateway::openai_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("model"),
        Some("model_not_found"),
        format!(
            "The model {model:?} does not exist: it names a Talon agent (GET /v1/models lists them; create one with `talon agents create {model}`)"
        ),
    )
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
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e),
    }
}

/// `GET /v1/models/{agent}`.
async fn show_model(State(runner): State<Runner>, Path(model): Path<String>) -> Response {
    let key = agent_of(&model).map_or_else(|| runner.default_agent().to_string(), str::to_string);
    match runner.store().agent(&key).await {
        Ok(Some(agent)) => Json(model_json(&agent)).into_response(),
        Ok(None) => model_not_found(&model),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e),
    }
}

fn run_error(e: RunError) -> Response {
    match e {
        RunError::Invalid(m) | RunError::UnknownAgent(m) => {
            error(StatusCode::BAD_REQUEST, "invalid_request_error", m)
        }
        RunError::Store(m) => error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", m),
    }
}

/// A turn's request with owned fields, to run on a task of its own.
struct Turn {
    agent: Option<String>,
    user: Option<String>,
    session: Option<String>,
    history: Vec<Message>,
    prompt: String,
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

#[derive(Debug, Deserialize)]
struct CompletionRequest {
    /// The agent; `""`, `"default"` or `"talon"` mean the default agent.
    #[serde(default)]
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    stream: bool,
    /// The end user.
    #[serde(default)]
    user: Option<String>,
    /// A stored session to continue (Talon's extension).
    #[serde(default)]
    session: Option<String>,
    /// Streaming options: `include_usage` adds a last chunk with the turn's usage (and
    /// `"usage": null` on the others), as OpenAI does; without it no such chunk is sent, since
    /// clients read `choices[0]` of every chunk.
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The text of an OpenAI message's `content` (a string or text parts).
fn content_text(message: &Value) -> Result<String, String> {
    match message.get("content") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        Some(Value::Null) | None => Ok(String::new()),
        Some(other) => Err(format!(
            "message content must be a string or parts, not {other}"
        )),
    }
}

/// The conversation before the last user message, and that message.
fn split_conversation(messages: &[Value]) -> Result<(Vec<Message>, String), String> {
    let Some((last, earlier)) = messages.split_last() else {
        return Err("messages is empty: send at least one user message".into());
    };
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return Err("the last message must have role \"user\"".into());
    }
    let mut history = Vec::new();
    for (i, m) in earlier.iter().enumerate() {
        let text = content_text(m).map_err(|e| format!("messages[{i}]: {e}"))?;
        match m.get("role").and_then(Value::as_str) {
            Some("user") => history.push(Message::User { text }),
            Some("assistant") => history.push(Message::Assistant {
                text,
                tool_calls: Vec::new(),
            }),
            Some("system" | "developer") => {
                return Err(format!(
                    "messages[{i}]: system messages are not accepted; the agent's own system prompt applies (configure it with [agents.KEY] system)"
                ));
            }
            Some("tool") => {
                return Err(format!(
                    "messages[{i}]: tool messages are not accepted; Talon runs the agent's tools itself"
                ));
            }
            other => return Err(format!("messages[{i}]: unknown role {other:?}")),
        }
    }
    Ok((history, content_text(last)?))
}

fn agent_of(model: &str) -> Option<&str> {
    match model.strip_prefix("agent:").unwrap_or(model) {
        "" | "default" | "talon" => None,
        agent => Some(agent),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn finish_reason(stop: &TurnStop) -> &'static str {
    match stop {
        TurnStop::MaxTokens | TurnStop::TokenBudget | TurnStop::IterationCap => "length",
        TurnStop::Refusal => "content_filter",
        _ => "stop",
    }
}

fn usage_json(ran: &Ran) -> Value {
    let u = ran.outcome.usage;
    json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
           "total_tokens": u.input_tokens + u.output_tokens})
}

async fn completions(
    State(runner): State<Runner>,
    headers: HeaderMap,
    Json(body): Json<CompletionRequest>,
) -> Response {
    let (mut history, prompt) = match split_conversation(&body.messages) {
        Ok(split) => split,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", e),
    };
    let agent = agent_of(&body.model).map(str::to_string);
    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let session = body.session.clone().or_else(|| {
        headers
            .get("x-talon-session")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    });
    // Say what is wrong (an unknown agent, no provider) before any answer starts.
    let (agent_key, user) = match runner
        .context(agent.as_deref(), body.user.as_deref(), "http")
        .await
    {
        Ok(ctx) => (ctx.agent_key.unwrap_or_default(), ctx.user),
        Err(RunError::UnknownAgent(_)) => return model_not_found(&body.model),
        Err(e) => return run_error(e),
    };
    if let Err(e) = runner.check_model(&agent_key).await {
        return run_error(e);
    }
    let session = session.map(|chat| {
        // The stored session holds the conversation; the client's copy is not used.
        history.clear();
        Runner::session_key(&agent_key, "http", user.as_deref(), &chat)
    });
    let id = format!("chatcmpl-talon-{}", uuid::Uuid::new_v4().simple());
    let model = body.model.clone();
    let turn = Turn {
        agent,
        user: body.user,
        session,
        history,
        prompt,
    };
    if !body.stream {
        let (task, _guard) = spawn_turn(runner, turn, |_| {});
        let ran = finished(task).await;
        let ran = match ran {
            Ok(ran) => ran,
            Err(e) => return run_error(e),
        };
        match &ran.outcome.stop {
            TurnStop::Failed(why) => return error(StatusCode::BAD_GATEWAY, "provider_error", why),
            TurnStop::PromptBlocked(why) => {
                return error(StatusCode::BAD_REQUEST, "prompt_blocked", why);
            }
            _ => {}
        }
        return Json(json!({
            "id": id, "object": "chat.completion", "created": now_secs(), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ran.outcome.text},
                         "finish_reason": finish_reason(&ran.outcome.stop)}],
            "usage": usage_json(&ran),
            "talon": {"agent": ran.agent, "session": ran.session, "stop": ran.outcome.stop},
        }))
        .into_response();
    }
    // Streamed: text goes out as it arrives; the turn is cancelled if the client goes away.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let chunk = {
        let (id, model) = (id.clone(), model.clone());
        move |delta: Value, finish: Option<&str>| {
            let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": now_secs(),
                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            if include_usage {
                c["usage"] = Value::Null;
            }
            c
        }
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), None);
    let _ = tx.send(Event::default().data(first.to_string()));
    let events = {
        let (tx, chunk) = (tx.clone(), chunk.clone());
        move |event: RunEvent| {
            if let RunEvent::Text { text } = event {
                let c = chunk(json!({"content": text}), None);
                let _ = tx.send(Event::default().data(c.to_string()));
            }
        }
    };
    let (task, guard) = spawn_turn(runner, turn, events);
    tokio::spawn(async move {
        let ran = finished(task).await;
        match ran {
            Ok(ran) => {
                if let TurnStop::Failed(why) | TurnStop::PromptBlocked(why) = &ran.outcome.stop {
                    let kind = if matches!(ran.outcome.stop, TurnStop::Failed(_)) {
                        "provider_error"
                    } else {
                        "prompt_blocked"
                    };
                    let e = json!({"error": {"message": why, "type": kind}});
                    let _ = tx.send(Event::default().data(e.to_string()));
                } else {
                    let done = chunk(json!({}), Some(finish_reason(&ran.outcome.stop)));
                    let _ = tx.send(Event::default().data(done.to_string()));
                    if include_usage {
                        let usage = json!({"id": id, "object": "chat.completion.chunk",
                                           "created": now_secs(), "model": model, "choices": [],
                                           "usage": usage_json(&ran)});
                        let _ = tx.send(Event::default().data(usage.to_string()));
                    }
                }
            }
            Err(e) => {
                let e =
                    json!({"error": {"message": e.to_string(), "type": "invalid_request_error"}});
                let _ = tx.send(Event::default().data(e.to_string()));
            }
        }
        let _ = tx.send(Event::default().data("[DONE]"));
    });
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), (rx, guard)))
    });
    Sse::new(stream).into_response()
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
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e))
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
    if mine && runner.cancel(&key) {
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
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", e),
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
    match runner.history(&key).await {
        Ok(messages) => Json(json!({"session": session, "messages": messages})).into_response(),
        Err(e) => run_error(e),
    }
}

//! What waits for a person: `GET /v1/approvals` (calls waiting for approval), `POST
//! /v1/approvals` (answer one), `GET /v1/questions` (tools' questions to the user, such as
//! AskUserQuestion's, from turns run over HTTP) and `POST /v1/questions` (answer one). New
//! requests are announced on `GET /v1/events`.
//!
//! Several users share one gateway token, and a pending item shows what its user's call would
//! run or what their turn asks, so every route here takes `?user=ID` and sees only that user's
//! items (none: only those of calls naming no user). Another user's item answers "no pending
//! …", like one that does not exist; the brokers hold that rule ([`talon_core::waiting`]).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use talon_core::approvals::{Resolution, ResolveError};
use talon_core::questions::{Answer, AnswerError};

use crate::AppState;

/// Body of `POST /v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveRequest {
    /// The pending request's id.
    id: String,
    /// `allow_once`, `allow_always` or `deny`.
    decision: String,
    /// For `deny`: why, shown to the model.
    #[serde(default)]
    reason: Option<String>,
}

/// The user a query names (`?user=`); empty or absent is none.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UserQuery {
    #[serde(default)]
    user: Option<String>,
}

impl UserQuery {
    fn user(&self) -> Option<&str> {
        self.user.as_deref().filter(|u| !u.is_empty())
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"ok": false, "error": message.into()}))).into_response()
}

/// A request body, or what was wrong with it and what to send (`shape`).
fn body<T>(
    body: Result<Json<T>, axum::extract::rejection::JsonRejection>,
    shape: &str,
) -> Result<T, String> {
    body.map(|Json(body)| body)
        .map_err(|e| format!("{e}; send {shape}"))
}

pub(crate) async fn list(State(state): State<AppState>, Query(q): Query<UserQuery>) -> Response {
    Json(json!({"pending": state.approvals.pending(q.user())})).into_response()
}

pub(crate) async fn resolve(
    State(state): State<AppState>,
    Query(q): Query<UserQuery>,
    request: Result<Json<ResolveRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body(
        request,
        r#"{"id": "apr-…", "decision": "allow_once" | "allow_always" | "deny", "reason": "…"}"#,
    ) {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let resolution = match body.decision.as_str() {
        "allow_once" | "allow" => Resolution::AllowOnce,
        "allow_always" => Resolution::AllowAlways,
        "deny" => Resolution::Deny {
            reason: body.reason,
        },
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown decision {other:?}; use allow_once, allow_always or deny"),
            );
        }
    };
    match state
        .approvals
        .resolve(&body.id, q.user(), resolution.clone())
    {
        Ok(request) => Json(json!({
            "ok": true,
            "decision": resolution.as_str(),
            "request": request,
        }))
        .into_response(),
        Err(e @ ResolveError::Unknown(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ ResolveError::CannotRemember(_)) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

/// Body of `POST /v1/questions`.
#[derive(Debug, Deserialize)]
pub(crate) struct AnswerRequest {
    /// The pending question's id.
    id: String,
    /// The answer: `{"action": "accept", "content": {...}}`, `{"action": "decline"}` or
    /// `{"action": "cancel"}`.
    #[serde(flatten)]
    answer: Answer,
}

pub(crate) async fn questions(
    State(state): State<AppState>,
    Query(q): Query<UserQuery>,
) -> Response {
    Json(json!({"pending": state.questions.pending(q.user())})).into_response()
}

pub(crate) async fn answer(
    State(state): State<AppState>,
    Query(q): Query<UserQuery>,
    request: Result<Json<AnswerRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body(
        request,
        r#"{"id": "q-…", "action": "accept", "content": {"q1": "…"}} (fields as the question's requestedSchema), or "action": "decline" | "cancel""#,
    ) {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let action = body.answer.as_str();
    match state.questions.answer(&body.id, q.user(), body.answer) {
        Ok(question) => {
            Json(json!({"ok": true, "action": action, "question": question})).into_response()
        }
        Err(e @ AnswerError::Unknown(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ AnswerError::Invalid { .. }) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
    }
}

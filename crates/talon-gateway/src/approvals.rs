//! `GET /v1/approvals` (the requests waiting for a person), `POST /v1/approvals` (answer one),
//! and `GET /v1/events` (tool and approval events as server-sent events, so a client learns of a
//! new request without polling).

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use talon_core::approvals::{Resolution, ResolveError};
use talon_core::events::ToolEvent;
use tokio::sync::broadcast::error::RecvError;

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

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"ok": false, "error": message.into()}))).into_response()
}

pub(crate) async fn list(State(state): State<AppState>) -> Response {
    Json(json!({"pending": state.approvals.pending()})).into_response()
}

pub(crate) async fn resolve(
    State(state): State<AppState>,
    body: Result<Json<ResolveRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(body) => body,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{e}; send {{\"id\": \"apr-…\", \"decision\": \"allow_once\" | \"allow_always\" | \"deny\", \"reason\": \"…\"}}"
                ),
            );
        }
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
    match state.approvals.resolve(&body.id, resolution.clone()) {
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

pub(crate) async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = state.pipeline.events().subscribe();
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        let event = match receiver.recv().await {
            Ok(event) => sse_event(&event),
            Err(RecvError::Lagged(missed)) => Event::default()
                .event("lagged")
                .data(format!("{missed} events were dropped")),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), receiver))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// One event as SSE: its kind as the event name, the event as JSON data.
fn sse_event(event: &ToolEvent) -> Event {
    let kind = match event {
        ToolEvent::Started { .. } => "tool_started",
        ToolEvent::Finished { .. } => "tool_finished",
        ToolEvent::Progress { .. } => "tool_progress",
        ToolEvent::ApprovalRequested { .. } => "approval_requested",
        ToolEvent::ApprovalResolved { .. } => "approval_resolved",
        ToolEvent::RunStarted { .. } => "run_started",
        ToolEvent::RunFinished { .. } => "run_finished",
    };
    Event::default()
        .event(kind)
        .json_data(event)
        .unwrap_or_else(|e| Event::default().event("error").data(e.to_string()))
}

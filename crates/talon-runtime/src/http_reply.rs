//! The error replies of the admin HTTP routes (`/v1/agents`, `/v1/runs`, `/v1/teams`): one JSON
//! shape, `{"ok": false, "error": "…"}`, and one mapping of store errors to statuses.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use talon_store::StoreError;

/// `status` with `message` as the error.
pub(crate) fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        Json(json!({"ok": false, "error": message.to_string()})),
    )
        .into_response()
}

/// A store error: 400 when the input was wrong, 404 when what it names does not exist, 503
/// with `Retry-After` when the database cannot be reached (try again), 500 otherwise.
pub(crate) fn store_error(e: StoreError) -> Response {
    match e {
        StoreError::Invalid { .. } => error(StatusCode::BAD_REQUEST, e),
        StoreError::NotFound { .. } => error(StatusCode::NOT_FOUND, e),
        e if e.is_unavailable() => unavailable(e),
        e => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// 503 with `Retry-After`: the database cannot be reached now.
pub(crate) fn unavailable(message: impl std::fmt::Display) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, message);
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(talon_gateway::RETRY_AFTER_SECONDS),
    );
    response
}

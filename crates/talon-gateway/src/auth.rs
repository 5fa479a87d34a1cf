//! Bearer-token authentication: `Authorization: Bearer <token>`, or `x-api-key: <token>` as
//! Anthropic's SDKs send it.
//!
//! A refusal is OpenAI's JSON error (`invalid_api_key`) with `WWW-Authenticate: Bearer`, so
//! OpenAI and Anthropic SDK clients show the message, and MCP clients see the challenge.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// The configured token, if any.
#[derive(Clone)]
pub(crate) struct Token(pub Option<Arc<str>>);

/// Compares in time independent of where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) async fn require_bearer(
    State(token): State<Token>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.0 else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        // Anthropic's SDKs send the key as `x-api-key`.
        .or_else(|| {
            request
                .headers()
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        });
    match presented {
        Some(p) if constant_time_eq(p.as_bytes(), expected.as_bytes()) => next.run(request).await,
        Some(_) => refused("invalid bearer token: send Authorization: Bearer <gateway.token>"),
        None => refused("missing bearer token: send Authorization: Bearer <gateway.token>"),
    }
}

/// A 401 with `message`, in OpenAI's error shape.
fn refused(message: &str) -> Response {
    let mut response = crate::openai_error(
        StatusCode::UNAUTHORIZED,
        "invalid_request_error",
        None,
        Some("invalid_api_key"),
        message,
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}

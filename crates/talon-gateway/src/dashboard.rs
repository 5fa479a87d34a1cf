//! The operator's dashboard at `/`: plain HTML, CSS and JavaScript compiled into the binary
//! (no build step), talking to the same API as every client.
//!
//! The files hold no data, so they are served without the token (a page load cannot send one);
//! the page asks for the token and sends it on every request it makes. Everything a model, a
//! user or an MCP server wrote is put on the page as text, with control characters made
//! visible, never as HTML; the Content-Security-Policy allows only these files as scripts and
//! styles, so an injected `<script>` or inline handler could not run even if one got through.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("dashboard/index.html");
const API_JS: &str = include_str!("dashboard/api.js");
const APP_JS: &str = include_str!("dashboard/app.js");
const STYLE: &str = include_str!("dashboard/style.css");

/// Only the dashboard's own files run; nothing may frame it.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(crate) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

pub(crate) async fn api_js() -> Response {
    file("text/javascript; charset=utf-8", API_JS)
}

pub(crate) async fn app_js() -> Response {
    file("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE)
}

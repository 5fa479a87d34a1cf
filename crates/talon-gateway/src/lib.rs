//! Talon's gateway: `/mcp` (MCP streamable HTTP), `POST /v1/tools/invoke`, `GET /v1/tools`,
//! `GET`/`POST /v1/approvals`, `GET`/`POST /v1/questions`, `GET /v1/events` (WebSocket or
//! server-sent events), `GET /healthz` (live), `GET /readyz` (can serve: the store answers).
//!
//! Unlike GoClaw's `/v1/tools/invoke`, every call here goes through the same pipeline as the agent
//! loop: policy, validation, rate limit (keyed by the API token, the agent and the user), hooks,
//! permission, scrubbing.
//! Bearer-token auth protects everything except `/healthz` when a token is configured, and the
//! gateway refuses to listen beyond loopback without one. In front of everything, `/healthz`
//! included, the browser guard (`guard`) keeps web pages out: allowed `Host` only, no cross-site
//! `Origin` or `Sec-Fetch-Site`, JSON bodies only.
//!
//! # Charter
//!
//! - **Owns:** the HTTP front: guard, auth, the tools API, approvals, questions, events, readiness,
//!   the dashboard.
//! - **Never contains:** the store or the runtime (routes over them are merged in by the runtime).
//! - **A new feature goes:** a route over the runtime lives in talon-runtime and is merged here
//!   through `Services::admin`.

mod access_log;
mod approvals;
mod auth;
pub mod client;
mod dashboard;
mod events;
mod guard;
pub use access_log::RequestLabels;
pub use guard::check_allowed_origin;
mod invoke;
mod listen;
pub use auth::{MIN_TOKEN_LEN, WeakToken, check_token_strength};
pub use listen::{HEADER_READ_TIMEOUT, MAX_PENDING};

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use talon_core::approvals::Approvals;
use talon_core::questions::Questions;
use talon_core::{CallContext, Callers, Pipeline};
use talon_mcp::TalonMcp;
use tokio_util::sync::CancellationToken;

/// Seconds a caller is told to wait (`Retry-After`) while the gateway cannot serve: its store
/// does not answer (`/readyz`, and every route that needed it).
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// The default listen address.
pub const DEFAULT_BIND: &str = "127.0.0.1:8790";

/// Gateway settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub bind: SocketAddr,
    /// Bearer token required on every route but `/healthz`; `None` means no auth (loopback only).
    pub token: Option<String>,
    /// `Host` values accepted on every route (DNS-rebinding guard). Empty: derived from `bind`
    /// and the token (loopback names and the bind address without a token; any host with one).
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) allowed besides the gateway's own; empty: none.
    pub allowed_origins: Vec<String>,
    /// MCP clients ask their users before each tool call (`[mcp_server] client_confirms`).
    pub mcp_client_confirms: bool,
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(
        "refusing to listen on {0} without gateway.token: set TALON_GATEWAY__TOKEN (or gateway.token in talon.toml), or bind to 127.0.0.1"
    )]
    NoTokenBeyondLoopback(SocketAddr),
    #[error(
        "{0}: use a random value of at least {MIN_TOKEN_LEN} characters (`talon init --token` prints one)"
    )]
    WeakToken(#[from] WeakToken),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub pipeline: Arc<Pipeline>,
    pub template: Arc<CallContext>,
    /// Binds each call to its agent, user and workspace.
    pub callers: Callers,
    pub session_key: Arc<str>,
    /// Requests waiting for a person.
    pub approvals: Arc<Approvals>,
    pub questions: Arc<Questions>,
}

/// The session key for HTTP API calls: derived from the token so that one token is one rate-limit
/// bucket however many connections it opens, without the token itself appearing in logs.
fn http_session_key(token: Option<&str>) -> String {
    match token {
        None => "http:anonymous".into(),
        Some(token) => format!(
            "http:token:{}",
            talon_core::events::fingerprint(token.as_bytes())
        ),
    }
}

/// What the gateway serves: the pipeline, the template of its calls' contexts, the one place
/// that binds a call to its agent and workspace, and the approvals waiting for a person (the
/// pipeline's approver).
#[derive(Clone)]
pub struct Services {
    pub pipeline: Arc<Pipeline>,
    pub template: CallContext,
    pub callers: Callers,
    pub approvals: Arc<Approvals>,
    /// Tools' questions to users of HTTP turns.
    pub questions: Arc<Questions>,
    /// More routes behind the same bearer token (the binary's administration API: MCP servers,
    /// grants, access requests), so the gateway needs to know nothing about the store.
    pub admin: Option<Router>,
    /// What `GET /readyz` asks (the store, where there is one): `Err` says why the gateway
    /// cannot serve turns now. `None`: ready whenever it is live.
    pub readiness: Option<Readiness>,
}

/// A readiness check: `Ok` when the gateway can serve, else why not.
pub type Readiness = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
        + Send
        + Sync,
>;

/// Builds the router (exposed for tests that serve it on their own listener).
pub fn router(config: &GatewayConfig, services: Services, shutdown: CancellationToken) -> Router {
    let Services {
        pipeline,
        template,
        callers,
        approvals,
        questions,
        admin,
        readiness,
    } = services;
    let allowed_hosts = if !config.allowed_hosts.is_empty() {
        config.allowed_hosts.clone()
    } else if config.token.is_some() {
        // With a bearer token a rebinding page cannot authenticate; accept any Host.
        Vec::new()
    } else {
        vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "::1".into(),
            config.bind.ip().to_string(),
        ]
    };
    let guard = guard::Guard::new(allowed_hosts.clone(), &config.allowed_origins);
    let mcp = talon_mcp::http_service(
        TalonMcp::new(
            Arc::clone(&pipeline),
            template.clone(),
            callers.clone(),
            "http",
        )
        .client_confirms(config.mcp_client_confirms),
        allowed_hosts,
        shutdown,
    );
    let state = AppState {
        pipeline,
        template: Arc::new(template),
        callers,
        session_key: Arc::from(http_session_key(config.token.as_deref())),
        approvals,
        questions,
    };
    let protected = Router::new()
        .route("/v1/tools/invoke", post(invoke::invoke))
        .route("/v1/tools", get(invoke::list))
        .route(
            "/v1/approvals",
            get(approvals::list).post(approvals::resolve),
        )
        .route(
            "/v1/questions",
            get(approvals::questions).post(approvals::answer),
        )
        .route("/v1/events", get(events::events))
        .nest_service("/mcp", mcp)
        .with_state(state)
        .merge(admin.unwrap_or_default())
        .layer(axum::middleware::from_fn_with_state(
            auth::Token::new(config.token.as_deref()),
            auth::require_bearer,
        ));
    Router::new()
        .route("/healthz", get(invoke::healthz))
        .route("/readyz", get(move || invoke::readyz(readiness.clone())))
        .route("/", get(dashboard::index))
        .route("/dashboard/api.js", get(dashboard::api_js))
        .route("/dashboard/app.js", get(dashboard::app_js))
        .route("/dashboard/style.css", get(dashboard::style))
        .merge(protected)
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
        // Outermost: refused requests are logged too.
        .layer(axum::middleware::from_fn(access_log::log_request))
}

/// An error in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, which OpenAI
/// (and Anthropic) SDK clients show as it is: `param` names the offending parameter and `code`
/// is OpenAI's code for the error (`model_not_found`, `invalid_api_key`), where there is one.
/// Every OpenAI-facing route answers errors through it.
pub fn openai_error(
    status: axum::http::StatusCode,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
    message: impl std::fmt::Display,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        status,
        axum::Json(serde_json::json!({"error": {
            "message": message.to_string(), "type": kind, "param": param, "code": code}})),
    )
        .into_response()
}

/// Binds and serves until `shutdown` is cancelled.
pub async fn serve(
    config: GatewayConfig,
    services: Services,
    shutdown: CancellationToken,
) -> Result<(), GatewayError> {
    if config.token.is_none() && !config.bind.ip().is_loopback() {
        return Err(GatewayError::NoTokenBeyondLoopback(config.bind));
    }
    if let Some(token) = &config.token {
        check_token_strength(token)?;
    }
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| GatewayError::Bind {
            addr: config.bind,
            source,
        })?;
    let local = listener.local_addr().unwrap_or(config.bind);
    // No tool's connection reaches this listener, whatever the address rules allow.
    talon_net::own::register_listener(local);
    tracing::info!(addr = %local, auth = config.token.is_some(), "gateway listening");
    access_log::spawn_event_log(services.pipeline.events(), shutdown.clone());
    let app = router(&config, services, shutdown.clone());
    listen::serve(listener, app, shutdown, MAX_PENDING).await;
    talon_net::own::unregister_listener(local);
    tracing::info!("gateway stopped");
    Ok(())
}

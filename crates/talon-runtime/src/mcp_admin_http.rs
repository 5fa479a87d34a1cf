//! The HTTP administration API for bridged MCP servers, served by `talon serve` behind the
//! gateway's bearer token. It writes the store; the running bridge (this gateway's and every
//! other sharing the database) follows the change within seconds.
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/mcp-servers` | stored servers (no secret values) and every bridged server's status |
//! | `POST /v1/mcp-servers` | add (or with `"replace": true` change) a server |
//! | `DELETE /v1/mcp-servers/{name}` | remove a stored server and its grants |
//! | `GET /v1/mcp-grants[?server=]` | grants |
//! | `POST /v1/mcp-grants` | create or replace a grant |
//! | `DELETE /v1/mcp-grants/{server}/{agent\|user}/{subject}` | withdraw a grant |
//! | `GET /v1/mcp-access-requests[?status=]` | access requests |
//! | `POST /v1/mcp-access-requests` | file a request |
//! | `POST /v1/mcp-access-requests/{id}/{approve\|reject}` | review one |
//!
//! A stdio server's command is code run on this host, outside the sandbox. A gateway without
//! `gateway.token` answers whoever can reach its port, so it accepts only URL servers here:
//! command servers are added on the host (`talon mcp-servers add`, talon.toml) or through a
//! gateway with a token, whose holder is its administrator.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use talon_bridge::Bridge;
use talon_bridge::link::Status;
use talon_store::{GrantSpec, RequestStatus, Store, StoreError, SubjectKind};

use crate::http_reply::{error, store_error};
use crate::mcp_admin::{McpAdmin, McpAdminError, grant_json, request_json};
use crate::mcp_servers_config::McpServerSection;

#[derive(Clone)]
struct Admin {
    store: Store,
    bridge: Option<Arc<Bridge>>,
    /// Names in talon.toml: not stored, not removable here.
    configured: Arc<[String]>,
    /// Whether callers are authenticated (a gateway token): only then may a body define a
    /// server that runs a command on the host.
    commands_allowed: bool,
}

/// The routes, over `store` and the running `bridge`; `authenticated`: the gateway requires a
/// token (without one, no server that runs a host command is accepted).
pub fn routes(
    store: Store,
    bridge: Option<Arc<Bridge>>,
    configured: Vec<String>,
    authenticated: bool,
) -> Router {
    Router::new()
        .route("/v1/mcp-servers", get(list_servers).post(add_server))
        .route("/v1/mcp-servers/{name}", delete(remove_server))
        .route("/v1/mcp-grants", get(list_grants).post(put_grant))
        .route(
            "/v1/mcp-grants/{server}/{kind}/{subject}",
            delete(remove_grant),
        )
        .route(
            "/v1/mcp-access-requests",
            get(list_requests).post(file_request),
        )
        .route("/v1/mcp-access-requests/{id}/{decision}", post(review))
        .with_state(Admin {
            store,
            bridge,
            configured: configured.into(),
            commands_allowed: authenticated,
        })
}

/// A refused or failed operation: 400 for a request to fix, 404 for what does not exist, 409
/// for a name of `talon.toml`, 503 with `Retry-After` while the database cannot be reached.
fn refused(e: McpAdminError) -> Response {
    match e {
        McpAdminError::Invalid(_) => error(StatusCode::BAD_REQUEST, e),
        McpAdminError::Configured { .. } => error(StatusCode::CONFLICT, e),
        McpAdminError::NotFound(_) => error(StatusCode::NOT_FOUND, e),
        McpAdminError::Store(e) => store_error(e),
    }
}

impl Admin {
    fn ops(&self) -> McpAdmin<'_> {
        McpAdmin {
            store: &self.store,
            configured: &self.configured,
        }
    }
}

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

/// The parsed body, or what was wrong with it (for a 400).
fn body<T>(body: Body<T>, shape: &str) -> Result<T, String> {
    body.map(|Json(b)| b)
        .map_err(|e| format!("{e}; send {shape}"))
}

fn status_json(status: Option<&Status>) -> Value {
    match status {
        None => json!({"state": "connecting"}),
        Some(Status::Connected) => json!({"state": "connected"}),
        Some(Status::Reconnecting {
            attempt,
            last_error,
        }) => json!({"state": "reconnecting", "attempt": attempt, "last_error": last_error}),
        Some(Status::CoolingDown { last_error }) => {
            json!({"state": "cooling_down", "last_error": last_error})
        }
    }
}

async fn list_servers(State(admin): State<Admin>) -> Response {
    let stored = match admin.store.mcp_servers().await {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    let live: BTreeMap<String, Value> = admin
        .bridge
        .as_ref()
        .map(|b| b.statuses())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, status)| (name, status_json(status.as_ref())))
        .collect();
    let servers: Vec<Value> = stored
        .iter()
        .map(|s| {
            json!({"name": s.spec.name, "transport": s.spec.transport, "command": s.spec.command,
                "args": s.spec.args, "url": s.spec.url, "enabled": s.spec.enabled,
                "required": s.spec.required, "require_grant": s.spec.require_grant,
                "env_names": s.env_names, "header_names": s.header_names,
                "status": live.get(&s.spec.name)})
        })
        .collect();
    Json(json!({"servers": servers, "bridged": live, "configured": &*admin.configured}))
        .into_response()
}

/// Body of `POST /v1/mcp-servers`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerBody {
    name: String,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    startup_timeout_secs: Option<u64>,
    #[serde(default)]
    tool_timeout_secs: Option<u64>,
    #[serde(default)]
    max_output_chars: Option<u64>,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    require_grant: bool,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    replace: bool,
    /// Sign in with OAuth (`talon mcp-servers login NAME` on the gateway's host).
    #[serde(default)]
    oauth: bool,
    #[serde(default)]
    oauth_client_id: Option<String>,
    #[serde(default)]
    oauth_client_metadata_url: Option<String>,
    #[serde(default)]
    oauth_scopes: Vec<String>,
    /// Streamable HTTP: `auto` (the default) or an MCP protocol version.
    #[serde(default)]
    protocol_version: Option<String>,
}

fn yes() -> bool {
    true
}

async fn add_server(State(admin): State<Admin>, raw: Body<ServerBody>) -> Response {
    let b = match body(
        raw,
        r#"{"name": "…", "command": "…", "args": […]} or {"name": "…", "url": "https://…"}"#,
    ) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let runs_command = b.command.is_some()
        || !b.args.is_empty()
        || b.cwd.is_some()
        || b.env.is_some()
        || b.transport.as_deref() == Some("stdio");
    if runs_command && !admin.commands_allowed {
        return error(
            StatusCode::FORBIDDEN,
            "this gateway has no gateway.token, so it does not accept MCP servers that run a command \
             on its host (command, args, env, cwd): add the server on the host with `talon mcp-servers add` \
             or in talon.toml, or set gateway.token; URL servers are accepted",
        );
    }
    // The body is a server section like talon.toml's (without the fields that would read the
    // gateway's environment), turned into a record by its rule.
    let given = b.env.is_some() || b.headers.is_some() || !b.replace;
    let section = McpServerSection {
        transport: b.transport,
        command: b.command,
        args: b.args,
        env: b.env.unwrap_or_default().into_iter().collect(),
        cwd: b.cwd.map(std::path::PathBuf::from),
        url: b.url,
        headers: b.headers.unwrap_or_default(),
        bearer_token_env: None,
        prefix: b.prefix,
        startup_timeout_secs: b.startup_timeout_secs,
        tool_timeout_secs: b.tool_timeout_secs,
        max_output_chars: b.max_output_chars,
        required: b.required,
        require_grant: b.require_grant,
        oauth: b.oauth,
        oauth_client_id: b.oauth_client_id,
        oauth_client_secret_env: None,
        oauth_client_metadata_url: b.oauth_client_metadata_url,
        oauth_scopes: b.oauth_scopes,
        protocol_version: b.protocol_version,
        enabled: b.enabled,
    };
    match admin
        .ops()
        .add_server(&b.name, section, b.replace, given)
        .await
    {
        Ok(spec) => (
            StatusCode::CREATED,
            Json(json!({"ok": true, "name": spec.name})),
        )
            .into_response(),
        Err(e) => refused(e),
    }
}

async fn remove_server(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    match admin.ops().remove_server(&name).await {
        Ok(()) => Json(json!({"ok": true})).into_response(),
        Err(e) => refused(e),
    }
}

#[derive(Debug, Deserialize)]
struct ServerFilter {
    #[serde(default)]
    server: Option<String>,
}

async fn list_grants(State(admin): State<Admin>, Query(f): Query<ServerFilter>) -> Response {
    match admin.store.mcp_grants(f.server.as_deref()).await {
        Ok(grants) => {
            let grants: Vec<Value> = grants.iter().map(grant_json).collect();
            Json(json!({"grants": grants})).into_response()
        }
        Err(e) => store_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    server: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    granted_by: Option<String>,
}

async fn put_grant(State(admin): State<Admin>, raw: Body<GrantBody>) -> Response {
    let b = match body(
        raw,
        r#"{"server": "…", "agent": "…" (or "user"), "allow": […], "deny": […]}"#,
    ) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let (kind, subject) = match SubjectKind::of(b.agent, b.user) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    let grant = GrantSpec {
        server: b.server,
        kind,
        subject,
        enabled: b.enabled,
        tool_allow: b.allow,
        tool_deny: b.deny,
        granted_by: b.granted_by.unwrap_or_else(|| "http".into()),
    };
    match admin.ops().put_grant(&grant).await {
        Ok(()) => Json(json!({"ok": true})).into_response(),
        Err(e) => refused(e),
    }
}

async fn remove_grant(
    State(admin): State<Admin>,
    Path((server, kind, subject)): Path<(String, String, String)>,
) -> Response {
    let kind = match SubjectKind::parse(&kind) {
        Ok(k) => k,
        Err(e) => return store_error(e),
    };
    match admin.ops().remove_grant(&server, kind, &subject).await {
        Ok(()) => Json(json!({"ok": true})).into_response(),
        Err(e) => refused(e),
    }
}

#[derive(Debug, Deserialize)]
struct StatusFilter {
    #[serde(default)]
    status: Option<String>,
}

async fn list_requests(State(admin): State<Admin>, Query(f): Query<StatusFilter>) -> Response {
    let status = match f.status.as_deref().map(RequestStatus::parse).transpose() {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    match admin.store.mcp_access_requests(status).await {
        Ok(list) => Json(json!({"requests": list.iter().map(request_json).collect::<Vec<_>>()}))
            .into_response(),
        Err(e) => store_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestBody {
    server: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    requested_by: Option<String>,
}

async fn file_request(State(admin): State<Admin>, raw: Body<RequestBody>) -> Response {
    let b = match body(
        raw,
        r#"{"server": "…", "agent": "…" (or "user"), "tools": […], "reason": "…"}"#,
    ) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let (kind, subject) = match SubjectKind::of(b.agent, b.user) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    let by = b.requested_by.unwrap_or_else(|| subject.clone());
    match admin
        .ops()
        .request_access(&b.server, (kind, &subject), &b.tools, &b.reason, &by)
        .await
    {
        Ok(id) => (StatusCode::CREATED, Json(json!({"ok": true, "id": id}))).into_response(),
        Err(e) => refused(e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewBody {
    #[serde(default)]
    note: String,
    #[serde(default)]
    reviewed_by: Option<String>,
}

async fn review(
    State(admin): State<Admin>,
    Path((id, decision)): Path<(i64, String)>,
    raw: Option<Json<ReviewBody>>,
) -> Response {
    let approve = match decision.as_str() {
        "approve" => true,
        "reject" => false,
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!("unknown decision {other:?}; use approve or reject"),
            );
        }
    };
    let b = raw.map(|Json(b)| b).unwrap_or_default();
    let by = b.reviewed_by.unwrap_or_else(|| "http".into());
    match admin
        .store
        .review_mcp_access(id, approve, &by, &b.note)
        .await
    {
        Ok(r) => Json(json!({"ok": true, "request": request_json(&r)})).into_response(),
        Err(e @ StoreError::Invalid { .. }) => error(StatusCode::CONFLICT, e),
        Err(e) => store_error(e),
    }
}

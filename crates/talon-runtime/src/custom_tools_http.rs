//! The HTTP API for custom tools, served by `talon serve` behind the gateway's bearer token.
//! It writes the store through [`crate::custom_tools::define`]; this gateway and every other
//! sharing the database load the change within seconds.
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/custom-tools` | every custom tool (variable names, never values) |
//! | `POST /v1/custom-tools` | define one (`"replace": true` changes an existing one) |
//! | `GET /v1/custom-tools/{name}` | one |
//! | `PATCH /v1/custom-tools/{name}` | change some of its fields |
//! | `DELETE /v1/custom-tools/{name}` | remove it and its variables |
//!
//! A custom tool is a command every agent's model may run (in the sandbox, judged like
//! `exec`), so defining one is the operator's act: a gateway without `gateway.token` answers
//! whoever can reach its port and only lists them; changes go through `talon custom-tools` on
//! the host or a gateway with a token.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use talon_core::Registry;
use talon_store::{CustomToolSpec, Store, StoredCustomTool};

use crate::custom_tools::{CustomToolPatch, DefineError, define, update};
use crate::http_reply::{error, store_error};

#[derive(Clone)]
struct Admin {
    store: Store,
    registry: Arc<Registry>,
    /// Callers are authenticated (a gateway token): only then are changes accepted.
    changes_allowed: bool,
}

/// The routes over `store`, checking names against the running `registry`.
pub fn routes(store: Store, registry: Arc<Registry>, authenticated: bool) -> Router {
    Router::new()
        .route("/v1/custom-tools", get(list).post(add))
        .route(
            "/v1/custom-tools/{name}",
            get(show).patch(change).delete(remove),
        )
        .with_state(Admin {
            store,
            registry,
            changes_allowed: authenticated,
        })
}

fn define_error(e: DefineError) -> Response {
    match e {
        DefineError::Invalid(_) => error(StatusCode::BAD_REQUEST, e.to_string()),
        DefineError::NotFound(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        DefineError::Store(e) => store_error(e),
    }
}

/// A tool as the API shows it (and `talon custom-tools list --json`).
pub fn tool_json(t: &StoredCustomTool) -> Value {
    json!({
        "name": t.spec.name,
        "agent": (!t.spec.agent.is_empty()).then_some(&t.spec.agent),
        "description": t.spec.description,
        "parameters": t.spec.parameters,
        "command": t.spec.command,
        "working_dir": t.spec.working_dir,
        "timeout_secs": t.spec.timeout_secs,
        "enabled": t.spec.enabled,
        "env_names": t.env_names,
        "created_by": t.created_by,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
    })
}

fn refuse_unauthenticated(admin: &Admin) -> Option<Response> {
    (!admin.changes_allowed).then(|| {
        error(
            StatusCode::FORBIDDEN,
            "custom tools run commands for every agent: set gateway.token to change them over HTTP, or use talon custom-tools on the gateway's host",
        )
    })
}

async fn list(State(admin): State<Admin>) -> Response {
    match admin.store.custom_tools().await {
        Ok(tools) => {
            Json(json!({"tools": tools.iter().map(tool_json).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => store_error(e),
    }
}

async fn show(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    match admin.store.custom_tool(&name).await {
        Ok(Some(t)) => Json(tool_json(&t)).into_response(),
        Ok(None) => define_error(DefineError::NotFound(name)),
        Err(e) => store_error(e),
    }
}

/// Body of `POST /v1/custom-tools`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolBody {
    name: String,
    description: String,
    command: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    replace: bool,
}

fn yes() -> bool {
    true
}

type Body<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

async fn add(State(admin): State<Admin>, raw: Body<ToolBody>) -> Response {
    if let Some(refused) = refuse_unauthenticated(&admin) {
        return refused;
    }
    let b = match raw {
        Ok(Json(b)) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{e}; send {{\"name\": \"…\", \"description\": \"…\", \"command\": \"… {{{{.arg}}}}\", \"parameters\": {{\"properties\": {{\"arg\": {{\"type\": \"string\"}}}}}}}}"
                ),
            );
        }
    };
    let mut spec = CustomToolSpec::new(b.name, b.description, b.command);
    if let Some(p) = b.parameters {
        spec.parameters = p;
    }
    spec.working_dir = b.working_dir.unwrap_or_default();
    spec.timeout_secs = b.timeout_secs.unwrap_or(spec.timeout_secs);
    spec.agent = b.agent.unwrap_or_default();
    spec.enabled = b.enabled;
    let env = b.env.unwrap_or_default();
    match define(
        &admin.store,
        Some(&admin.registry),
        &spec,
        Some(&env),
        b.replace,
        "http",
    )
    .await
    {
        Ok(()) => show(State(admin), Path(spec.name))
            .await
            .map_status(StatusCode::CREATED),
        Err(e) => define_error(e),
    }
}

async fn change(
    State(admin): State<Admin>,
    Path(name): Path<String>,
    raw: Body<CustomToolPatch>,
) -> Response {
    if let Some(refused) = refuse_unauthenticated(&admin) {
        return refused;
    }
    let patch = match raw {
        Ok(Json(p)) => p,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("{e}; send the fields to change"),
            );
        }
    };
    match update(&admin.store, Some(&admin.registry), &name, patch, "http").await {
        Ok(t) => Json(tool_json(&t)).into_response(),
        Err(e) => define_error(e),
    }
}

async fn remove(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    if let Some(refused) = refuse_unauthenticated(&admin) {
        return refused;
    }
    match admin.store.remove_custom_tool(&name).await {
        Ok(true) => Json(json!({"ok": true, "removed": name})).into_response(),
        Ok(false) => define_error(DefineError::NotFound(name)),
        Err(e) => store_error(e),
    }
}

trait MapStatus {
    fn map_status(self, status: StatusCode) -> Response;
}

impl MapStatus for Response {
    /// A success turned into `status` (201 for a created tool); errors stay as they are.
    fn map_status(mut self, status: StatusCode) -> Response {
        if self.status().is_success() {
            *self.status_mut() = status;
        }
        self
    }
}

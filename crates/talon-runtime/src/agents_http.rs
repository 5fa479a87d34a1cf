//! Agents over HTTP, for the dashboard and operators' scripts (behind the gateway's token).
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/agents` | every agent: key, type, creation time, its context files' names |
//! | `GET /v1/agents/{key}/files/{name}` | one of an agent's own context files |

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use talon_store::Store;

/// The routes over `store`.
pub fn routes(store: Store) -> Router {
    Router::new()
        .route("/v1/agents", get(list))
        .route("/v1/agents/{key}/files/{name}", get(file))
        .with_state(store)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        Json(json!({"ok": false, "error": message.to_string()})),
    )
        .into_response()
}

async fn list(State(store): State<Store>) -> Response {
    let agents = match store.agents().await {
        Ok(agents) => agents,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let mut out = Vec::with_capacity(agents.len());
    for agent in agents {
        let files = match store.agent_files(&agent.key).await {
            Ok(files) => files,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
        };
        out.push(json!({"key": agent.key, "type": agent.agent_type.as_str(),
                        "created_at": agent.created_at, "files": files}));
    }
    Json(json!({"agents": out})).into_response()
}

async fn file(State(store): State<Store>, Path((key, name)): Path<(String, String)>) -> Response {
    match store.agent_file(&key, &name).await {
        Ok(Some(content)) => Json(json!({"name": name, "content": content})).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!(
                "agent {key:?} has no context file {name:?}; GET /v1/agents lists each agent's files"
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

//! Agents over HTTP, for the dashboard and operators' scripts (behind the gateway's token).
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/agents` | every agent: key, type, creation time, its context files' names |
//! | `GET /v1/agents/{key}/files/{name}` | one of an agent's own context files |
//! | `GET /v1/agent-links` | every agent link (who may delegate to whom) |
//! | `POST /v1/agent-links` | creates or replaces one: `{"source", "target", "direction"?, "max_concurrent"?, "settings"?}` |
//! | `DELETE /v1/agent-links/{source}/{target}` | removes one |

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde_json::json;
use talon_store::Store;

use crate::http_reply::{error, store_error};

/// The routes over `store`.
pub fn routes(store: Store) -> Router {
    Router::new()
        .route("/v1/agents", get(list))
        .route("/v1/agents/{key}/files/{name}", get(file))
        .route("/v1/agent-links", get(links).post(link))
        .route("/v1/agent-links/{source}/{target}", delete(unlink))
        .with_state(store)
}

async fn list(State(store): State<Store>) -> Response {
    let agents = match store.agents().await {
        Ok(agents) => agents,
        Err(e) => return store_error(e),
    };
    let mut out = Vec::with_capacity(agents.len());
    for agent in agents {
        let files = match store.agent_files(&agent.key).await {
            Ok(files) => files,
            Err(e) => return store_error(e),
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
        Err(e) => store_error(e),
    }
}

async fn links(State(store): State<Store>) -> Response {
    match store.agent_links().await {
        Ok(links) => Json(json!({"links": links})).into_response(),
        Err(e) => store_error(e),
    }
}

/// The body of `POST /v1/agent-links`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewLink {
    source: String,
    target: String,
    #[serde(default = "outbound")]
    direction: talon_store::LinkDirection,
    #[serde(default = "three")]
    max_concurrent: i64,
    #[serde(default)]
    settings: talon_store::LinkSettings,
}

fn outbound() -> talon_store::LinkDirection {
    talon_store::LinkDirection::Outbound
}

fn three() -> i64 {
    3
}

async fn link(State(store): State<Store>, body: axum::body::Bytes) -> Response {
    let new: NewLink = match serde_json::from_slice(&body) {
        Ok(new) => new,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid link: {e}")),
    };
    match store
        .link_agents(
            &new.source,
            &new.target,
            new.direction,
            new.max_concurrent,
            &new.settings,
        )
        .await
    {
        Ok(link) => (StatusCode::CREATED, Json(json!({"link": link}))).into_response(),
        Err(e) => store_error(e),
    }
}

async fn unlink(
    State(store): State<Store>,
    Path((source, target)): Path<(String, String)>,
) -> Response {
    match store.unlink_agents(&source, &target).await {
        Ok(true) => Json(json!({"ok": true})).into_response(),
        Ok(false) => error(
            StatusCode::NOT_FOUND,
            format!("there is no link from {source:?} to {target:?}"),
        ),
        Err(e) => store_error(e),
    }
}

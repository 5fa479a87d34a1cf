//! Agent teams over HTTP (behind the gateway's token): teams and their members, and each
//! user's board and mailbox. Board changes and messages are also events on `/v1/events`
//! (`team`).
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/teams` | every team with its members |
//! | `POST /v1/teams` `{name, lead, description?}` | creates a team |
//! | `GET /v1/teams/{name}` | one team |
//! | `DELETE /v1/teams/{name}` | deletes it with its board and mailbox |
//! | `PUT /v1/teams/{name}/members/{agent}` `{role?}` | adds a member (or changes its role) |
//! | `DELETE /v1/teams/{name}/members/{agent}` | removes a member |
//! | `GET /v1/teams/{name}/tasks[?user=&filter=active\|completed\|all]` | the user's board |
//! | `GET /v1/teams/{name}/messages[?user=&limit=]` | the user's messages, newest first |
//!
//! Tasks and messages belong to the user whose conversation made them, like sessions:
//! another user's are not listed.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use talon_store::{Store, TaskFilter, TaskOrder};

use crate::http_reply::{error, store_error};
use crate::teams::ops::{self, TeamsError};

/// The routes over `store`.
pub fn routes(store: Store) -> Router {
    Router::new()
        .route("/v1/teams", get(list).post(create))
        .route("/v1/teams/{name}", get(show).delete(delete))
        .route("/v1/teams/{name}/members/{agent}", put(add).delete(remove))
        .route("/v1/teams/{name}/tasks", get(tasks))
        .route("/v1/teams/{name}/messages", get(messages))
        .with_state(store)
}

fn no_team(name: &str) -> Response {
    refused(ops::no_team(name))
}

/// A refused or failed operation: 400 for a request to fix, 404 for what does not exist, 503
/// with `Retry-After` while the database cannot be reached.
fn refused(e: TeamsError) -> Response {
    match e {
        TeamsError::Invalid(_) => error(StatusCode::BAD_REQUEST, e),
        TeamsError::NotFound(_) => error(StatusCode::NOT_FOUND, e),
        TeamsError::Store(e) => store_error(e),
    }
}

async fn list(State(store): State<Store>) -> Response {
    match store.teams().await {
        Ok(teams) => Json(json!({"teams": teams})).into_response(),
        Err(e) => store_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTeam {
    name: String,
    lead: String,
    #[serde(default)]
    description: String,
}

async fn create(State(store): State<Store>, body: axum::body::Bytes) -> Response {
    let new: NewTeam = match serde_json::from_slice(&body) {
        Ok(new) => new,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid team: {e}")),
    };
    match ops::create(&store, &new.name, &new.lead, &new.description).await {
        Ok(team) => (StatusCode::CREATED, Json(json!({"team": team}))).into_response(),
        Err(e) => refused(e),
    }
}

async fn show(State(store): State<Store>, Path(name): Path<String>) -> Response {
    match store.team(&name).await {
        Ok(Some(team)) => Json(json!({"team": team})).into_response(),
        Ok(None) => no_team(&name),
        Err(e) => store_error(e),
    }
}

async fn delete(State(store): State<Store>, Path(name): Path<String>) -> Response {
    match ops::delete(&store, &name).await {
        Ok(()) => Json(json!({"ok": true})).into_response(),
        Err(e) => refused(e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Membership {
    role: String,
}

async fn add(
    State(store): State<Store>,
    Path((name, agent)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let membership: Membership = if body.is_empty() {
        Membership::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(m) => m,
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid member: {e}")),
        }
    };
    match ops::add_member(&store, &name, &agent, &membership.role).await {
        Ok(team) => Json(json!({"team": team})).into_response(),
        Err(e) => refused(e),
    }
}

async fn remove(
    State(store): State<Store>,
    Path((name, agent)): Path<(String, String)>,
) -> Response {
    match ops::remove_member(&store, &name, &agent).await {
        Ok(()) => Json(json!({"ok": true})).into_response(),
        Err(e) => refused(e),
    }
}

#[derive(Debug, Deserialize)]
struct BoardQuery {
    #[serde(default)]
    user: String,
    filter: Option<String>,
    limit: Option<i64>,
}

async fn tasks(
    State(store): State<Store>,
    Path(name): Path<String>,
    Query(q): Query<BoardQuery>,
) -> Response {
    let filter = match q.filter.as_deref().unwrap_or("active") {
        "active" => TaskFilter::Active,
        "completed" => TaskFilter::Completed,
        "all" => TaskFilter::All,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("filter {other:?} is not active, completed or all"),
            );
        }
    };
    match store.team(&name).await {
        Ok(Some(_)) => {}
        Ok(None) => return no_team(&name),
        Err(e) => return store_error(e),
    }
    let limit = q.limit.unwrap_or(200).clamp(1, 1000);
    match store
        .tasks(&name, Some(&q.user), filter, TaskOrder::Priority, limit)
        .await
    {
        Ok(tasks) => Json(json!({"tasks": tasks})).into_response(),
        Err(e) => store_error(e),
    }
}

async fn messages(
    State(store): State<Store>,
    Path(name): Path<String>,
    Query(q): Query<BoardQuery>,
) -> Response {
    match store.team(&name).await {
        Ok(Some(_)) => {}
        Ok(None) => return no_team(&name),
        Err(e) => return store_error(e),
    }
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    match store.team_messages(&name, &q.user, limit).await {
        Ok(messages) => Json(json!({"messages": messages})).into_response(),
        Err(e) => store_error(e),
    }
}

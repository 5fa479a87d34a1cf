//! Agent runs over HTTP (behind the gateway's token): what children the agents started, how
//! they ended, and a way to stop them.
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/runs[?user=&limit=]` | the user's runs, newest first |
//! | `GET /v1/runs/{id}[?user=]` | one run and its transcript |
//! | `POST /v1/runs/{id}/cancel[?user=]` | cancels the run and its descendants, on whichever gateway runs them |
//!
//! Runs belong to the user of the turn that started them, like sessions: another user's run
//! answers "not found".

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::http_reply::{error, store_error, unavailable};
use crate::runner::Runner;

/// The routes over `runner`.
pub fn routes(runner: Runner) -> Router {
    Router::new()
        .route("/v1/runs", get(list))
        .route("/v1/runs/{id}", get(show))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .with_state(runner)
}

#[derive(Debug, Deserialize)]
struct RunsQuery {
    user: Option<String>,
    limit: Option<i64>,
}

impl RunsQuery {
    fn user(&self) -> Option<&str> {
        self.user.as_deref().filter(|u| !u.is_empty())
    }
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no run {id:?} of this user; GET /v1/runs?user=… lists them"),
    )
}

async fn list(State(runner): State<Runner>, Query(q): Query<RunsQuery>) -> Response {
    match runner
        .store()
        .runs_of(q.user(), q.limit.unwrap_or(100).clamp(1, 1000))
        .await
    {
        Ok(runs) => Json(json!({"runs": runs})).into_response(),
        Err(e) => store_error(e),
    }
}

/// Run `id` if it is the user's.
async fn owned(
    runner: &Runner,
    id: &str,
    user: Option<&str>,
) -> Result<talon_store::RunRecord, Response> {
    match runner.store().run(id).await {
        Ok(Some(run)) if run.user_id == user.unwrap_or_default() => Ok(run),
        Ok(_) => Err(not_found(id)),
        Err(e) => Err(store_error(e)),
    }
}

async fn show(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<RunsQuery>,
) -> Response {
    let run = match owned(&runner, &id, q.user()).await {
        Ok(run) => run,
        Err(response) => return response,
    };
    match runner.engine().history(&run.session_key).await {
        Ok(messages) => Json(json!({"run": run, "messages": messages})).into_response(),
        Err(e @ crate::agent_runs::RunError::Unavailable(_)) => unavailable(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn cancel(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<RunsQuery>,
) -> Response {
    let run = match owned(&runner, &id, q.user()).await {
        Ok(run) => run,
        Err(response) => return response,
    };
    if !run.status.is_live() {
        return error(
            StatusCode::CONFLICT,
            format!("run {id:?} has ended ({})", run.status.as_str()),
        );
    }
    // Here at once; elsewhere when the gateway running it next looks at the flag.
    match runner.cancel_run(&id).await {
        Ok(done) => {
            Json(json!({"ok": true, "run": id, "flagged": done.flagged, "ended": done.ended}))
                .into_response()
        }
        Err(e @ crate::runs::RunsError::Unavailable(_)) => unavailable(e),
        Err(crate::runs::RunsError::UnknownRun(_)) => not_found(&id),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

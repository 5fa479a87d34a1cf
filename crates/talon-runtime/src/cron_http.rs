//! Scheduled jobs over HTTP (behind the gateway's token), the same operations as the `cron`
//! tool and `talon cron`.
//!
//! | Route | |
//! |---|---|
//! | `GET /v1/cron[?user=]` | the user's jobs |
//! | `POST /v1/cron[?user=]` `{name, at\|every\|cron, message, timezone?, agent?, session_key?, delete_after_run?, enabled?, missed?, channel?, to?}` | adds a job (`channel` and `to`: a chat the results are sent to, one the channel lists in `automated_chats`) |
//! | `GET /v1/cron/{id}[?user=]` | one job (by id or name) |
//! | `PATCH /v1/cron/{id}[?user=]` `{…the fields to change}` | changes it |
//! | `DELETE /v1/cron/{id}[?user=]` | removes it with its history |
//! | `POST /v1/cron/{id}/run[?user=&mode=force\|due]` | runs it now (force, the default) or if due |
//! | `GET /v1/cron/{id}/runs[?user=&limit=]` | its history, newest first |
//!
//! Jobs belong to a user like runs and sessions: another user's job answers "not found".

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use talon_store::CronJob;

use crate::cron::ops::{self, Asker, CronError};
use crate::cron::request::JobFields;
use crate::http_reply::{error, store_error, unavailable};
use crate::runner::Runner;

/// The routes over `runner` (whose scheduler is woken by changes).
pub fn routes(runner: Runner) -> Router {
    Router::new()
        .route("/v1/cron", get(list).post(add))
        .route("/v1/cron/{id}", get(show).patch(update).delete(remove))
        .route("/v1/cron/{id}/run", post(run))
        .route("/v1/cron/{id}/runs", get(runs))
        .with_state(runner)
}

#[derive(Debug, Deserialize)]
struct CronQuery {
    user: Option<String>,
    mode: Option<String>,
    limit: Option<i64>,
}

impl CronQuery {
    fn user(&self) -> &str {
        self.user.as_deref().unwrap_or_default()
    }
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no job {id:?} of this user; GET /v1/cron?user=… lists them"),
    )
}

/// A job as the API shows it: its fields and the session its results go to.
fn shown(job: &CronJob) -> serde_json::Value {
    let mut value = json!(job);
    value["result_session"] = Runner::job_session(job).into();
    value
}

async fn list(State(runner): State<Runner>, Query(q): Query<CronQuery>) -> Response {
    match runner.store().cron_jobs(q.user()).await {
        Ok(jobs) => {
            Json(json!({"jobs": jobs.iter().map(shown).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => store_error(e),
    }
}

/// A refused or failed operation: 400 for a request to fix, 404 for a job the user does not
/// have, 503 with `Retry-After` while the database cannot be reached.
fn cron_error(e: CronError) -> Response {
    match e {
        CronError::Invalid(_) => error(StatusCode::BAD_REQUEST, e),
        CronError::NotFound { id } => not_found(&id),
        CronError::Unavailable(_) => unavailable(e),
        CronError::Store(e) => store_error(e),
    }
}

fn asker(runner: &Runner) -> Asker<'_> {
    Asker::Gateway {
        runner,
        agent: runner.engine().default_agent(),
        origin: None,
    }
}

async fn add(
    State(runner): State<Runner>,
    Query(q): Query<CronQuery>,
    Json(fields): Json<JobFields>,
) -> Response {
    match ops::add(&asker(&runner), q.user(), &fields).await {
        Ok(job) => (StatusCode::CREATED, Json(json!({"job": shown(&job)}))).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn show(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<CronQuery>,
) -> Response {
    match runner.store().cron_job(q.user(), &id).await {
        Ok(Some(job)) => Json(json!({"job": shown(&job)})).into_response(),
        Ok(None) => not_found(&id),
        Err(e) => store_error(e),
    }
}

async fn update(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<CronQuery>,
    Json(fields): Json<JobFields>,
) -> Response {
    match ops::update(&asker(&runner), q.user(), &id, &fields).await {
        Ok(job) => Json(json!({"job": shown(&job)})).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn remove(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<CronQuery>,
) -> Response {
    match runner.store().remove_cron_job(q.user(), &id).await {
        Ok(true) => Json(json!({"ok": true, "removed": id})).into_response(),
        Ok(false) => not_found(&id),
        Err(e) => store_error(e),
    }
}

async fn run(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<CronQuery>,
) -> Response {
    let result = match ops::force_mode(q.mode.as_deref()) {
        Ok(force) => ops::run(&asker(&runner), q.user(), &id, force).await,
        Err(e) => Err(e),
    };
    match result {
        Ok((job, started)) => {
            Json(json!({"ok": true, "started": started, "job": shown(&job)})).into_response()
        }
        Err(e) => cron_error(e),
    }
}

async fn runs(
    State(runner): State<Runner>,
    Path(id): Path<String>,
    Query(q): Query<CronQuery>,
) -> Response {
    match runner
        .store()
        .cron_runs(q.user(), &id, q.limit.unwrap_or(100))
        .await
    {
        Ok(Some(runs)) => Json(json!({"runs": runs})).into_response(),
        Ok(None) => not_found(&id),
        Err(e) => store_error(e),
    }
}

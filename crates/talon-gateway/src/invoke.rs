//! `POST /v1/tools/invoke`, `GET /v1/tools`, `GET /healthz`.
//!
//! An invoked call's session key is the token's, the agent's and the user's
//! ([`caller_key`]): several users share one token, and the session key selects the rate limit
//! and the per-session tool state (background processes, the sandbox, todo lists, files read),
//! so one user's calls must neither use up nor see another's.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use talon_core::caller::key_part;
use talon_core::wire::{WireFormat, definition};
use talon_core::{CallContext, CallerError, FailedStage, RunKind, ToolCall, ToolOutput};

use crate::AppState;

/// Request body of `POST /v1/tools/invoke`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InvokeRequest {
    /// Tool name (aliases work).
    tool: String,
    /// Arguments object.
    #[serde(default)]
    args: Value,
    /// Agent the call runs as (defaults to the configured default agent); must exist.
    #[serde(default)]
    agent: Option<String>,
    /// End user the agent serves: selects the user's memory, context files and workspace.
    #[serde(default)]
    user: Option<String>,
    /// Return the tool's definition instead of running it.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Debug, Serialize)]
struct InvokeResponse<'a> {
    ok: bool,
    tool: &'a str,
    result: &'a ToolOutput,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_stage: Option<FailedStage>,
    elapsed_ms: f64,
}

fn status_for(stage: Option<FailedStage>) -> StatusCode {
    match stage {
        None | Some(FailedStage::Tool) => StatusCode::OK,
        Some(FailedStage::UnknownTool) => StatusCode::NOT_FOUND,
        Some(FailedStage::Validation) => StatusCode::BAD_REQUEST,
        Some(FailedStage::Policy | FailedStage::Permission | FailedStage::Hook) => {
            StatusCode::FORBIDDEN
        }
        Some(FailedStage::RateLimit) => StatusCode::TOO_MANY_REQUESTS,
        Some(FailedStage::Timeout) => StatusCode::GATEWAY_TIMEOUT,
        Some(FailedStage::Cancelled) => StatusCode::SERVICE_UNAVAILABLE,
        Some(FailedStage::Panic) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The gateway's context for an HTTP call, before it is bound to an agent.
fn base_context(state: &AppState) -> CallContext {
    let mut ctx = (*state.template).clone();
    ctx.session_key = state.session_key.to_string();
    ctx.channel_type = Some("http".into());
    ctx.run_kind = RunKind::Api;
    ctx
}

/// The session key of a call bound to its agent and user: the token's key, then
/// `:agent:<agent>` and, for a call naming a user, `:user:<user>` (both escaped, so no two
/// callers' keys coincide). Like a stateless chat turn's key, it keeps each user of each agent
/// apart while one token is still one bucket however many connections it opens.
fn caller_key(token_key: &str, ctx: &CallContext) -> String {
    let mut key = format!(
        "{token_key}:agent:{}",
        key_part(ctx.agent_key.as_deref().unwrap_or_default())
    );
    if let Some(user) = &ctx.user {
        key.push_str(":user:");
        key.push_str(&key_part(user));
    }
    key
}

/// The response for a call that cannot be given its agent or workspace.
fn caller_error(e: CallerError) -> Response {
    let status = match e {
        CallerError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
        CallerError::Directory { .. } => StatusCode::SERVICE_UNAVAILABLE,
        CallerError::Workspace { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(json!({"ok": false, "error": e.to_string()}))).into_response()
}

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"ok": false, "error": message})),
    )
        .into_response()
}

pub(crate) async fn invoke(State(state): State<AppState>, body: axum::body::Bytes) -> Response {
    let request: InvokeRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return bad_request(format!(
                "invalid request body: {e}; expected {{\"tool\": \"name\", \"args\": {{...}}, \"agent\"?: \"key\", \"user\"?: \"id\", \"dry_run\"?: false}}"
            ));
        }
    };
    let mut ctx = base_context(&state);
    let bound = state
        .callers
        .bind(&mut ctx, request.agent.as_deref(), request.user.as_deref())
        .await;
    if let Err(e) = bound {
        return caller_error(e);
    }
    ctx.session_key = caller_key(&state.session_key, &ctx);
    if request.dry_run {
        let offered = state.pipeline.offered_to(&ctx).await;
        let canonical = state.pipeline.registry().canonical_name(&request.tool);
        return match offered.iter().find(|t| Some(&t.spec().name) == canonical.as_ref()) {
            Some(tool) => Json(json!({"ok": true, "tool": tool.spec().name, "definition": definition(WireFormat::Mcp, tool.spec(), tool.schema())})).into_response(),
            None => (StatusCode::NOT_FOUND, Json(json!({"ok": false, "error": format!("no tool {:?} is offered to this caller", request.tool)}))).into_response(),
        };
    }
    let outcome = state
        .pipeline
        .call(Arc::new(ctx), ToolCall::new(request.tool, request.args))
        .await;
    let body = InvokeResponse {
        ok: !outcome.output.is_error,
        tool: &outcome.tool,
        result: &outcome.output,
        failed_stage: outcome.failed_stage,
        elapsed_ms: outcome.elapsed.as_secs_f64() * 1000.0,
    };
    (status_for(outcome.failed_stage), Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    format: Option<WireFormat>,
    #[serde(default)]
    agent: Option<String>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Response {
    // Listing needs the agent (its policy), not a workspace: nothing is created on disk.
    let mut ctx = base_context(&state);
    match state.callers.agent(&ctx, query.agent.as_deref()).await {
        Ok(agent) => ctx.agent_key = Some(agent),
        Err(e) => return caller_error(e),
    }
    let format = query.format.unwrap_or(WireFormat::Mcp);
    Json(json!({"tools": state.pipeline.definitions_for(&ctx, format).await})).into_response()
}

pub(crate) async fn healthz() -> Response {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")})).into_response()
}

/// `GET /readyz`: 200 when the gateway can serve turns now, else 503 with `Retry-After` and
/// why (a load balancer sends turns elsewhere meanwhile; `/healthz` says only that it lives).
pub(crate) async fn readyz(readiness: Option<crate::Readiness>) -> Response {
    let checked = match readiness {
        Some(check) => check().await,
        None => Ok(()),
    };
    match checked {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                axum::http::header::RETRY_AFTER,
                crate::RETRY_AFTER_SECONDS.to_string(),
            )],
            Json(json!({"status": "unavailable", "reason": why})),
        )
            .into_response(),
    }
}

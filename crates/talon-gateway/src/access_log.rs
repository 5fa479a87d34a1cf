//! What an operator sees in `talon serve`'s log: one line per HTTP request, and one per turn,
//! tool call, approval and question as the event bus reports them.
//!
//! Requests are logged after the response is made (method, path without the query, status,
//! milliseconds, and the agent and session when the handler names them with a
//! [`RequestLabels`] extension); 5xx answers at `warn`. Events are logged by a task of their own
//! so a slow log never slows a call; what a model wrote (tool names from a server) is logged
//! with control characters made visible.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use talon_core::events::{EventBus, ToolEvent};
use talon_core::visible::visible;
use tokio_util::sync::CancellationToken;

/// The agent and session a response was for, put in its extensions by the handler.
#[derive(Debug, Clone, Default)]
pub struct RequestLabels {
    pub agent: Option<String>,
    pub session: Option<String>,
}

/// Logs each request once its response is ready.
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let labels = response.extensions().get::<RequestLabels>();
    let agent = labels.and_then(|l| l.agent.as_deref()).unwrap_or("-");
    let session = labels.and_then(|l| l.session.as_deref()).unwrap_or("-");
    let path = visible(&path);
    if status >= 500 {
        tracing::warn!(%method, path, status, ms, agent, session, "request failed");
    } else {
        tracing::info!(%method, path, status, ms, agent, session, "request");
    }
    response
}

/// Logs what `events` reports until `shutdown`.
pub fn spawn_event_log(events: &EventBus, shutdown: CancellationToken) {
    let mut rx = events.subscribe();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                event = rx.recv() => event,
                () = shutdown.cancelled() => return,
            };
            match event {
                Ok(event) => log_event(&event),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "the activity log fell behind; events skipped");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

fn ms(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

fn log_event(event: &ToolEvent) {
    match event {
        ToolEvent::Started {
            tool, session_key, ..
        } => tracing::debug!(tool = %visible(tool), session = %session_key, "tool started"),
        ToolEvent::Finished {
            tool,
            session_key,
            agent_key,
            user,
            is_error,
            elapsed,
            ..
        } => tracing::info!(
            tool = %visible(tool),
            ok = !is_error,
            ms = ms(*elapsed),
            agent = agent_key.as_deref().unwrap_or("-"),
            user = user.as_deref().unwrap_or("-"),
            session = %session_key,
            "tool call"
        ),
        ToolEvent::ApprovalRequested { request } => tracing::info!(
            id = %request.id,
            tool = %visible(&request.tool),
            reason = %visible(&request.reason),
            session = %request.session,
            user = request.user.as_deref().unwrap_or("-"),
            "approval requested"
        ),
        ToolEvent::ApprovalResolved {
            id, tool, decision, ..
        } => tracing::info!(%id, tool = %visible(tool), decision, "approval answered"),
        ToolEvent::QuestionAsked { request } => tracing::info!(
            id = %request.id,
            session = %request.session,
            user = request.user.as_deref().unwrap_or("-"),
            "question asked"
        ),
        ToolEvent::QuestionAnswered { id, action, .. } => {
            tracing::info!(%id, action, "question answered");
        }
        ToolEvent::RunStarted {
            session_key,
            agent_key,
            channel,
            ..
        } => tracing::debug!(agent = %agent_key, session = %session_key, %channel, "turn started"),
        ToolEvent::RunFinished {
            session_key,
            agent_key,
            user,
            stop,
            iterations,
            elapsed,
            ..
        } => {
            if *stop == "failed" {
                tracing::warn!(agent = %agent_key, session = %session_key, stop, iterations, ms = ms(*elapsed), "turn failed");
            } else {
                tracing::info!(
                    agent = %agent_key,
                    user = user.as_deref().unwrap_or("-"),
                    session = %session_key,
                    stop,
                    iterations,
                    ms = ms(*elapsed),
                    "turn"
                );
            }
        }
        ToolEvent::ChildRunStarted {
            session_key,
            agent_key,
            origin,
            background,
            run,
            ..
        } => tracing::info!(
            agent = %agent_key,
            session = %session_key,
            run = run.run_id.as_deref().unwrap_or("-"),
            %origin,
            background,
            "run started"
        ),
        ToolEvent::ChildRunFinished {
            session_key,
            agent_key,
            status,
            run,
            ..
        } => tracing::info!(
            agent = %agent_key,
            session = %session_key,
            run = run.run_id.as_deref().unwrap_or("-"),
            status,
            "run ended"
        ),
        ToolEvent::Handoff {
            session_key,
            from_agent,
            to_agent,
            ..
        } => tracing::info!(session = %session_key, from = %from_agent, to = %to_agent, "handoff"),
        ToolEvent::Team {
            team,
            agent_key,
            change,
            task_id,
            ..
        } => tracing::info!(%team, agent = %agent_key, change, task = task_id, "team"),
        ToolEvent::Progress { .. } => {}
    }
}

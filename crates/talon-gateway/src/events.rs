//! `GET /v1/events`: run, tool, approval and question events as they happen, so a client learns
//! of a new approval request or question without polling. The same route speaks WebSocket (when
//! the request asks to upgrade; each event one JSON text message) and server-sent events
//! (otherwise; the event's kind as the SSE event name, its JSON as data). Query parameters narrow
//! the stream to what the caller wants to see: `session=KEY`, `agent=KEY`, and
//! `types=run_started,tool_finished,…`. Every event's JSON carries its kind as `type`.
//!
//! Several users share one gateway token, so a subscriber sees only the events of the user it
//! names (`user=ID`; none: only events of calls and turns that named no user). Events carry
//! what users typed and what their tools were given (questions, commands awaiting approval,
//! progress), and another user's session named in `session=` shows nothing.

use std::convert::Infallible;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use talon_core::events::ToolEvent;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;

/// The query of `GET /v1/events`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    /// Whose events: this user's (empty or absent: calls that named no user).
    #[serde(default)]
    user: Option<String>,
    /// Only this session's events.
    #[serde(default)]
    session: Option<String>,
    /// Only this agent's events.
    #[serde(default)]
    agent: Option<String>,
    /// Only these kinds (comma-separated).
    #[serde(default)]
    types: Option<String>,
}

/// A checked [`Filter`].
#[derive(Debug, Clone)]
struct Wanted {
    user: Option<String>,
    session: Option<String>,
    agent: Option<String>,
    kinds: Option<Vec<&'static str>>,
}

impl Wanted {
    fn new(filter: Filter) -> Result<Self, String> {
        let kinds = match filter.types {
            None => None,
            Some(list) => Some(
                list.split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(|k| {
                        ToolEvent::KINDS
                            .iter()
                            .copied()
                            .find(|known| *known == k)
                            .ok_or_else(|| {
                                format!(
                                    "unknown event type {k:?}; use {}",
                                    ToolEvent::KINDS.join(", ")
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Self {
            user: filter.user.filter(|u| !u.is_empty()),
            session: filter.session,
            agent: filter.agent,
            kinds,
        })
    }

    fn admits(&self, event: &ToolEvent) -> bool {
        event.user() == self.user.as_deref()
            && self
                .session
                .as_deref()
                .is_none_or(|s| s == event.session_key())
            && self
                .agent
                .as_deref()
                .is_none_or(|a| Some(a) == event.agent_key())
            && self
                .kinds
                .as_ref()
                .is_none_or(|kinds| kinds.contains(&event.kind()))
    }
}

/// What a subscriber receives next: a wanted event as (kind, JSON), a note that events were
/// dropped, or `None` when the bus is gone.
async fn next(
    receiver: &mut Receiver<ToolEvent>,
    wanted: &Wanted,
) -> Option<(&'static str, String)> {
    loop {
        match receiver.recv().await {
            Ok(event) if wanted.admits(&event) => {
                let data = serde_json::to_string(&event).unwrap_or_else(|e| {
                    json!({"type": "error", "error": e.to_string()}).to_string()
                });
                return Some((event.kind(), data));
            }
            Ok(_) => {}
            Err(RecvError::Lagged(missed)) => {
                let note = json!({"type": "lagged", "missed": missed,
                                  "error": format!("{missed} events were dropped (this subscriber was too slow)")});
                return Some(("lagged", note.to_string()));
            }
            Err(RecvError::Closed) => return None,
        }
    }
}

pub(crate) async fn events(
    State(state): State<AppState>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
    filter: Result<Query<Filter>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let wanted = match filter
        .map_err(|e| e.body_text())
        .and_then(|Query(f)| Wanted::new(f))
    {
        Ok(wanted) => wanted,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"ok": false, "error": e})),
            )
                .into_response();
        }
    };
    // Subscribe before answering, so nothing published after the response is missed.
    let receiver = state.pipeline.events().subscribe();
    match upgrade {
        Ok(upgrade) => upgrade
            .on_upgrade(move |socket| websocket(socket, receiver, wanted))
            .into_response(),
        Err(_) => Sse::new(sse(receiver, wanted))
            .keep_alive(KeepAlive::default())
            .into_response(),
    }
}

fn sse(
    receiver: Receiver<ToolEvent>,
    wanted: Wanted,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((receiver, wanted), |(mut receiver, wanted)| async move {
        let (kind, data) = next(&mut receiver, &wanted).await?;
        Some((
            Ok(Event::default().event(kind).data(data)),
            (receiver, wanted),
        ))
    })
}

/// Sends events until the client closes the socket or stops reading; answers pings.
async fn websocket(mut socket: WebSocket, mut receiver: Receiver<ToolEvent>, wanted: Wanted) {
    loop {
        tokio::select! {
            event = next(&mut receiver, &wanted) => {
                let Some((_, data)) = event else { break };
                if socket.send(Message::Text(data.into())).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Ping(payload))) => {
                    if socket.send(Message::Pong(payload)).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                // The stream is one-way; anything else the client sends is ignored.
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn filter(session: Option<&str>, agent: Option<&str>, types: Option<&str>) -> Filter {
        Filter {
            user: None,
            session: session.map(str::to_string),
            agent: agent.map(str::to_string),
            types: types.map(str::to_string),
        }
    }

    fn run_started(session: &str, agent: &str) -> ToolEvent {
        ToolEvent::RunStarted {
            session_key: Arc::from(session),
            agent_key: Arc::from(agent),
            user: None,
            channel: Arc::from("http"),
            run: Default::default(),
        }
    }

    #[test]
    fn filters_narrow_by_session_agent_and_kind() {
        let all = Wanted::new(Filter::default()).expect("no filter");
        assert!(all.admits(&run_started("s1", "a")));
        let one = Wanted::new(filter(
            Some("s1"),
            Some("a"),
            Some("run_started, tool_started"),
        ))
        .expect("valid");
        assert!(one.admits(&run_started("s1", "a")));
        assert!(!one.admits(&run_started("s2", "a")));
        assert!(!one.admits(&run_started("s1", "b")));
        let tools_only = Wanted::new(filter(None, None, Some("tool_finished"))).expect("valid");
        assert!(!tools_only.admits(&run_started("s1", "a")));
    }

    #[test]
    fn an_unknown_kind_is_refused_with_the_known_ones() {
        let e = Wanted::new(filter(None, None, Some("run_started,tool_ended"))).expect_err("bad");
        assert!(
            e.contains("\"tool_ended\"") && e.contains("question_asked"),
            "{e}"
        );
    }
}

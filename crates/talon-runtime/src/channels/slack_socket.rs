//! Inbound Slack messages through Socket Mode: the gateway opens a WebSocket to Slack (no
//! public endpoint to expose, as Telegram's long polling needs none), acknowledges each event
//! envelope at once, and answers the messages as [`super::inbound`] answers Telegram's — the
//! same sessions, origin pinning, chat list and per-thread tool lists.
//!
//! - The connection URL comes from `apps.connections.open`, asked with the app-level token
//!   (`xapp-…`, `app_token_secret` or `app_token_env`); the bot token still sends the answers.
//! - Messages of bots (the gateway's own answers among them) and edits, joins and other
//!   subtypes are not answered: an answer must never start another turn.
//! - A message in a thread is a session of that thread (`…:topic:<thread_ts>`) and is answered
//!   in it; a message in the channel itself is answered there. A direct message (`im`) is its
//!   sender's, as a private Telegram chat is.
//! - Slack delivers an event again when it saw no acknowledgement in time; the envelopes'
//!   events are remembered (the last [`SEEN`]) so a retry is not answered twice.
//! - `disconnect` (Slack refreshing the link), a closed socket or an error: a new URL is asked
//!   for and the gateway connects again, waiting longer after each failure.
//! - Turns run beside the socket, one at a time in order ([`super::inbound::answerer`]): the
//!   reader keeps acknowledging while an agent works.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::platforms::{Channel, ChannelError, Inbound};
use super::websocket::connect;
use crate::runner::Runner;

/// Events remembered to drop Slack's redeliveries.
const SEEN: usize = 256;
/// The longest wait before connecting again after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Channel {
    /// Slack: a Socket Mode URL (`apps.connections.open` with the app-level token).
    async fn socket_url(&self) -> Result<String, ChannelError> {
        let app_token = self.app_token.as_deref().unwrap_or_default();
        let answer = self
            .call(
                self.http
                    .post(format!("{}/api/apps.connections.open", self.base))
                    .bearer_auth(app_token),
                Duration::from_secs(20),
            )
            .await?;
        answer["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ChannelError::Refused {
                platform: self.kind,
                message: "apps.connections.open answered without a url".into(),
            })
    }
}

/// The message an `events_api` payload carries, if it is one to answer.
pub fn message_of(payload: &Value) -> Option<Inbound> {
    let event = &payload["event"];
    if !matches!(event["type"].as_str(), Some("message" | "app_mention"))
        || event.get("subtype").is_some()
        || event.get("bot_id").is_some()
    {
        return None;
    }
    let chat = event["channel"].as_str()?.to_string();
    let chat_type = match event["channel_type"].as_str() {
        Some("im") => "private",
        _ => "group",
    };
    Some(Inbound {
        update_id: 0,
        chat,
        topic: event["thread_ts"].as_str().map(str::to_string),
        chat_type: chat_type.into(),
        from: event["user"].as_str().map(str::to_string),
        text: event["text"].as_str().unwrap_or_default().to_string(),
    })
}

/// What tells a redelivery or a second copy from a new message: the message's channel and `ts`
/// first, then the envelope's event id. One mention arrives as a `message` and an `app_mention`
/// with different event ids but the same channel and `ts` (issue 35): either key seen before
/// means the message was queued already.
fn event_keys(payload: &Value) -> Vec<String> {
    let e = &payload["event"];
    let message = e["channel"]
        .as_str()
        .zip(e["ts"].as_str())
        .map(|(channel, ts)| format!("{channel}/{ts}"));
    let event = payload["event_id"].as_str().map(|id| format!("event:{id}"));
    message.into_iter().chain(event).collect()
}

/// Reads `channel` through Socket Mode until `cancel` or `lost`.
pub(super) async fn read(
    runner: &Runner,
    channel: &Arc<Channel>,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) {
    let mut backoff = Duration::from_secs(1);
    let mut seen: VecDeque<String> = VecDeque::with_capacity(SEEN);
    let answerer = super::inbound::answerer(runner, channel, cancel);
    tracing::info!(channel = %channel.name, "reading Slack messages (Socket Mode)");
    while !cancel.is_cancelled() && !lost.is_cancelled() {
        let connected = async {
            let url = channel.socket_url().await.map_err(|e| e.to_string())?;
            connect(&url).await.map_err(|e| e.to_string())
        }
        .await;
        let mut socket = match connected {
            Ok(socket) => socket,
            Err(e) => {
                tracing::warn!(channel = %channel.name, error = %e, "cannot open the Slack socket; retrying");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = lost.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        loop {
            let frame = tokio::select! {
                () = cancel.cancelled() => return,
                () = lost.cancelled() => return,
                frame = socket.next() => frame,
            };
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::warn!(channel = %channel.name, error = %e, "the Slack socket failed; connecting again");
                    break;
                }
            };
            let envelope: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match envelope["type"].as_str() {
                Some("hello") => backoff = Duration::from_secs(1),
                Some("disconnect") => break,
                Some("events_api") => {
                    // Acknowledged before the turn runs: Slack waits only a few seconds.
                    if let Some(id) = envelope["envelope_id"].as_str() {
                        let ack = json!({"envelope_id": id}).to_string();
                        if let Err(e) = socket.send(Message::Text(ack.into())).await {
                            tracing::warn!(channel = %channel.name, error = %e, "cannot acknowledge a Slack event");
                            break;
                        }
                    }
                    let payload = &envelope["payload"];
                    let keys = event_keys(payload);
                    if keys.iter().any(|key| seen.contains(key)) {
                        continue;
                    }
                    for key in keys {
                        if seen.len() == SEEN {
                            seen.pop_front();
                        }
                        seen.push_back(key);
                    }
                    if let Some(message) = message_of(payload) {
                        super::inbound::queue(channel, &answerer, message);
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_are_answered_and_bots_and_edits_are_not() {
        let event = |extra: Value| {
            let mut e = json!({"type": "message", "channel": "C1", "user": "U7", "text": "hi", "ts": "1.2"});
            if let (Some(e), Some(extra)) = (e.as_object_mut(), extra.as_object()) {
                e.extend(extra.clone());
            }
            json!({"event": e})
        };
        let m = message_of(&event(json!({}))).unwrap();
        assert_eq!((m.chat.as_str(), m.chat_type.as_str()), ("C1", "group"));
        assert_eq!((m.from.as_deref(), m.topic), (Some("U7"), None));
        let threaded = message_of(&event(json!({"thread_ts": "1.0"}))).unwrap();
        assert_eq!(threaded.topic.as_deref(), Some("1.0"));
        let direct = message_of(&event(json!({"channel_type": "im"}))).unwrap();
        assert_eq!(direct.chat_type, "private");
        assert!(message_of(&event(json!({"bot_id": "B1"}))).is_none());
        assert!(message_of(&event(json!({"subtype": "message_changed"}))).is_none());
        assert!(message_of(&json!({"event": {"type": "reaction_added"}})).is_none());
        assert_eq!(event_keys(&event(json!({}))), ["C1/1.2"]);
        assert_eq!(
            event_keys(&json!({"event_id": "Ev1", "event": {}})),
            ["event:Ev1"]
        );
        // A mention's `message` and `app_mention` share the channel and ts, not the event id.
        let mut mention = event(json!({"type": "app_mention"}));
        mention["event_id"] = json!("Ev2");
        assert_eq!(event_keys(&mention), ["C1/1.2", "event:Ev2"]);
    }
}

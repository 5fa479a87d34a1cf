//! Inbound Discord messages through the Gateway: the gateway asks `GET /gateway/bot` for the
//! socket URL with the bot token, identifies with the guild-message, direct-message and
//! message-content intents, heartbeats at the interval Discord's `Hello` gives, and answers
//! `MESSAGE_CREATE` events as [`super::inbound`] answers Telegram's — the same sessions,
//! origin pinning, chat list (channel ids) and tool lists.
//!
//! - Messages of bots (the gateway's own answers among them, recognised by the id `READY`
//!   gives as well as by the `bot` flag) are never answered.
//! - A message in a server's channel (or thread: a Discord thread is a channel of its own) is
//!   that channel's session; a direct message is its sender's.
//! - Turns run beside the socket ([`super::inbound::answerer`]), so heartbeats go on while an
//!   agent works; `Reconnect`, `Invalid Session`, a missed heartbeat acknowledgement, a closed
//!   socket or an error make the gateway identify again on a new connection.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::platforms::{Channel, ChannelError, Inbound};
use super::websocket::{Socket, connect};
use crate::runner::Runner;

/// `GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT`.
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);
/// The longest wait before connecting again after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Channel {
    /// Discord: the Gateway's socket URL (`GET /gateway/bot`).
    async fn gateway_url(&self) -> Result<String, ChannelError> {
        let answer = self
            .call(
                self.http
                    .get(format!("{}/api/v10/gateway/bot", self.base))
                    .header("authorization", format!("Bot {}", self.token())),
                Duration::from_secs(20),
            )
            .await?;
        let url = answer["url"]
            .as_str()
            .ok_or_else(|| ChannelError::Refused {
                platform: self.kind,
                message: "gateway/bot answered without a url".into(),
            })?;
        Ok(format!("{}/?v=10&encoding=json", url.trim_end_matches('/')))
    }
}

/// The message a `MESSAGE_CREATE` carries, if it is one to answer (`me`: the bot's own id).
pub fn message_of(event: &Value, me: Option<&str>) -> Option<Inbound> {
    let author = &event["author"];
    let from = author["id"].as_str()?;
    if author["bot"] == true || me == Some(from) {
        return None;
    }
    Some(Inbound {
        update_id: 0,
        chat: event["channel_id"].as_str()?.to_string(),
        topic: None,
        chat_type: if event.get("guild_id").is_some_and(|g| !g.is_null()) {
            "group".into()
        } else {
            "private".into()
        },
        from: Some(from.to_string()),
        text: event["content"].as_str().unwrap_or_default().to_string(),
    })
}

/// Why a connection ended.
enum Ended {
    Stopped,
    Again(String),
}

/// Reads `channel` through the Gateway until `cancel` or `lost`.
pub(super) async fn read(
    runner: &Runner,
    channel: &Arc<Channel>,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) {
    let mut backoff = Duration::from_secs(1);
    let answerer = super::inbound::answerer(runner, channel, cancel);
    tracing::info!(channel = %channel.name, "reading Discord messages (Gateway)");
    loop {
        let opened = async {
            let url = channel.gateway_url().await.map_err(|e| e.to_string())?;
            connect(&url).await.map_err(|e| e.to_string())
        }
        .await;
        let why = match opened {
            Ok(socket) => match session(channel, socket, &answerer, cancel, lost).await {
                Ended::Stopped => return,
                Ended::Again(why) => {
                    backoff = Duration::from_secs(1);
                    why
                }
            },
            Err(e) => e,
        };
        tracing::warn!(channel = %channel.name, reason = %why, "the Discord Gateway connection ended; connecting again");
        tokio::select! {
            () = cancel.cancelled() => return,
            () = lost.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn send(socket: &mut Socket, payload: Value) -> Result<(), String> {
    socket
        .send(Message::Text(payload.to_string().into()))
        .await
        .map_err(|e| format!("cannot send to the Gateway: {e}"))
}

/// One connection: Hello, Identify, then heartbeats and events until it ends.
async fn session(
    channel: &Channel,
    mut socket: Socket,
    answerer: &tokio::sync::mpsc::Sender<Inbound>,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) -> Ended {
    let mut interval: Option<Duration> = None;
    let mut seq = Value::Null;
    let mut me: Option<String> = None;
    let mut acknowledged = true;
    let mut beat = tokio::time::interval(Duration::from_secs(3600));
    loop {
        let frame = tokio::select! {
            () = cancel.cancelled() => return Ended::Stopped,
            () = lost.cancelled() => return Ended::Stopped,
            _ = beat.tick(), if interval.is_some() => {
                if !acknowledged {
                    return Ended::Again("no heartbeat acknowledgement".into());
                }
                acknowledged = false;
                if let Err(e) = send(&mut socket, json!({"op": 1, "d": seq})).await {
                    return Ended::Again(e);
                }
                continue;
            }
            frame = socket.next() => frame,
        };
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(close))) => {
                return Ended::Again(format!("closed: {close:?}"));
            }
            None => return Ended::Again("closed".into()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Ended::Again(e.to_string()),
        };
        let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match payload["op"].as_u64() {
            Some(10) => {
                let every = payload["d"]["heartbeat_interval"]
                    .as_u64()
                    .unwrap_or(41_250);
                let every = Duration::from_millis(every.max(1_000));
                interval = Some(every);
                beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                let identify = json!({"op": 2, "d": {
                    "token": channel.token(),
                    "intents": INTENTS,
                    "properties": {"os": "linux", "browser": "talon", "device": "talon"}
                }});
                if let Err(e) = send(&mut socket, identify).await {
                    return Ended::Again(e);
                }
            }
            Some(11) => acknowledged = true,
            Some(1) => {
                if let Err(e) = send(&mut socket, json!({"op": 1, "d": seq})).await {
                    return Ended::Again(e);
                }
            }
            Some(7) => return Ended::Again("Discord asked for a reconnect".into()),
            Some(9) => return Ended::Again("the session was invalidated".into()),
            Some(0) => {
                if !payload["s"].is_null() {
                    seq = payload["s"].clone();
                }
                match payload["t"].as_str() {
                    Some("READY") => {
                        me = payload["d"]["user"]["id"].as_str().map(str::to_string);
                    }
                    Some("MESSAGE_CREATE") => {
                        if let Some(message) = message_of(&payload["d"], me.as_deref()) {
                            super::inbound::queue(channel, answerer, message);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_are_answered_and_bots_and_the_gateway_itself_are_not() {
        let m = message_of(
            &json!({"channel_id": "55", "guild_id": "9", "content": "hi", "author": {"id": "7"}}),
            Some("1"),
        )
        .unwrap();
        assert_eq!((m.chat.as_str(), m.chat_type.as_str()), ("55", "group"));
        assert_eq!((m.from.as_deref(), m.text.as_str()), (Some("7"), "hi"));
        let dm = message_of(
            &json!({"channel_id": "56", "content": "hi", "author": {"id": "7"}}),
            None,
        )
        .unwrap();
        assert_eq!(dm.chat_type, "private");
        assert!(
            message_of(
                &json!({"channel_id": "55", "author": {"id": "1"}}),
                Some("1")
            )
            .is_none()
        );
        assert!(
            message_of(
                &json!({"channel_id": "55", "author": {"id": "8", "bot": true}}),
                None
            )
            .is_none()
        );
        assert_eq!(INTENTS, 37_376);
    }
}

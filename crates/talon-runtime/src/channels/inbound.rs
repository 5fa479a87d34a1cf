//! Inbound Telegram messages: each becomes a turn of its chat's session and the answer goes back.
//!
//! A channel with `inbound = true` is read by long polling (`getUpdates`, offset after the
//! last update handled, so each message is answered once by this gateway). A message starts or
//! continues the session GoClaw keys it as — `agent:<agent>:<channel>:direct:<chat>` for a private
//! chat, `agent:<agent>:<channel>:group:<chat>` for a group and `…:topic:<topic>` for a forum
//! topic — through [`Runner::run`], so handoff routes and gates hold as for any turn. The turn's
//! context carries its origin ([`crate::agent_runs::ChannelOrigin`]): `message` replies only
//! there, and the chat's or topic's tool list (`[channels.<name>.topics]`) is the turn's final
//! allow list. Messages are handled one at a time, in order, so a chat's turns never overlap.
//!
//! Gateways sharing a store read a bot one at a time: the reader holds a lease in the store
//! (`channel-inbound:<channel>`), renewed while it reads; another gateway takes over once the
//! lease runs out (at most a minute after the reader died).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::platforms::{Channel, Inbound};
use super::{Channels, Kind};
use crate::agent_runs::{ChannelOrigin, TurnRequest};
use crate::runner::Runner;

/// How long a failed poll waits before the next, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The reading lease (one gateway per bot): its length, renewed every third of it.
const LEASE: Duration = Duration::from_secs(60);

/// Starts a reader for every channel with `inbound = true` (Telegram by long polling, Slack
/// through Socket Mode, Discord through the Gateway); they stop with `cancel`.
pub fn spawn(runner: &Runner, channels: &Channels, cancel: &CancellationToken) {
    for channel in channels.all() {
        if channel.kind != Kind::Webhook && channel.section.inbound {
            tokio::spawn(poll(runner.clone(), Arc::clone(channel), cancel.clone()));
        }
    }
}

/// The session a message in `chat` (forum topic `topic`) of `channel` belongs to.
pub fn session_key(agent: &str, channel: &str, message: &Inbound) -> String {
    let peer = peer_kind(message);
    let mut key = format!("agent:{agent}:{channel}:{peer}:{}", message.chat);
    if let Some(topic) = &message.topic {
        key.push_str(&format!(":topic:{topic}"));
    }
    key
}

fn peer_kind(message: &Inbound) -> &'static str {
    if message.chat_type == "private" {
        "direct"
    } else {
        "group"
    }
}

/// Holds the store's lease on reading `channel` while this gateway reads it: among gateways
/// sharing a store, one reads a bot (Telegram gives each update to whichever reader asks, so
/// two would split a chat's messages and answer them out of order). `true` once held; `false`
/// when cancelled first.
async fn hold(runner: &Runner, name: &str, cancel: &CancellationToken) -> bool {
    let mut said = false;
    loop {
        let until = lease_until();
        match runner
            .store()
            .hold_lease(name, runner.engine().instance(), until)
            .await
        {
            Ok(true) => return true,
            Ok(false) if !said => {
                tracing::info!(lease = %name, "another gateway reads this bot's messages; taking over if it stops");
                said = true;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(lease = %name, error = %e, "cannot take the reading lease"),
        }
        tokio::select! {
            () = cancel.cancelled() => return false,
            () = tokio::time::sleep(LEASE / 3) => {}
        }
    }
}

/// When a lease taken or renewed now runs out.
fn lease_until() -> i64 {
    crate::cron::now_ms().saturating_add(i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX))
}

/// Reads `channel` while this gateway holds its lease, renewing it; gives it up when stopped.
async fn poll(runner: Runner, channel: Arc<Channel>, cancel: CancellationToken) {
    let lease = format!("channel-inbound:{}", channel.name);
    while hold(&runner, &lease, &cancel).await {
        // Renewed while this gateway reads; `lost` ends the reading if another took it over.
        let lost = CancellationToken::new();
        let renewing = {
            let (runner, lease, lost, cancel) =
                (runner.clone(), lease.clone(), lost.clone(), cancel.clone());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(LEASE / 3) => {}
                    }
                    let until = lease_until();
                    if !matches!(
                        runner
                            .store()
                            .hold_lease(&lease, runner.engine().instance(), until)
                            .await,
                        Ok(true)
                    ) {
                        tracing::warn!(lease = %lease, "the reading lease was lost; another gateway reads this bot now");
                        lost.cancel();
                        return;
                    }
                }
            })
        };
        let reading = cancel.child_token();
        match channel.kind {
            Kind::Slack => super::slack_socket::read(&runner, &channel, &reading, &lost).await,
            Kind::Discord => super::discord_gateway::read(&runner, &channel, &reading, &lost).await,
            _ => read(&runner, &channel, &reading, &lost).await,
        }
        renewing.abort();
        if cancel.is_cancelled() {
            let _ = runner
                .store()
                .release_lease(&lease, runner.engine().instance())
                .await;
            return;
        }
    }
}

async fn read(
    runner: &Runner,
    channel: &Arc<Channel>,
    cancel: &CancellationToken,
    lost: &CancellationToken,
) {
    let wait = Duration::from_secs(channel.section.poll_timeout_secs.unwrap_or(25).min(50));
    let mut offset = 0i64;
    let mut backoff = Duration::from_secs(1);
    tracing::info!(channel = %channel.name, "reading Telegram messages");
    loop {
        if lost.is_cancelled() {
            return;
        }
        let updates = tokio::select! {
            () = lost.cancelled() => return,
            () = cancel.cancelled() => return,
            updates = channel.updates(offset, wait) => updates,
        };
        match updates {
            Ok(messages) => {
                backoff = Duration::from_secs(1);
                for message in messages {
                    offset = offset.max(message.update_id + 1);
                    if cancel.is_cancelled() {
                        return;
                    }
                    answer(runner, channel, &message, cancel).await;
                }
            }
            Err(e) => {
                tracing::warn!(channel = %channel.name, error = %e, "cannot read Telegram messages; retrying");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Messages waiting for their turns, at most (a socket reader queues them here and keeps
/// reading; one beyond is dropped and logged).
const QUEUE: usize = 256;

/// A worker answering the messages sent to it one at a time, in order, until `cancel`: for
/// the socket readers (Slack, Discord), which must keep reading (acknowledgements, heartbeats)
/// while a turn runs.
pub(super) fn answerer(
    runner: &Runner,
    channel: &Arc<Channel>,
    cancel: &CancellationToken,
) -> tokio::sync::mpsc::Sender<Inbound> {
    let (queue, mut waiting) = tokio::sync::mpsc::channel::<Inbound>(QUEUE);
    let (runner, channel, cancel) = (runner.clone(), Arc::clone(channel), cancel.clone());
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = cancel.cancelled() => return,
                message = waiting.recv() => message,
            };
            let Some(message) = message else { return };
            answer(&runner, &channel, &message, &cancel).await;
        }
    });
    queue
}

/// Queues `message` for `answerer`, logging one that does not fit.
pub(super) fn queue(
    channel: &Channel,
    answerer: &tokio::sync::mpsc::Sender<Inbound>,
    message: Inbound,
) {
    if let Err(e) = answerer.try_send(message) {
        tracing::warn!(channel = %channel.name, error = %e, "an inbound message was dropped: too many are waiting");
    }
}

/// Runs the turn `message` starts and sends its answer (or what went wrong) back.
pub(super) async fn answer(
    runner: &Runner,
    channel: &Channel,
    message: &Inbound,
    cancel: &CancellationToken,
) {
    if message.text.trim().is_empty() {
        return;
    }
    if !channel.section.answers(&message.chat) {
        tracing::warn!(channel = %channel.name, chat = %message.chat, "a message from a chat not in chats was left unanswered");
        return;
    }
    let agent = channel
        .section
        .agent
        .clone()
        .unwrap_or_else(|| runner.engine().default_agent().to_string());
    // A private chat is its person's: their memory and workspace. A group's members share the
    // group's own, apart from every other chat and from callers that name no user.
    let user = match (peer_kind(message), &message.from) {
        ("direct", Some(id)) => format!("{}-{id}", channel.name),
        _ => format!("{}-chat{}", channel.name, message.chat),
    };
    let chat = match &message.topic {
        Some(topic) => format!("{}/{topic}", message.chat),
        None => message.chat.clone(),
    };
    let platform = channel.kind.to_string();
    let request = TurnRequest {
        agent: Some(&agent),
        user: Some(&user),
        session: Some(session_key(&agent, &channel.name, message)),
        history: Vec::new(),
        prompt: message.text.clone(),
        channel: &platform,
        client: None,
        permission_mode: None,
        cancel: cancel.child_token(),
        api: Default::default(),
        child: None,
        delivering: Vec::new(),
        origin: Some(ChannelOrigin {
            channel: channel.name.clone(),
            chat,
            peer_kind: peer_kind(message).into(),
            tool_allow: channel
                .section
                .allow_list(&message.chat, message.topic.as_deref()),
        }),
    };
    let reply = match runner.run(request, &|_| {}).await {
        Ok(ran) if !ran.outcome.text.trim().is_empty() => ran.outcome.text,
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(channel = %channel.name, chat = %message.chat, error = %e, "a channel turn failed");
            format!("Sorry, that could not be answered: {e}")
        }
    };
    if let Err(e) = channel
        .send(&message.chat, message.topic.as_deref(), &reply, None)
        .await
    {
        tracing::warn!(channel = %channel.name, chat = %message.chat, error = %e, "cannot send the answer");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(chat_type: &str, topic: Option<&str>) -> Inbound {
        Inbound {
            update_id: 1,
            chat: "-1001".into(),
            topic: topic.map(str::to_string),
            chat_type: chat_type.into(),
            from: Some("42".into()),
            text: "hi".into(),
        }
    }

    #[test]
    fn sessions_are_keyed_as_goclaw_keys_them() {
        assert_eq!(
            session_key("main", "tg", &inbound("private", None)),
            "agent:main:tg:direct:-1001"
        );
        assert_eq!(
            session_key("main", "tg", &inbound("supergroup", Some("5"))),
            "agent:main:tg:group:-1001:topic:5"
        );
    }
}

//! `message` and `create_forum_topic`: a model sending through a configured channel.
//!
//! Where a call may send is decided here, in one function ([`target`]), as GoClaw's
//! `MessageTargetEnforced` decides it: a conversation that came from a channel replies only to
//! that channel and chat (another forum topic of the same chat included); scheduled, subagent
//! and delegated or team runs, which have no chat of their own, name a channel and a chat the
//! operator listed for them (`automated_chats`), so a job or subagent a model started is no way
//! around the pinning; any other session (the HTTP API, a terminal) cannot send, so a model
//! there cannot message arbitrary chats. A channel configured for a tenant takes only that
//! tenant's calls.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::context::RunKind;
use talon_core::{Authorized, CallContext, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_tools::FsConfig;

use super::Channels;
use super::platforms::{Channel, Media};

/// Largest file sent as media (Telegram bots upload at most 50 MB).
pub const MAX_MEDIA_BYTES: u64 = 50 * 1024 * 1024;

/// The origin of a conversation that came from a channel, as the inbound loop sets it in the
/// call context: `channel` is the channel's name, `chat_id` the chat, then `/` and the forum
/// topic when there is one.
pub fn origin(ctx: &CallContext) -> Option<(&str, &str, Option<&str>)> {
    let channel = ctx.channel.as_deref()?;
    let chat = ctx.chat_id.as_deref()?;
    Some(match chat.split_once('/') {
        Some((chat, topic)) => (channel, chat, Some(topic)),
        None => (channel, chat, None),
    })
}

/// Where this call may send: the channel, the chat and the thread (see the module docs).
fn target(
    channels: &Channels,
    ctx: &CallContext,
    channel: Option<&str>,
    chat: Option<&str>,
    thread: Option<&str>,
) -> Result<(Arc<Channel>, String, Option<String>), String> {
    let automated = origin(ctx).is_none();
    let (name, chat, thread) = match origin(ctx) {
        Some((origin, origin_chat, origin_topic)) => {
            if channel.is_some_and(|c| c != origin) || chat.is_some_and(|c| c != origin_chat) {
                return Err(format!(
                    "this conversation came from chat {origin_chat} of channel {origin}; messages go back there only. Leave channel and chat_id out to reply."
                ));
            }
            (
                origin.to_string(),
                origin_chat.to_string(),
                thread.or(origin_topic).map(str::to_string),
            )
        }
        None if matches!(
            ctx.run_kind,
            RunKind::Scheduled | RunKind::Subagent | RunKind::Delegation
        ) =>
        {
            let (Some(channel), Some(chat)) = (channel, chat) else {
                return Err(format!(
                    "name the channel ({}) and the chat_id to send to",
                    channels.names().join(", ")
                ));
            };
            (
                channel.to_string(),
                chat.to_string(),
                thread.map(str::to_string),
            )
        }
        None => {
            return Err(
                "this conversation did not come from a channel, so message has nowhere to reply; scheduled, subagent and team runs can name a channel and chat. Answer here instead."
                    .into(),
            );
        }
    };
    let found = channels
        .admit(&name, ctx.tenant.as_deref(), &chat, automated)
        .map_err(|e| e.to_string())?;
    Ok((Arc::clone(found), chat, thread))
}

/// Input of [`Message`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    /// `send` (the only action).
    pub action: String,
    /// The text to send (may be empty when media is given).
    #[serde(default)]
    pub message: String,
    /// A workspace file to send with it: photo, video, audio or document by its extension.
    #[serde(default)]
    pub media: Option<String>,
    /// The channel's name; only for scheduled, subagent and team runs (others reply where the
    /// conversation came from).
    #[serde(default)]
    pub channel: Option<String>,
    /// The chat; only with channel.
    #[serde(default)]
    pub chat_id: Option<String>,
    /// A forum topic (Telegram) or thread (Slack) in the chat.
    #[serde(default)]
    pub thread_id: Option<String>,
}

/// The `message` tool.
pub struct Message {
    pub channels: Channels,
    pub fs: Arc<FsConfig>,
}

impl Tool for Message {
    type Input = MessageInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "message",
            "Send a message (action \"send\") through a chat channel: text, and optionally a \
             workspace file as media (sent as a photo, video, audio or document by its \
             extension). In a conversation that came from a chat it goes back to that chat (a \
             forum topic may be named with thread_id); scheduled, subagent and team runs name \
             the channel and chat_id. Long text is sent in parts.",
            SideEffect::Network,
        )
        // It reaches only the operator's channels, pinned as `target` says: the risk of an
        // answer, not of arbitrary network access.
        .with_risk(talon_core::Risk::Medium)
        .in_group("messaging")
    }

    async fn execute(&self, call: Authorized<MessageInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        if input.action != "send" {
            return ToolOutput::error(format!("unknown action {:?}; use \"send\"", input.action));
        }
        if input.message.trim().is_empty() && input.media.is_none() {
            return ToolOutput::error("give the message text, media, or both");
        }
        let (channel, chat, thread) = match target(
            &self.channels,
            ctx,
            input.channel.as_deref(),
            input.chat_id.as_deref(),
            input.thread_id.as_deref(),
        ) {
            Ok(target) => target,
            Err(e) => return ToolOutput::error(e),
        };
        let media = match &input.media {
            Some(path) => match self.fs.files(ctx).read_bytes(path, MAX_MEDIA_BYTES).await {
                Ok((file_name, bytes)) => Some(Media { file_name, bytes }),
                Err(e) => return ToolOutput::error(format!("media: {e}")),
            },
            None => None,
        };
        match channel
            .send(&chat, thread.as_deref(), &input.message, media.as_ref())
            .await
        {
            Ok(ids) => ToolOutput::text(format!(
                "Sent to chat {chat}{} of channel {} ({} message{}).",
                thread.map(|t| format!(" topic {t}")).unwrap_or_default(),
                channel.name,
                ids.len(),
                if ids.len() == 1 { "" } else { "s" }
            )),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// Input of [`CreateForumTopic`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateForumTopicInput {
    /// The topic's name (1-128 characters).
    pub name: String,
    /// The channel; only for scheduled, subagent and team runs.
    #[serde(default)]
    pub channel: Option<String>,
    /// The forum chat; only with channel.
    #[serde(default)]
    pub chat_id: Option<String>,
}

/// The `create_forum_topic` tool (Telegram).
pub struct CreateForumTopic {
    pub channels: Channels,
}

impl Tool for CreateForumTopic {
    type Input = CreateForumTopicInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "create_forum_topic",
            "Create a forum topic in a Telegram group with topics: in the chat this conversation \
             came from, or (scheduled, subagent and team runs) the channel and chat_id named. \
             Returns the topic's id, which message takes as thread_id.",
            SideEffect::Network,
        )
        .with_risk(talon_core::Risk::Medium)
        .in_group("messaging")
    }

    async fn execute(&self, call: Authorized<CreateForumTopicInput>) -> ToolOutput {
        let input = call.input();
        let name = input.name.trim();
        if name.is_empty() || name.chars().count() > 128 {
            return ToolOutput::error("name: give the topic 1 to 128 characters");
        }
        let (channel, chat, _) = match target(
            &self.channels,
            call.ctx(),
            input.channel.as_deref(),
            input.chat_id.as_deref(),
            None,
        ) {
            Ok(target) => target,
            Err(e) => return ToolOutput::error(e),
        };
        match channel.create_topic(&chat, name).await {
            Ok(id) => ToolOutput::text(format!(
                "Created forum topic {name:?} with id {id} in chat {chat} of channel {}.",
                channel.name
            )),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

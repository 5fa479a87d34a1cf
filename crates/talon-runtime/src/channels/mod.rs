//! Channels: the chat platforms a gateway talks through (`[channels.<name>]`): Telegram's Bot
//! API (messages, media, forum topics, and long polling for inbound messages), Slack's and
//! Discord's bot APIs, and a generic HTTP webhook.
//!
//! Outbound, the `message` and `create_forum_topic` tools ([`tools`]) send through a configured
//! channel, pinned to where the conversation came from; inbound, a Telegram channel (long
//! polling), a Slack one (Socket Mode, [`slack_socket`]) or a Discord one (the Gateway,
//! [`discord_gateway`]) with `inbound = true` turns each
//! message into a turn of the session GoClaw would key it as ([`inbound`]), with the tool allow
//! list its forum topic or thread sets, and sends the answer back to that chat and topic. Tokens are secrets: a stored secret (`token_secret`) or an environment
//! variable (`token_env`), never the configuration file. The platforms' URLs are the operator's
//! configuration (a model names a channel, never a URL).

pub mod discord_gateway;
pub mod inbound;
pub mod platforms;
pub mod slack_socket;
pub mod tools;
pub mod websocket;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use talon_store::Store;

use crate::config::ConfigError;
pub use platforms::{Channel, ChannelError, Kind};

/// `[channels.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelSection {
    /// `telegram`, `slack`, `discord` or `webhook`.
    pub kind: String,
    /// The platform's API root (default: the platform's own; a local server in tests).
    pub base_url: Option<String>,
    /// `webhook`: where messages are POSTed.
    pub url: Option<String>,
    /// The stored secret holding the bot token (`talon secrets set NAME`).
    pub token_secret: Option<String>,
    /// The environment variable holding the bot token.
    pub token_env: Option<String>,
    /// Slack inbound (Socket Mode): the stored secret holding the app-level token (`xapp-…`).
    pub app_token_secret: Option<String>,
    /// Slack inbound: the environment variable holding the app-level token.
    pub app_token_env: Option<String>,
    /// The tenant the channel belongs to: only its sessions may send through it.
    pub tenant: Option<String>,
    /// The chats scheduled, subagent and team runs may send to (they have no chat of their own
    /// to reply to); `"*"` for any. Empty (the default): none, so a job or a subagent a model
    /// started cannot message chats no conversation came from.
    pub automated_chats: Vec<String>,
    /// Answer inbound messages: Telegram by long polling, Slack through Socket Mode, Discord
    /// through the Gateway. Gateways sharing a store read a channel
    /// one at a time (a lease in the store).
    pub inbound: bool,
    /// Inbound: the chats whose messages are answered (chat ids as Telegram writes them; `"*"`
    /// for any chat). Required with `inbound`: an agent with tools is not for whoever finds
    /// the bot. Messages from other chats are logged and left unanswered.
    pub chats: Vec<String>,
    /// The agent that answers inbound messages (default: the default agent).
    pub agent: Option<String>,
    /// Seconds a long poll waits for messages (default 25).
    pub poll_timeout_secs: Option<u64>,
    /// Per chat (`"<chat id>"`) or forum topic (`"<chat id>/<topic id>"`): the only tools a turn
    /// there may use (seed 002 §5: the per-request allow list, the final intersection).
    pub topics: BTreeMap<String, TopicSection>,
}

/// `[channels.<name>.topics."<chat>[/<topic>]"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicSection {
    /// Tool names and `group:` specs; a turn in the chat or topic gets no other tool.
    pub tools: Vec<String>,
}

impl ChannelSection {
    /// Whether a run with no chat of its own (scheduled, subagent, team) may send to `chat`.
    pub fn takes_automated(&self, chat: &str) -> bool {
        self.automated_chats.iter().any(|c| c == "*" || c == chat)
    }

    /// Whether inbound messages from `chat` are answered.
    pub fn answers(&self, chat: &str) -> bool {
        self.chats.iter().any(|c| c == "*" || c == chat)
    }

    /// The tool allow list of a turn in `chat` (and forum topic `topic`): the topic's own, else
    /// the chat's, else none (the agent's policy alone).
    pub fn allow_list(&self, chat: &str, topic: Option<&str>) -> Option<Vec<String>> {
        topic
            .and_then(|t| self.topics.get(&format!("{chat}/{t}")))
            .or_else(|| self.topics.get(chat))
            .map(|t| t.tools.clone())
    }

    /// Checks what needs no I/O; the error says what to fix.
    pub fn check(&self, name: &str) -> Result<Kind, ConfigError> {
        let at = format!("channels.{name}");
        if !talon_store::valid_server_name(name) {
            return Err(ConfigError(format!(
                "{at}: use 1-64 letters, digits, _ and - in channel names"
            )));
        }
        let kind: Kind = self
            .kind
            .parse()
            .map_err(|e: String| ConfigError(format!("{at}.kind: {e}")))?;
        for (field, url) in [("base_url", &self.base_url), ("url", &self.url)] {
            if let Some(url) = url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(ConfigError(format!(
                    "{at}.{field}: {url:?} is not an http:// or https:// URL"
                )));
            }
        }
        if kind == Kind::Webhook && self.url.is_none() {
            return Err(ConfigError(format!("{at}: a webhook needs url")));
        }
        if kind != Kind::Webhook && self.token_secret.is_none() && self.token_env.is_none() {
            return Err(ConfigError(format!(
                "{at}: give the bot token as token_secret (a stored secret) or token_env"
            )));
        }
        if self.inbound && kind == Kind::Webhook {
            return Err(ConfigError(format!(
                "{at}.inbound: a webhook only sends; inbound messages are read from Telegram (long polling), Slack (Socket Mode) and Discord (the Gateway)"
            )));
        }
        if self.inbound
            && kind == Kind::Slack
            && self.app_token_secret.is_none()
            && self.app_token_env.is_none()
        {
            return Err(ConfigError(format!(
                "{at}: Slack inbound connects through Socket Mode with the app-level token (xapp-…): give app_token_secret or app_token_env"
            )));
        }
        if self.inbound && self.chats.is_empty() {
            return Err(ConfigError(format!(
                "{at}.chats: list the chats whose messages the agent answers (their ids, or \"*\" for anyone who finds the bot)"
            )));
        }
        Ok(kind)
    }
}

/// The configured channels, by name.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    channels: Arc<BTreeMap<String, Arc<Channel>>>,
}

impl Channels {
    /// The channels of `sections`, with their tokens read from the store or the environment.
    pub async fn open(
        sections: &BTreeMap<String, ChannelSection>,
        store: &Store,
    ) -> Result<Self, ConfigError> {
        let mut channels = BTreeMap::new();
        for (name, section) in sections {
            let kind = section.check(name)?;
            let token = crate::chat_config::key_from(
                &format!("channels.{name}"),
                "token",
                section.token_secret.as_deref(),
                section.token_env.as_deref(),
                store,
            )
            .await?;
            if kind != Kind::Webhook && token.is_none() {
                return Err(ConfigError(format!(
                    "channels.{name}: the bot token is not set (token_env names an empty or missing variable)"
                )));
            }
            let app_token = crate::chat_config::key_from(
                &format!("channels.{name}"),
                "app_token",
                section.app_token_secret.as_deref(),
                section.app_token_env.as_deref(),
                store,
            )
            .await?;
            if section.inbound && kind == Kind::Slack && app_token.is_none() {
                return Err(ConfigError(format!(
                    "channels.{name}: the app-level token is not set (app_token_env names an empty or missing variable)"
                )));
            }
            let channel = Channel::new(name, kind, section.clone(), token)
                .map_err(|e| ConfigError(format!("channels.{name}: {e}")))?
                .with_app_token(app_token);
            channels.insert(name.clone(), Arc::new(channel));
        }
        Ok(Self {
            channels: Arc::new(channels),
        })
    }

    /// The channel called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Channel>> {
        self.channels.get(name)
    }

    /// Every channel, by name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Channel>> {
        self.channels.values()
    }

    /// The configured channel names, for messages that list them.
    pub fn names(&self) -> Vec<String> {
        self.channels.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// The channel called `name` if a call of `tenant` may send to `chat` through it:
    /// `automated` for a run with no chat of its own (scheduled, subagent, team), which the
    /// channel's `automated_chats` must list. Every send and every job delivery passes here.
    pub fn admit(
        &self,
        name: &str,
        tenant: Option<&str>,
        chat: &str,
        automated: bool,
    ) -> Result<&Arc<Channel>, Refused> {
        let Some(found) = self.get(name) else {
            return Err(Refused::NoChannel {
                name: format!("{:?}", talon_core::visible::visible(name)),
                names: self.names().join(", "),
            });
        };
        admit_section(name, &found.section, tenant, chat, automated)?;
        Ok(found)
    }
}

/// [`Channels::admit`] on a channel's configuration alone (`talon cron`, which opens no
/// channel).
pub fn admit_section(
    name: &str,
    section: &ChannelSection,
    tenant: Option<&str>,
    chat: &str,
    automated: bool,
) -> Result<(), Refused> {
    if let Some(owner) = &section.tenant
        && tenant != Some(owner.as_str())
    {
        return Err(Refused::OtherTenant(name.to_string()));
    }
    if chat.trim().is_empty() || chat.len() > 128 || chat.chars().any(char::is_control) {
        return Err(Refused::BadChat);
    }
    if automated && !section.takes_automated(chat) {
        return Err(Refused::NotAutomated {
            name: name.to_string(),
            chat: talon_core::visible::visible(chat).to_string(),
        });
    }
    Ok(())
}

/// Why a message or a job's result may not go to a chat.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no channel named {name}; the channels are: {names}")]
    NoChannel { name: String, names: String },
    #[error("channel {0} belongs to another tenant")]
    OtherTenant(String),
    #[error("chat_id: give the chat's id as the platform writes it")]
    BadChat,
    #[error(
        "channel {name} takes no messages from scheduled, subagent or team runs to chat {chat}; the operator lists the chats such runs may send to in [channels.{name}] automated_chats"
    )]
    NotAutomated { name: String, chat: String },
    #[error(
        "this conversation came from chat {chat} of channel {channel}; its jobs deliver there only (channel {channel}, to {chat})"
    )]
    OtherChat { channel: String, chat: String },
}

/// Whether a job made by a call from `origin` (the channel and chat its conversation came
/// from, if any) may deliver its results to `to` (a chat, then `/` and a topic) of `channel`:
/// `Ok(true)` when it is the conversation's own chat, which may always be answered (the job is
/// pinned to it); `Ok(false)` when the channel takes automated messages for that chat (checked
/// again at each delivery). A conversation from a chat schedules only for that chat.
pub fn check_job_delivery(
    origin: Option<(&str, &str)>,
    channel: &str,
    to: &str,
    admit: impl Fn(&str, bool) -> Result<(), Refused>,
) -> Result<bool, Refused> {
    let chat = to.split_once('/').map_or(to, |(chat, _)| chat);
    match origin {
        Some((origin_channel, origin_chat)) => {
            if origin_channel != channel || origin_chat != chat {
                return Err(Refused::OtherChat {
                    channel: origin_channel.to_string(),
                    chat: origin_chat.to_string(),
                });
            }
            admit(chat, false).map(|()| true)
        }
        None => admit(chat, true).map(|()| false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(automated: &[&str]) -> ChannelSection {
        ChannelSection {
            kind: "webhook".into(),
            url: Some("http://127.0.0.1:9/hook".into()),
            automated_chats: automated.iter().map(|c| c.to_string()).collect(),
            ..ChannelSection::default()
        }
    }

    #[test]
    fn a_job_from_a_chat_delivers_there_only_and_others_need_automated_chats() {
        let hook = section(&["ops"]);
        let admit =
            |chat: &str, automated: bool| admit_section("hook", &hook, None, chat, automated);
        // From the chat itself: pinned, whatever automated_chats says.
        assert_eq!(
            check_job_delivery(Some(("hook", "team")), "hook", "team/7", admit),
            Ok(true)
        );
        // From a chat, to another chat or channel: refused.
        let other = check_job_delivery(Some(("hook", "team")), "hook", "ops", admit)
            .unwrap_err()
            .to_string();
        assert!(other.contains("deliver there only"), "{other}");
        assert!(check_job_delivery(Some(("tg", "team")), "hook", "team", admit).is_err());
        // Not from a chat: only what automated_chats lists, unpinned.
        assert_eq!(check_job_delivery(None, "hook", "ops", admit), Ok(false));
        let unlisted = check_job_delivery(None, "hook", "team", admit)
            .unwrap_err()
            .to_string();
        assert!(unlisted.contains("automated_chats"), "{unlisted}");
        // A tenant's channel: only for that tenant.
        let mut owned = section(&["*"]);
        owned.tenant = Some("acme".into());
        assert!(admit_section("hook", &owned, Some("acme"), "x", true).is_ok());
        assert!(admit_section("hook", &owned, Some("other"), "x", true).is_err());
        assert!(admit_section("hook", &owned, None, "x", true).is_err());
    }
}

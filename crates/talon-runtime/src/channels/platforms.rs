//! The platforms' documented HTTP APIs, each call made once with a deadline and no redirects:
//! Telegram's Bot API (`sendMessage`, `sendPhoto`/`sendVideo`/`sendAudio`/`sendDocument` by the
//! file's extension, `createForumTopic`, `getUpdates`), Slack's `chat.postMessage`, Discord's
//! `POST /channels/{id}/messages` (a file as `files[0]`), and a webhook receiving JSON. A text
//! longer than the platform takes is sent in parts; a platform's refusal comes back with its own
//! words, so the model can act on them.

use std::time::Duration;

use serde_json::{Value, json};

use super::ChannelSection;

/// The platform a channel talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Telegram,
    Slack,
    Discord,
    Webhook,
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "telegram" => Ok(Kind::Telegram),
            "slack" => Ok(Kind::Slack),
            "discord" => Ok(Kind::Discord),
            "webhook" => Ok(Kind::Webhook),
            other => Err(format!(
                "{other:?}: use telegram, slack, discord or webhook"
            )),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Telegram => "telegram",
            Kind::Slack => "slack",
            Kind::Discord => "discord",
            Kind::Webhook => "webhook",
        })
    }
}

/// Why a platform call failed, or a channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The platform answered with a refusal (its description).
    #[error("{platform} refused: {message}")]
    Refused { platform: Kind, message: String },
    /// The platform could not be reached or answered with something else.
    #[error("{platform} is unreachable or answered unexpectedly: {message}")]
    Transport { platform: Kind, message: String },
    /// What was asked cannot be done on this platform.
    #[error("{0}")]
    Unsupported(String),
    /// The channel's HTTP client could not be built ([`Channel::new`]).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// A file to send with a message.
#[derive(Debug, Clone)]
pub struct Media {
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// One inbound Telegram message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    pub update_id: i64,
    pub chat: String,
    /// The forum topic, when the message was posted in one.
    pub topic: Option<String>,
    /// `private`, `group`, `supergroup` or `channel`.
    pub chat_type: String,
    pub from: Option<String>,
    pub text: String,
}

/// One configured channel: its platform, API root, token and settings.
pub struct Channel {
    pub name: String,
    pub kind: Kind,
    pub section: ChannelSection,
    pub(super) base: String,
    token: Option<String>,
    /// Slack's app-level token (Socket Mode, inbound messages).
    pub(super) app_token: Option<String>,
    pub(super) http: reqwest::Client,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Characters a platform takes in one message.
fn text_limit(kind: Kind) -> usize {
    match kind {
        Kind::Telegram => 4096,
        Kind::Discord => 2000,
        Kind::Slack => 40_000,
        Kind::Webhook => 100_000,
    }
}

/// `text` in parts of at most `limit` characters, cut at a line break where there is one.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().count() > limit {
        let cut = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(i, _)| i);
        let at = rest[..cut]
            .rfind('\n')
            .filter(|&i| i > 0)
            .map_or(cut, |i| i + 1);
        parts.push(rest[..at].to_string());
        rest = &rest[at..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_string());
    }
    parts
}

/// Telegram's method and field for a file, by its extension.
fn telegram_media_method(file_name: &str) -> (&'static str, &'static str) {
    let ext = file_name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" | "png" | "gif" | "webp" => ("sendPhoto", "photo"),
        "mp4" | "mov" | "webm" | "mkv" => ("sendVideo", "video"),
        "mp3" | "m4a" | "ogg" | "oga" | "wav" | "flac" => ("sendAudio", "audio"),
        _ => ("sendDocument", "document"),
    }
}

/// A `multipart/form-data` body of `fields` and one file, and its content type.
fn multipart(fields: &[(&str, String)], file_field: &str, media: &Media) -> (Vec<u8>, String) {
    let boundary = format!("talon-{}", uuid::Uuid::new_v4().simple());
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let file_name: String = media
        .file_name
        .chars()
        .map(|c| if c == '"' || c.is_control() { '_' } else { c })
        .collect();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{file_field}\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&media.bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

impl Channel {
    /// A channel of `kind` with `section`'s settings and `token`.
    pub fn new(
        name: &str,
        kind: Kind,
        section: ChannelSection,
        token: Option<String>,
    ) -> Result<Self, ChannelError> {
        let default = match kind {
            Kind::Telegram => "https://api.telegram.org",
            Kind::Slack => "https://slack.com",
            Kind::Discord => "https://discord.com",
            Kind::Webhook => "",
        };
        let base = match kind {
            Kind::Webhook => section.url.clone().unwrap_or_default(),
            _ => section.base_url.clone().unwrap_or_else(|| default.into()),
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(ChannelError::Client)?;
        Ok(Self {
            name: name.to_string(),
            kind,
            section,
            base: base.trim_end_matches('/').to_string(),
            token,
            app_token: None,
            http,
        })
    }

    /// Slack: the app-level token Socket Mode connects with.
    pub fn with_app_token(mut self, app_token: Option<String>) -> Self {
        self.app_token = app_token;
        self
    }

    pub(super) fn token(&self) -> &str {
        self.token.as_deref().unwrap_or_default()
    }

    fn transport(&self, e: impl std::fmt::Display) -> ChannelError {
        ChannelError::Transport {
            platform: self.kind,
            message: e.to_string(),
        }
    }

    /// Sends `request` and reads the JSON answer (within `timeout`).
    pub(super) async fn call(
        &self,
        request: reqwest::RequestBuilder,
        timeout: Duration,
    ) -> Result<Value, ChannelError> {
        let response = request
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.transport(e.without_url()))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.transport(e))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let refused = |message: String| ChannelError::Refused {
            platform: self.kind,
            message,
        };
        match self.kind {
            Kind::Telegram if body["ok"] != true => Err(refused(
                body["description"]
                    .as_str()
                    .map_or_else(|| format!("HTTP {status}"), str::to_string),
            )),
            Kind::Slack if body["ok"] != true => Err(refused(
                body["error"]
                    .as_str()
                    .map_or_else(|| format!("HTTP {status}"), str::to_string),
            )),
            _ if !status.is_success() => Err(refused(
                body["message"]
                    .as_str()
                    .map_or_else(|| format!("HTTP {status}"), str::to_string),
            )),
            _ => Ok(body),
        }
    }

    fn telegram(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base, self.token())
    }

    /// Sends `text` (in parts if long) and `media` to `chat` (in forum topic or thread
    /// `thread`); returns the platform's ids of what it posted.
    pub async fn send(
        &self,
        chat: &str,
        thread: Option<&str>,
        text: &str,
        media: Option<&Media>,
    ) -> Result<Vec<String>, ChannelError> {
        const SEND: Duration = Duration::from_secs(30);
        // A Telegram topic is a number; anything else would post to the chat's General topic.
        let topic = match (self.kind, thread) {
            (Kind::Telegram, Some(t)) => Some(t.parse::<i64>().map_err(|_| {
                ChannelError::Unsupported(format!(
                    "thread_id {t:?} is not a Telegram forum topic id (a number, as create_forum_topic returns)"
                ))
            })?),
            _ => None,
        };
        let mut ids = Vec::new();
        if let Some(media) = media {
            ids.push(self.send_media(chat, thread, media).await?);
        }
        let parts = if text.is_empty() && media.is_some() {
            Vec::new()
        } else {
            split_text(text, text_limit(self.kind))
        };
        for part in parts {
            let answer = match self.kind {
                Kind::Telegram => {
                    let mut body = json!({"chat_id": chat, "text": part});
                    if let Some(topic) = topic {
                        body["message_thread_id"] = json!(topic);
                    }
                    self.call(
                        self.http.post(self.telegram("sendMessage")).json(&body),
                        SEND,
                    )
                    .await?["result"]["message_id"]
                        .to_string()
                }
                Kind::Slack => {
                    let mut body = json!({"channel": chat, "text": part});
                    if let Some(thread) = thread {
                        body["thread_ts"] = json!(thread);
                    }
                    let url = format!("{}/api/chat.postMessage", self.base);
                    let answer = self
                        .call(
                            self.http.post(url).bearer_auth(self.token()).json(&body),
                            SEND,
                        )
                        .await?;
                    answer["ts"].as_str().unwrap_or_default().to_string()
                }
                Kind::Discord => {
                    let url = format!("{}/api/v10/channels/{chat}/messages", self.base);
                    let answer = self
                        .call(
                            self.http
                                .post(url)
                                .header("authorization", format!("Bot {}", self.token()))
                                .json(&json!({"content": part})),
                            SEND,
                        )
                        .await?;
                    answer["id"].as_str().unwrap_or_default().to_string()
                }
                Kind::Webhook => {
                    let body =
                        json!({"channel": self.name, "chat": chat, "thread": thread, "text": part});
                    let mut request = self.http.post(&self.base).json(&body);
                    if let Some(token) = &self.token {
                        request = request.bearer_auth(token);
                    }
                    self.call(request, SEND).await?;
                    String::new()
                }
            };
            ids.push(answer);
        }
        Ok(ids)
    }

    async fn send_media(
        &self,
        chat: &str,
        thread: Option<&str>,
        media: &Media,
    ) -> Result<String, ChannelError> {
        const UPLOAD: Duration = Duration::from_secs(120);
        match self.kind {
            Kind::Telegram => {
                let (method, field) = telegram_media_method(&media.file_name);
                let mut fields = vec![("chat_id", chat.to_string())];
                if let Some(thread) = thread {
                    fields.push(("message_thread_id", thread.to_string()));
                }
                let (body, content_type) = multipart(&fields, field, media);
                let request = self
                    .http
                    .post(self.telegram(method))
                    .header("content-type", content_type)
                    .body(body);
                Ok(self.call(request, UPLOAD).await?["result"]["message_id"].to_string())
            }
            Kind::Discord => {
                let url = format!("{}/api/v10/channels/{chat}/messages", self.base);
                let payload = json!({"attachments": [{"id": 0, "filename": media.file_name}]});
                let (body, content_type) =
                    multipart(&[("payload_json", payload.to_string())], "files[0]", media);
                let request = self
                    .http
                    .post(url)
                    .header("authorization", format!("Bot {}", self.token()))
                    .header("content-type", content_type)
                    .body(body);
                let answer = self.call(request, UPLOAD).await?;
                Ok(answer["id"].as_str().unwrap_or_default().to_string())
            }
            Kind::Webhook => {
                use base64::Engine as _;
                let body = json!({"channel": self.name, "chat": chat, "thread": thread,
                    "media": {"file_name": media.file_name,
                              "content_base64": base64::engine::general_purpose::STANDARD.encode(&media.bytes)}});
                let mut request = self.http.post(&self.base).json(&body);
                if let Some(token) = &self.token {
                    request = request.bearer_auth(token);
                }
                self.call(request, UPLOAD).await?;
                Ok(String::new())
            }
            Kind::Slack => Err(ChannelError::Unsupported(format!(
                "channel {} is a Slack channel, which takes text only here; send the text, or the file through another channel",
                self.name
            ))),
        }
    }

    /// Creates a forum topic called `name` in `chat` (Telegram); returns its id.
    pub async fn create_topic(&self, chat: &str, name: &str) -> Result<String, ChannelError> {
        if self.kind != Kind::Telegram {
            return Err(ChannelError::Unsupported(format!(
                "channel {} is a {} channel; forum topics are Telegram's",
                self.name, self.kind
            )));
        }
        let body = json!({"chat_id": chat, "name": name});
        let answer = self
            .call(
                self.http
                    .post(self.telegram("createForumTopic"))
                    .json(&body),
                Duration::from_secs(30),
            )
            .await?;
        Ok(answer["result"]["message_thread_id"].to_string())
    }

    /// Telegram: the messages after `offset`, waiting up to `wait` for some (long polling).
    pub async fn updates(&self, offset: i64, wait: Duration) -> Result<Vec<Inbound>, ChannelError> {
        let body =
            json!({"offset": offset, "timeout": wait.as_secs(), "allowed_updates": ["message"]});
        let answer = self
            .call(
                self.http.post(self.telegram("getUpdates")).json(&body),
                wait + Duration::from_secs(15),
            )
            .await?;
        let updates = answer["result"].as_array().cloned().unwrap_or_default();
        Ok(updates
            .iter()
            .filter_map(|u| {
                let message = u.get("message")?;
                let topic = (message["is_topic_message"] == true)
                    .then(|| message["message_thread_id"].as_i64())
                    .flatten()
                    .map(|t| t.to_string());
                Some(Inbound {
                    update_id: u["update_id"].as_i64()?,
                    chat: message["chat"]["id"].as_i64()?.to_string(),
                    topic,
                    chat_type: message["chat"]["type"].as_str().unwrap_or("private").into(),
                    from: message["from"]["id"].as_i64().map(|id| id.to_string()),
                    text: message["text"].as_str().unwrap_or_default().to_string(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_split_at_line_breaks_within_the_limit() {
        let text = format!("{}\n{}", "a".repeat(6), "b".repeat(6));
        assert_eq!(
            split_text(&text, 8),
            vec!["aaaaaa\n".to_string(), "bbbbbb".into()]
        );
        assert_eq!(split_text("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(split_text("", 4), vec![String::new()]);
        assert_eq!(split_text("ééééé", 2), vec!["éé", "éé", "é"]);
    }

    #[tokio::test]
    async fn a_telegram_topic_that_is_not_a_number_is_refused_before_anything_is_sent() {
        let section = ChannelSection {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let channel = Channel::new("tg", Kind::Telegram, section, Some("t".into())).unwrap();
        let err = channel
            .send("-1001", Some("general"), "hi", None)
            .await
            .unwrap_err();
        assert!(matches!(err, ChannelError::Unsupported(_)), "{err}");
        assert!(err.to_string().contains("forum topic id"), "{err}");
    }

    #[test]
    fn media_goes_by_extension() {
        assert_eq!(telegram_media_method("a.PNG"), ("sendPhoto", "photo"));
        assert_eq!(telegram_media_method("clip.mp4"), ("sendVideo", "video"));
        assert_eq!(telegram_media_method("song.mp3"), ("sendAudio", "audio"));
        assert_eq!(
            telegram_media_method("report.pdf"),
            ("sendDocument", "document")
        );
        assert_eq!(telegram_media_method("noext"), ("sendDocument", "document"));
    }
}

//! A local server speaking the chat platforms' documented HTTP APIs, for the channel tests (no
//! network): Telegram's Bot API (`/bot<token>/<method>`: `getUpdates` long polling over queued
//! updates, `sendMessage`, `sendPhoto`/`sendDocument`/…, `createForumTopic`), Slack's
//! `/api/chat.postMessage` and Socket Mode (`/api/apps.connections.open`, then a WebSocket
//! at `/slack-socket` pushing queued event envelopes and recording the acknowledgements),
//! Discord's `/api/v10/channels/<id>/messages` and Gateway (`/api/v10/gateway/bot`, then a
//! WebSocket at `/discord-gateway/`: Hello, Identify checked, READY, queued `MESSAGE_CREATE`
//! events, heartbeats acknowledged) and a webhook at `/hook`. Every request is recorded;
//! tokens are checked as the platforms check them.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub const TELEGRAM_TOKEN: &str = "123456:telegram-test-token";
pub const SLACK_TOKEN: &str = "xoxb-slack-test-token";
pub const SLACK_APP_TOKEN: &str = "xapp-slack-test-app-token";
pub const DISCORD_TOKEN: &str = "discord-test-token";

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Call {
    pub path: String,
    pub authorization: Option<String>,
    /// The JSON body, or `{"multipart": <the body as text>}`.
    pub body: Value,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    updates: VecDeque<Value>,
    next_message: i64,
    /// Socket Mode envelopes not yet pushed, and the envelope ids acknowledged.
    slack_events: VecDeque<Value>,
    slack_acks: Vec<String>,
    /// Discord `MESSAGE_CREATE` payloads not yet pushed, the Identify received, heartbeats.
    discord_events: VecDeque<Value>,
    discord_identify: Option<Value>,
    discord_heartbeats: usize,
}

/// The running server.
#[derive(Clone)]
pub struct Platforms {
    pub url: String,
    state: Arc<Mutex<State>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Platforms {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let wake = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = Self { url, state, wake };
        let handler = server.clone();
        let socket = server.clone();
        let gateway = server.clone();
        let app = axum::Router::new()
            .route(
                "/discord-gateway/",
                axum::routing::get(move |upgrade: axum::extract::ws::WebSocketUpgrade| {
                    let gateway = gateway.clone();
                    async move { upgrade.on_upgrade(move |ws| gateway.discord_gateway(ws)) }
                }),
            )
            .route(
                "/slack-socket",
                axum::routing::get(move |upgrade: axum::extract::ws::WebSocketUpgrade| {
                    let socket = socket.clone();
                    async move { upgrade.on_upgrade(move |ws| socket.slack_socket(ws)) }
                }),
            )
            .fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
                let handler = handler.clone();
                async move { handler.handle(uri, headers, body).await }
            });
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        server
    }

    /// Queues a Telegram update (`update_id` and `message`) for `getUpdates`.
    pub fn push_update(&self, update: Value) {
        self.state.lock().unwrap().updates.push_back(update);
        self.wake.notify_waiters();
    }

    /// Queues a Slack event (the `event` of an `events_api` envelope with `envelope_id` and
    /// `event_id`) for the Socket Mode connection.
    pub fn push_slack_event(&self, envelope_id: &str, event_id: &str, event: Value) {
        self.state.lock().unwrap().slack_events.push_back(json!({
            "type": "events_api", "envelope_id": envelope_id, "accepts_response_payload": false,
            "payload": {"type": "event_callback", "event_id": event_id, "event": event}
        }));
    }

    /// The envelope ids the Socket Mode client acknowledged.
    pub fn slack_acks(&self) -> Vec<String> {
        self.state.lock().unwrap().slack_acks.clone()
    }

    /// A Socket Mode connection: `hello`, then the queued envelopes; acknowledgements recorded.
    async fn slack_socket(self, mut ws: axum::extract::ws::WebSocket) {
        use axum::extract::ws::Message;
        let hello = json!({"type": "hello", "num_connections": 1}).to_string();
        if ws.send(Message::Text(hello.into())).await.is_err() {
            return;
        }
        loop {
            let next = self.state.lock().unwrap().slack_events.pop_front();
            if let Some(envelope) = next {
                if ws
                    .send(Message::Text(envelope.to_string().into()))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            match tokio::time::timeout(Duration::from_millis(50), ws.recv()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    let ack: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    if let Some(id) = ack["envelope_id"].as_str() {
                        self.state.lock().unwrap().slack_acks.push(id.to_string());
                    }
                }
                Ok(Some(Ok(_))) | Err(_) => {}
                Ok(None | Some(Err(_))) => return,
            }
        }
    }

    /// Queues a Discord message (the `d` of a `MESSAGE_CREATE`) for the Gateway connection.
    pub fn push_discord_message(&self, message: Value) {
        self.state.lock().unwrap().discord_events.push_back(message);
    }

    /// The Identify payload the Gateway client sent, and how many heartbeats.
    pub fn discord_identify(&self) -> (Option<Value>, usize) {
        let state = self.state.lock().unwrap();
        (state.discord_identify.clone(), state.discord_heartbeats)
    }

    /// A Gateway connection: Hello (a one-second heartbeat), READY after a good Identify, then
    /// the queued messages; heartbeats acknowledged.
    async fn discord_gateway(self, mut ws: axum::extract::ws::WebSocket) {
        use axum::extract::ws::Message;
        let hello = json!({"op": 10, "d": {"heartbeat_interval": 1000}}).to_string();
        if ws.send(Message::Text(hello.into())).await.is_err() {
            return;
        }
        let mut seq = 1;
        let mut ready = false;
        loop {
            if ready {
                let next = self.state.lock().unwrap().discord_events.pop_front();
                if let Some(d) = next {
                    seq += 1;
                    let event = json!({"op": 0, "t": "MESSAGE_CREATE", "s": seq, "d": d});
                    if ws
                        .send(Message::Text(event.to_string().into()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
            }
            let frame = match tokio::time::timeout(Duration::from_millis(50), ws.recv()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)
                }
                Ok(Some(Ok(_))) | Err(_) => continue,
                Ok(None | Some(Err(_))) => return,
            };
            match frame["op"].as_u64() {
                Some(2) => {
                    let good = frame["d"]["token"] == DISCORD_TOKEN;
                    self.state.lock().unwrap().discord_identify = Some(frame.clone());
                    if !good {
                        let _ = ws.send(Message::Close(None)).await;
                        return;
                    }
                    let event = json!({"op": 0, "t": "READY", "s": 1,
                        "d": {"v": 10, "user": {"id": "999", "username": "talon", "bot": true}, "session_id": "s1"}});
                    if ws
                        .send(Message::Text(event.to_string().into()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    ready = true;
                }
                Some(1) => {
                    self.state.lock().unwrap().discord_heartbeats += 1;
                    let ack = json!({"op": 11}).to_string();
                    if ws.send(Message::Text(ack.into())).await.is_err() {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The calls to paths ending with `suffix`.
    pub fn calls_to(&self, suffix: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.ends_with(suffix))
            .collect()
    }

    /// Waits up to 60 s for `count` calls to paths ending with `suffix`.
    pub async fn wait_for(&self, suffix: &str, count: usize) -> Vec<Call> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let calls = self.calls_to(suffix);
            if calls.len() >= count {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "{count} call(s) to {suffix} did not arrive; calls: {:?}",
                self.calls()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn handle(&self, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let path = uri.path().to_string();
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let parsed = serde_json::from_slice::<Value>(&body)
            .unwrap_or_else(|_| json!({"multipart": String::from_utf8_lossy(&body)}));
        if path.ends_with("/getUpdates") {
            return self.updates(&path, &parsed).await;
        }
        let message_id = {
            let mut state = self.state.lock().unwrap();
            state.calls.push(Call {
                path: path.clone(),
                authorization: authorization.clone(),
                body: parsed.clone(),
            });
            state.next_message += 1;
            state.next_message
        };
        if let Some(rest) = path.strip_prefix("/bot") {
            let Some((token, method)) = rest.split_once('/') else {
                return telegram_error(404, "Not Found");
            };
            if token != TELEGRAM_TOKEN {
                return telegram_error(401, "Unauthorized");
            }
            return match method {
                "createForumTopic" => Json(json!({"ok": true, "result":
                    {"message_thread_id": 77, "name": parsed["name"], "icon_color": 7322096}}))
                .into_response(),
                "sendMessage" | "sendPhoto" | "sendDocument" | "sendVideo" | "sendAudio" => {
                    if parsed["chat_id"] == "-404" {
                        return telegram_error(400, "Bad Request: chat not found");
                    }
                    Json(json!({"ok": true, "result": {"message_id": message_id,
                        "chat": {"id": parsed["chat_id"]}, "text": parsed["text"]}}))
                    .into_response()
                }
                _ => telegram_error(404, "Not Found: method not found"),
            };
        }
        if path == "/api/apps.connections.open" {
            if authorization.as_deref() != Some(&format!("Bearer {SLACK_APP_TOKEN}")) {
                return Json(json!({"ok": false, "error": "invalid_auth"})).into_response();
            }
            let host = headers
                .get("host")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            return Json(json!({"ok": true, "url": format!("ws://{host}/slack-socket")}))
                .into_response();
        }
        if path == "/api/chat.postMessage" {
            if authorization.as_deref() != Some(&format!("Bearer {SLACK_TOKEN}")) {
                return Json(json!({"ok": false, "error": "invalid_auth"})).into_response();
            }
            if parsed["channel"] == "C404" {
                return Json(json!({"ok": false, "error": "channel_not_found"})).into_response();
            }
            return Json(json!({"ok": true, "channel": parsed["channel"],
                "ts": format!("1700000000.{message_id:06}")}))
            .into_response();
        }
        if path == "/api/v10/gateway/bot" {
            if authorization.as_deref() != Some(&format!("Bot {DISCORD_TOKEN}")) {
                return (
                    axum::http::StatusCode::UNAUTHORIZED,
                    Json(json!({"message": "401: Unauthorized", "code": 0})),
                )
                    .into_response();
            }
            let host = headers
                .get("host")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            return Json(json!({"url": format!("ws://{host}/discord-gateway"), "shards": 1}))
                .into_response();
        }
        if path.starts_with("/api/v10/channels/") && path.ends_with("/messages") {
            if authorization.as_deref() != Some(&format!("Bot {DISCORD_TOKEN}")) {
                return (
                    axum::http::StatusCode::UNAUTHORIZED,
                    Json(json!({"message": "401: Unauthorized", "code": 0})),
                )
                    .into_response();
            }
            return Json(json!({"id": message_id.to_string(), "content": parsed["content"]}))
                .into_response();
        }
        if path == "/hook" {
            return Json(json!({"ok": true})).into_response();
        }
        (axum::http::StatusCode::NOT_FOUND, "not found").into_response()
    }

    /// `getUpdates`: the queued updates from `offset` on, waiting up to `timeout` seconds.
    async fn updates(&self, path: &str, body: &Value) -> Response {
        if !path.starts_with(&format!("/bot{TELEGRAM_TOKEN}/")) {
            return telegram_error(401, "Unauthorized");
        }
        let offset = body["offset"].as_i64().unwrap_or(0);
        let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
        let deadline = Instant::now() + wait;
        loop {
            let notified = self.wake.notified();
            let ready: Vec<Value> = {
                let mut state = self.state.lock().unwrap();
                state
                    .updates
                    .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
                state.updates.iter().cloned().collect()
            };
            if !ready.is_empty() || Instant::now() >= deadline {
                return Json(json!({"ok": true, "result": ready})).into_response();
            }
            let _ = tokio::time::timeout(deadline - Instant::now(), notified).await;
        }
    }
}

fn telegram_error(code: u16, description: &str) -> Response {
    Json(json!({"ok": false, "error_code": code, "description": description})).into_response()
}

/// A Telegram update: a text message in `chat` (a supergroup), in forum topic `topic` if given.
pub fn telegram_message(update_id: i64, chat: i64, topic: Option<i64>, text: &str) -> Value {
    let mut message = json!({
        "message_id": update_id * 10,
        "from": {"id": 4242, "is_bot": false, "first_name": "Ada"},
        "chat": {"id": chat, "type": if topic.is_some() { "supergroup" } else { "private" }},
        "date": 1_700_000_000,
        "text": text,
    });
    if let Some(topic) = topic {
        message["message_thread_id"] = json!(topic);
        message["is_topic_message"] = json!(true);
    }
    json!({"update_id": update_id, "message": message})
}

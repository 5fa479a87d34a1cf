//! A client of a running gateway's own API (`/v1/approvals`, `/v1/questions`, …) for the
//! operator's commands (`talon approvals`, `talon questions`): the token, the user a call is
//! for, and the gateway's error answers read back as a typed [`ClientError`]. Its words are the
//! gateway's and may quote a model: they are shown with control characters made visible.

use serde_json::Value;
use talon_core::error_text::with_causes;
use talon_core::visible::visible;

/// Why a call to the gateway failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered at the address.
    #[error("cannot reach the gateway at {base}: {reason} (is `talon serve` running? pass --url)")]
    Unreachable { base: String, reason: String },
    /// The answer could not be read.
    #[error("reading the gateway's answer: {0}")]
    Read(String),
    /// The gateway refused the call.
    #[error("the gateway answered {status}: {}", visible(.message))]
    Refused {
        status: reqwest::StatusCode,
        message: String,
    },
}

/// A gateway at `base`, called with its token for `user`.
#[derive(Debug, Clone)]
pub struct GatewayClient {
    base: String,
    token: Option<String>,
    user: Option<String>,
    http: reqwest::Client,
}

impl GatewayClient {
    /// A client of the gateway at `base` (`http://host:port`); empty token and user are none.
    pub fn new(base: &str, token: Option<String>, user: Option<String>) -> Self {
        Self {
            base: base.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
            user: user.filter(|u| !u.is_empty()),
            http: reqwest::Client::new(),
        }
    }

    /// `GET` or (with a body) `POST` `path`: the JSON answer.
    pub async fn send(&self, path: &str, body: Option<&Value>) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = match body {
            Some(body) => self.http.post(&url).json(body),
            None => self.http.get(&url),
        };
        if let Some(user) = &self.user {
            request = request.query(&[("user", user)]);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            base: self.base.clone(),
            reason: with_causes(&e),
        })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ClientError::Read(with_causes(&e)))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(value);
        }
        let message = value
            .pointer("/error/message")
            .or_else(|| value.get("error"))
            .and_then(Value::as_str)
            .map_or_else(|| value.to_string(), str::to_string);
        Err(ClientError::Refused { status, message })
    }
}

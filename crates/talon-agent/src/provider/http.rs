//! What both providers share: the HTTP request with retries (backoff with jitter, `Retry-After`),
//! error classification with messages that say what to do, and reading the event stream with an
//! idle timeout, stopping at the format's terminal event instead of waiting for the connection
//! to close.

use std::time::Duration;

use futures::StreamExt;
use http::HeaderMap;
use serde_json::Value;
use sse_stream::{Sse, SseStream};
use talon_net::sse::{MAX_EVENT_BYTES, bounded};

use super::{EventSink, ProviderError, RetryPolicy, StreamEvent};

/// A provider's HTTP endpoint.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The configured provider name, for errors.
    pub provider: String,
    pub client: reqwest::Client,
    /// The full URL requests are posted to.
    pub url: String,
    /// Authentication and version headers (marked sensitive).
    pub headers: HeaderMap,
    pub policy: RetryPolicy,
}

/// Whether the stream is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Done,
}

/// Turns one format's events into [`StreamEvent`]s.
pub trait FormatParser: Send {
    /// One server-sent event.
    fn event(&mut self, event: &Sse, sink: &mut dyn FnMut(StreamEvent)) -> Result<Flow, String>;
    /// The connection closed; `Ok` only when the answer is complete.
    fn end(&mut self, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String>;
    /// A whole, unstreamed response (a server that ignored `stream: true`).
    fn whole(&mut self, body: Value, sink: &mut dyn FnMut(StreamEvent)) -> Result<(), String>;
}

/// How one attempt ended.
enum Attempt {
    Done,
    /// Worth another attempt (nothing was passed on yet); what went wrong, and how long the
    /// server asked to wait.
    Retry(String, Option<Duration>),
    Fail(ProviderError),
}

impl Endpoint {
    /// An endpoint of `provider` posting to `url` with `headers`, plus the API key (when given
    /// and not empty) in `key_header` as `key_prefix` + key, marked sensitive. The client has no
    /// overall timeout (answers stream for minutes); connecting is bounded.
    pub fn new(
        provider: &str,
        url: String,
        mut headers: HeaderMap,
        key_header: http::HeaderName,
        key_prefix: &str,
        api_key: Option<&str>,
        policy: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        if let Some(key) = api_key.filter(|k| !k.is_empty()) {
            let mut value =
                http::HeaderValue::try_from(format!("{key_prefix}{key}")).map_err(|_| {
                    ProviderError::Rejected {
                        provider: provider.to_string(),
                        status: 0,
                        message: "the API key contains characters HTTP headers cannot carry".into(),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(key_header, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ProviderError::Protocol {
                provider: provider.to_string(),
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            provider: provider.to_string(),
            client,
            url,
            headers,
            policy,
        })
    }

    /// Posts `body` and streams the answer through a fresh parser per attempt.
    pub async fn stream<P: FormatParser>(
        &self,
        model: &str,
        body: &Value,
        new_parser: impl Fn() -> P,
        sink: EventSink<'_>,
    ) -> Result<(), ProviderError> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut parser = new_parser();
            let (last, asked) = match self.attempt(model, body, &mut parser, sink).await {
                Attempt::Done => return Ok(()),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(last, asked) => (last, asked),
            };
            if attempt > self.policy.max_retries {
                return Err(ProviderError::Exhausted {
                    provider: self.provider.clone(),
                    attempts: attempt,
                    last,
                });
            }
            let wait = asked
                .unwrap_or_else(|| backoff(self.policy.base_delay, attempt))
                .min(self.policy.max_delay);
            tracing::warn!(provider = %self.provider, attempt, wait_ms = wait.as_millis() as u64, error = %last, "retrying the model request");
            tokio::time::sleep(wait).await;
        }
    }

    async fn attempt<P: FormatParser>(
        &self,
        model: &str,
        body: &Value,
        parser: &mut P,
        sink: EventSink<'_>,
    ) -> Attempt {
        let sent = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .json(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                let why = talon_core::error_text::with_causes(&e);
                return Attempt::Retry(format!("cannot reach {}: {why}", self.url), None);
            }
        };
        let status = response.status();
        if !status.is_success() {
            let asked = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            return self.classify(status.as_u16(), &text, model, asked);
        }
        let json = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        let mut emitted = false;
        let mut pass = |event: StreamEvent| {
            emitted = true;
            sink(event);
        };
        if json {
            return match response.json::<Value>().await {
                Ok(body) => match parser.whole(body, &mut pass) {
                    Ok(()) => Attempt::Done,
                    Err(message) => Attempt::Fail(self.protocol(message)),
                },
                Err(e) => Attempt::Retry(
                    format!(
                        "the answer broke off: {}",
                        talon_core::error_text::with_causes(&e)
                    ),
                    None,
                ),
            };
        }
        let mut events =
            SseStream::from_bytes_stream(bounded(response.bytes_stream(), MAX_EVENT_BYTES));
        let idle = self.policy.idle_timeout;
        loop {
            let next = tokio::time::timeout(idle, events.next()).await;
            let went_idle = next.is_err();
            let broke = match next {
                Err(_) => {
                    let e = ProviderError::IdleTimeout {
                        provider: self.provider.clone(),
                        idle,
                    };
                    format!("{e}")
                }
                Ok(None) => match parser.end(&mut pass) {
                    Ok(()) => return Attempt::Done,
                    Err(message) => message,
                },
                Ok(Some(Err(e))) => format!("the stream broke: {e}"),
                Ok(Some(Ok(event))) => match parser.event(&event, &mut pass) {
                    Ok(Flow::Continue) => continue,
                    Ok(Flow::Done) => return Attempt::Done,
                    Err(message) => return Attempt::Fail(self.protocol(message)),
                },
            };
            // Half an answer cannot be taken back: retry only when nothing was passed on.
            return if emitted {
                Attempt::Fail(if went_idle {
                    ProviderError::IdleTimeout {
                        provider: self.provider.clone(),
                        idle,
                    }
                } else {
                    ProviderError::Truncated {
                        provider: self.provider.clone(),
                    }
                })
            } else {
                Attempt::Retry(broke, None)
            };
        }
    }

    fn protocol(&self, message: String) -> ProviderError {
        ProviderError::Protocol {
            provider: self.provider.clone(),
            message,
        }
    }

    fn classify(&self, status: u16, body: &str, model: &str, asked: Option<Duration>) -> Attempt {
        let message = error_message(body);
        let provider = self.provider.clone();
        let lower = message.to_ascii_lowercase();
        match status {
            401 | 403 => Attempt::Fail(ProviderError::Auth {
                provider,
                status,
                message,
            }),
            408 | 409 | 425 | 429 | 500..=599 => {
                Attempt::Retry(format!("HTTP {status}: {message}"), asked)
            }
            _ if CONTEXT_OVERFLOW.iter().any(|m| lower.contains(m)) => {
                Attempt::Fail(ProviderError::ContextOverflow { provider, message })
            }
            404 | 400 if lower.contains("model") => Attempt::Fail(ProviderError::UnknownModel {
                provider,
                model: model.to_string(),
                message,
            }),
            // Nothing at the URL: the base URL is the usual mistake, so say which one.
            404 => Attempt::Fail(ProviderError::Rejected {
                provider,
                status,
                message: format!(
                    "{message}; nothing answers at {}: check the provider's base_url (OpenAI-compatible servers usually end in /v1)",
                    self.url
                ),
            }),
            _ => Attempt::Fail(ProviderError::Rejected {
                provider,
                status,
                message,
            }),
        }
    }
}

/// Phrases providers use when the prompt exceeds the context window.
const CONTEXT_OVERFLOW: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
];

/// The human part of an error body: `error.message` (OpenAI, Anthropic), `message`, or the text.
pub fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let text = found.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        return "no details given".into();
    }
    let mut cut: String = text.chars().take(500).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// `Retry-After` (seconds) or `retry-after-ms`, as a duration.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
}

/// `base`·2^(attempt−1), ×0.9–1.1.
fn backoff(base: Duration, attempt: u32) -> Duration {
    let factor = 2f64.powi(attempt.saturating_sub(1).min(16) as i32);
    base.mul_f64(factor * rand::random_range(0.9..1.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23: a 404 with an empty body said "no details given"; it names the URL now, the
    /// usual mistake being the base URL.
    #[test]
    fn a_404_names_the_url() {
        let endpoint = Endpoint::new(
            "local",
            "http://127.0.0.1:11434/chat/completions".into(),
            HeaderMap::new(),
            http::header::AUTHORIZATION,
            "Bearer ",
            None,
            RetryPolicy::default(),
        )
        .expect("an endpoint");
        let Attempt::Fail(e) = endpoint.classify(404, "", "m", None) else {
            panic!("a 404 is not retried");
        };
        let message = e.to_string();
        assert!(
            message.contains("nothing answers at http://127.0.0.1:11434/chat/completions")
                && message.contains("base_url"),
            "{message}"
        );
    }

    #[test]
    fn error_messages_are_found_in_both_formats() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(error_message("plain failure\n"), "plain failure");
        assert_eq!(error_message(""), "no details given");
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        let base = Duration::from_millis(200);
        for attempt in 1..=4u32 {
            let d = backoff(base, attempt).as_secs_f64();
            let nominal = 0.2 * f64::from(1u32 << (attempt - 1));
            assert!(
                d >= nominal * 0.9 - 1e-9 && d <= nominal * 1.1 + 1e-9,
                "{d} vs {nominal}"
            );
        }
    }

    #[test]
    fn retry_after_in_seconds_or_milliseconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", http::HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", http::HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }
}

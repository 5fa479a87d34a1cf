//! Model providers behind one neutral event type.
//!
//! A provider turns a [`ChatRequest`] into a stream of [`StreamEvent`]s: text as it arrives, each
//! tool call once it is complete (arguments joined), usage, and exactly one
//! [`StreamEvent::Finished`] at the end. Transient failures (5xx, 429, transport errors, a stream
//! that breaks before anything was emitted) are retried with backoff and jitter inside the
//! provider; what reaches the caller is either the whole answer or one clear [`ProviderError`].

pub mod anthropic;
pub mod http;
pub mod openai;

use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, ToolCallRequest};

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub schema: Value,
}

/// One request to the model.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub system: Option<&'a str>,
    pub messages: &'a [Message],
    pub tools: &'a [ToolDef],
    pub max_tokens: u32,
    /// The client's sampling settings for this turn (none: the provider's defaults).
    pub sampling: &'a Sampling,
}

/// Sampling settings a client chose for a turn (`/v1/chat/completions`, `/v1/messages`); each
/// unset one is left to the provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Anthropic's `top_k`.
    pub top_k: Option<u64>,
    /// Stop sequences.
    #[serde(default)]
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    /// OpenAI's `response_format` (`json_object`, `json_schema`) as the client sent it.
    pub response_format: Option<Value>,
}

impl Sampling {
    /// No settings: the provider's defaults.
    pub const DEFAULT: Sampling = Sampling {
        temperature: None,
        top_p: None,
        top_k: None,
        stop: Vec::new(),
        seed: None,
        response_format: None,
    };

    /// The first setting a provider speaking `kind` has no way to honour, to refuse the request
    /// with rather than drop it silently.
    pub fn unsupported_by(&self, kind: ProviderKind) -> Option<&'static str> {
        match kind {
            ProviderKind::Anthropic if self.seed.is_some() => Some("seed"),
            ProviderKind::Anthropic if self.response_format.is_some() => Some("response_format"),
            ProviderKind::Openai if self.top_k.is_some() => Some("top_k"),
            _ => None,
        }
    }
}

/// Token counts of one model response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// The output limit cut it off.
    MaxTokens,
    StopSequence,
    /// Anthropic: a long turn paused; send the conversation again to continue.
    PauseTurn,
    /// It declined (Anthropic `refusal`, OpenAI `content_filter`).
    Refusal,
    /// Something this version does not know, as the provider named it.
    Other(String),
}

/// What a provider reports while answering.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A tool call has begun (its arguments are still arriving).
    ToolCallStarted { id: String, name: String },
    /// A complete tool call.
    ToolCall(ToolCallRequest),
    /// Token counts (may come more than once; the last is the total).
    Usage(Usage),
    /// The answer is complete.
    Finished(StopReason),
}

/// Why a provider could not answer. Messages say what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "{provider} refused the API key (HTTP {status}): {message}. Check the key configured for this provider"
    )]
    Auth {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider} does not know the model {model:?}: {message}")]
    UnknownModel {
        provider: String,
        model: String,
        message: String,
    },
    #[error(
        "the conversation no longer fits the model's context window ({provider}: {message}); compact or start a new session"
    )]
    ContextOverflow { provider: String, message: String },
    #[error("{provider} rejected the request (HTTP {status}): {message}")]
    Rejected {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider} kept failing after {attempts} attempts; last: {last}")]
    Exhausted {
        provider: String,
        attempts: u32,
        last: String,
    },
    #[error("{provider} sent nothing for {idle:?}; the stream was abandoned")]
    IdleTimeout { provider: String, idle: Duration },
    #[error("{provider}'s stream ended before the answer was complete")]
    Truncated { provider: String },
    #[error("{provider} sent something unreadable: {message}")]
    Protocol { provider: String, message: String },
}

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; doubled each retry, ×0.9–1.1 jitter.
    pub base_delay: Duration,
    /// The longest wait, including one a `Retry-After` asks for.
    pub max_delay: Duration,
    /// No event for this long abandons the stream.
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, LM Studio).
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// Where the events of one answer go.
pub type EventSink<'a> = &'a mut (dyn FnMut(StreamEvent) + Send);

/// A model provider.
pub trait Provider: Send + Sync {
    /// The configured name (in errors and events).
    fn name(&self) -> &str;
    /// The wire format, which also decides the tool definitions' shape.
    fn kind(&self) -> ProviderKind;
    /// Streams one answer into `sink`; returns after [`StreamEvent::Finished`] was sent.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        sink: EventSink<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
}

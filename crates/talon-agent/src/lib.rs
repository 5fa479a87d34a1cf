//! Talon's agent runtime.
//!
//! - [`provider`]: model providers (OpenAI-compatible Chat Completions, Anthropic Messages)
//!   behind one neutral [`provider::StreamEvent`], with retries, backoff and an idle timeout.
//! - [`agent_loop`]: the tool-calling loop. It offers the caller's effective tool set, runs every
//!   tool call through Talon's one pipeline (never around it), parallel-safe calls together and
//!   the others alone, detects loops, and honours cancellation.
//! - [`mock`]: a scripted OpenAI- and Anthropic-compatible server for tests and offline demos.
//!
//! This crate sits above the tools: tools never call it (subagent-style tools get a callback).
//!
//! # Charter
//!
//! - **Owns:** providers (OpenAI, Anthropic wire formats), the agent loop, loop detection,
//!   checkpoints, the mock provider.
//! - **Never contains:** tool implementations or names: it reads only what tools declare
//!   (`ToolSpec`, `ToolOutput::session_effect`).
//! - **A new feature goes:** a new provider is a module under `provider`.

pub mod agent_loop;
pub mod compact;
pub mod gate;
pub mod loop_detect;
pub mod message;
pub mod mock;
pub mod provider;
pub mod side;

pub use agent_loop::{
    Agent, CheckpointSink, LoopConfig, RunEvent, TEXT_SEPARATOR, TextJoiner, TurnInput,
    TurnOptions, TurnOutcome, TurnStop,
};
pub use message::{Message, ToolCallRequest, ToolResult};
pub use provider::{Provider, ProviderError, Sampling, StopReason, StreamEvent, ToolDef, Usage};

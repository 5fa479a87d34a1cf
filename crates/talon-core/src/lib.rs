//! Talon's core: everything between "the model emitted a tool call" and "the result goes back".
//!
//! * [`tool`] — the tool contract: a tool's model-facing spec lives beside its executor.
//! * [`registry`] — the concurrent, deterministically ordered set of tools, aliases and groups.
//! * [`pipeline`] — the one way to run a tool: resolve, authorize, validate, rate limit, hooks,
//!   permission, execute, post hooks, scrub, audit. [`tool::Authorized`] can only be built there,
//!   so no entry point can skip a step.
//! * [`policy`] — profiles, groups, allow / deny / alsoAllow, subagent deny lists.
//! * [`scrub`] — credential scrubbing with a keyword prefilter.
//! * [`rate_limit`] — per-session GCRA limiter with bounded memory.
//!
//! * [`workspace`] — each call's workspace: shared, or one per agent and user.
//! * [`caller`] — the agent, user and workspace every entry point binds a call to.
//! * [`approvals`], [`questions`] — calls and tools waiting for a person's answer.
//! * [`visible`] — text from a model or a server made safe to show a person (no escape
//!   sequences, bidi overrides or invisible characters reach a terminal).
//!
//! This crate does no I/O beyond running shell-command hooks and creating per-agent workspace
//! directories; storage, network and tools live in the crates above it.
//!
//! # Charter
//!
//! - **Owns:** the contracts every other crate builds on: `Tool`, `ToolSpec` (a tool declares its
//!   properties here, never elsewhere by name), the registry, the one pipeline and its sealed
//!   `Authorized`, the policy engine and its floor for runs, permission modes, approvals and
//!   questions, hooks, scrubbing, the untrusted-content fence, events.
//! - **Never contains:** storage, network, processes (beyond hooks), providers, HTTP, or any tool
//!   of its own but test doubles.
//! - **A new feature goes:** a property a new kind of tool needs (a browser that hands off pages, a
//!   media tool that returns files) is a field of `ToolSpec` or `ToolOutput` read by the pipeline
//!   or the policy; a new step of every call is a pipeline step.

pub mod approvals;
pub mod caller;
pub mod context;
pub mod error_text;
pub mod events;
pub mod hooks;
pub mod output;
pub mod permission;
pub mod pipeline;
pub mod policy;
pub mod questions;
pub mod rate_limit;
pub mod registry;
pub mod schema;
pub mod script;
pub mod script_template;
pub mod scrub;
pub mod tool;
pub mod untrusted;
pub mod visible;
pub mod waiting;
pub mod wire;
pub mod workspace;

#[cfg(test)]
mod test_tools;

pub use caller::{AgentDirectory, CallerError, Callers};
pub use context::{
    CallContext, ClientHandle, ClientRequests, DEFAULT_AGENT, LogLevel, LogMessage, LogSink,
    ProgressSink, ProgressUpdate, RunKind,
};
pub use output::{Media, SessionEffect, ToolOutput, Usage};
pub use pipeline::{CallOutcome, FailedStage, Pipeline, PipelineBuilder, ToolCall};
pub use registry::Registry;
pub use script::{ScriptAnalysis, ScriptAnalyzer};
pub use tool::{Authorized, Delegation, Risk, SideEffect, Tool, ToolSpec};
pub use workspace::Workspaces;

//! Talon's runtime as a library: what the `talon` binary runs, for a Rust program to embed.
//!
//! - [`config`]: `talon.toml` and `TALON_*` variables, checked ([`config_location`] keeps the
//!   file and the data directory out of every workspace).
//! - [`runtime`]: the configuration wired into one [`talon_core::Pipeline`] with the store, the
//!   built-in tools, the MCP bridge, approvals and audit ([`runtime::build`]).
//! - [`agent_runs`]: the turn engine ([`agent_runs::TurnEngine`]: a turn bound to its caller,
//!   the session's history, the turn saved whole) and [`agent_runs::Runner`], the engine with the
//!   services every entry point shares; [`agent_services`], the tools that need it;
//!   [`chat_session`], a person's chat at a terminal.
//! - HTTP: [`chat_http`] (OpenAI's and Anthropic's model APIs, sessions), [`agents_http`],
//!   [`mcp_admin_http`], mounted by `talon serve` on the [`talon_gateway`] router.
//! - [`cron`]: scheduled jobs run as agent runs, their `cron` tool, and [`cron_http`].
//! - [`store`], [`mcp_store`], [`audit`]: the store as the runtime uses it.
//!
//! Terminal I/O (prompts, the chat screen) and exit codes stay in the binary; the runtime takes
//! a terminal's [`talon_core::approvals::Prompter`] as an input ([`runtime::Overrides`]). The one
//! exception is [`spinner`], drawn on stderr only when it is a terminal, for waits inside the
//! runtime (the first start's migrations).
//!
//! # Charter
//!
//! - **Owns:** configuration and wiring, the turn engine (`agent_runs::TurnEngine`, which knows no
//!   service: they add to a turn's prompt through `TurnSections`), and the services over it:
//!   runs (their authority, life, checkpoints, supervisor), teams, cron, channels, handoff, the
//!   gateway tool; each service owns its tools, its HTTP routes and its typed errors.
//! - **Never contains:** terminal I/O or exit codes (the binary's), tool implementations that do
//!   not need the runtime (talon-tools').
//! - **A new feature goes:** a new channel is a module under `channels`; a new run kind starts its
//!   runs through `Runner::start_child` from its caller's narrowed authority; a browser or media
//!   tool that needs sessions registers here.

pub mod agent_runs;
pub mod agent_services;
pub mod agents_admin;
pub mod agents_http;
pub mod audit;
pub mod channels;
pub mod chat_config;
pub mod chat_http;
pub mod chat_session;
pub mod cli_credentials;
pub mod config;
pub mod config_location;
pub mod config_redact;
pub mod cron;
pub mod cron_http;
pub mod custom_tools;
pub mod custom_tools_http;
pub mod exec_policy;
pub mod gateway_tool;
mod http_reply;
pub mod knowledge_index;
mod landing;
pub mod mcp_admin;
pub mod mcp_admin_http;
pub mod mcp_servers_config;
pub mod mcp_store;
pub mod memory_config;
pub mod memory_index;
pub mod offer;
pub mod op_error;
pub mod openai_compat_config;
pub mod runner;
pub mod runs;
pub mod runs_http;
pub mod runtime;
pub mod serve;
pub mod server_ips;
pub mod spinner;
pub mod store;
pub mod teams;
pub mod teams_http;
pub mod web_config;

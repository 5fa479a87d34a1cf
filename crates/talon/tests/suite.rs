//! The integration tests of the `talon` binary: every command, entry point and security rule driven as an operator, a model and an attacker drive them.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod admin;
mod architecture;
mod automation;
mod chat;
mod chat_http;
mod chat_scenario;
mod chat_terminal;
mod chat_tools;
mod cli;
mod cli_credentials;
mod entry_points;
mod exec_approvals;
mod gateway;
mod knowledge;
mod mcp;
mod mcp_bridge;
mod mcp_clients;
mod mcp_conformance;
mod mcp_oauth;
mod mcp_servers_cli;
mod sandbox_backends;
mod sandbox_network;
mod security;
mod session_sandbox;

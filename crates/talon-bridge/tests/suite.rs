//! The MCP client bridge against real servers, misbehaving ones and its own security rules.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-bridge --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../talon/tests/support/npm.rs"]
mod npm;

mod everything;
mod filesystem;
mod list_changed;
mod misbehaving;
mod reconnect;
mod search_mode;
mod security;
mod transports;

//! The agent loop against scripted and real providers.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-agent --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod mock_provider;

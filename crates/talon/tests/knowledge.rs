//! Issue 26, knowledge: hybrid memory search (this file's `memory` module).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "knowledge/memory.rs"]
mod memory;

//! The shell runner's containment, analysis corpus and security rules.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-exec --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;

mod analysis_corpus;
mod containment;
mod security;

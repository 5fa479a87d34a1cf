//! The file jail: its boundary, symlink races and security rules.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-fs --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod boundary;
mod security;
mod symlink_race;

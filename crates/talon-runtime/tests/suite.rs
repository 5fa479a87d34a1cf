//! The runtime's integration tests. One harness for the crate: every file beside this one is a
//! module of one test binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spec_snapshot;

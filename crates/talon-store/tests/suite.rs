//! The store's tests, on SQLite and (where `TALON_TEST_DATABASE_URL` is set) on PostgreSQL.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-store --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;

mod cron;
mod custom_tools;
mod knowledge;
mod mcp_store;
mod postgres_tls;
mod schema;
mod security;
mod sessions;
mod store_suite;
mod teams;

//! The integration tests of the built-in tools, through the pipeline a model's call takes.
//!
//! One harness for the crate: every file beside this one is a module of one test binary, so the
//! whole stack is linked once, not once per file (`cargo test -p talon-tools --test suite NAME`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;

mod credentialed_exec;
mod fs_tools;
mod h21_web_no_proxy;
mod hard_links;
mod notebook_edit;
mod openai_compat_call;
mod read_pdf;
mod search_tools;
mod security;
mod shell_tools;
mod spec_snapshot;
mod through_pipeline;
mod virtual_files;
mod web_fetch;
mod web_proxy;
mod web_search;

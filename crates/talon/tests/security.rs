//! The security suite of the binary crate (issue 21): one test binary holding the regressions of
//! every break the outside review found, named `h21_NN_…` so `cargo test h21_` finds them.
//! `gateway`: what a web page, a file an agent wrote, or another user of the gateway must not
//! reach; `sandbox`: what a sandboxed command must not reach, through every backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod channels;
mod custom_tools;
mod gateway;
mod h35_config;
mod h35_credentials;
mod h35_gateway;
mod h35_parsers;
mod h35_sandbox;
mod h35_skills;
mod modes;
mod openai_compat;
mod sandbox;
mod sessions;
mod terminal;
mod turns;

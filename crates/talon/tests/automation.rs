//! Issue 27 (automation): custom tools defined at run time, end to end through `talon serve`,
//! its HTTP API and `talon custom-tools`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod channels;
mod custom_tools;
mod gateway;
mod inventory;
mod openai_compat;

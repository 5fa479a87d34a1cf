//! The security suite of the built-in tools (issue 21), named `h21_NN_…` so `cargo test h21_`
//! finds them. `files`: every file tool, in both dialects, reaches the jail's rules; `bash_cwd`:
//! the working directory `Bash` carries between calls stays in the workspace. Item 12's proxy test
//! stays alone in `h21_web_no_proxy` because it sets process environment. Issue 22 (`h22_N_…`):
//! `sessions`: the session tools reach only the caller's sessions; `context_files`: a predefined
//! agent's shared context files are the operator's; `memory_search`: the model is told the
//! query limit; `groups`: every tool is in its capability group in both dialects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bash_cwd;
mod context_files;
mod files;
mod groups;
mod memory_search;
mod sessions;

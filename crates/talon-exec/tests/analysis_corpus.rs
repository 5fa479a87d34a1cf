//! Regression corpus for shell command analysis, one module a part:
//! 1. `goclaw`: GoClaw's deny patterns (research/goclaw.md §3.1): a representative command per
//!    pattern is refused by its group, and look-alikes pass.
//! 2. `bypasses`: the bypass techniques of research/sandbox.md §4 that concern analysis: each is
//!    denied or unknown, never allowed, even under the most permissive configuration.
//! 3. `rules`: Claude Code rule semantics and GoClaw's "allow always" issues #1200–#1216.

#![allow(clippy::expect_used)]

use crate::common;
use common::{config, decision, groups_hit};

mod bypasses;
mod goclaw;
mod rules;

//! Regression corpus for shell command analysis, one module a part (the shared helpers here):
//! 1. `goclaw`: GoClaw's deny patterns (research/goclaw.md §3.1): a representative command per
//!    pattern is refused by its group, and look-alikes pass.
//! 2. `bypasses`: the bypass techniques of research/sandbox.md §4 that concern analysis: each is
//!    denied or unknown, never allowed, even under the most permissive configuration.
//! 3. `rules`: Claude Code rule semantics and GoClaw's "allow always" issues #1200–#1216.

#![allow(clippy::expect_used)]

use std::collections::HashSet;

use talon_exec::analysis::{
    ApprovalContext, Ask, Decision, DenyGroups, ExecApprovalConfig, RuleSet, Security, analyze,
    decide,
};

mod analysis_corpus {
    mod bypasses;
    mod goclaw;
    mod rules;
}

fn groups_hit(command: &str) -> Vec<&'static str> {
    DenyGroups::default()
        .check(&analyze(command))
        .into_iter()
        .map(|h| h.group)
        .collect()
}

fn config(security: Security, ask: Ask, allow: &[&str]) -> ExecApprovalConfig {
    ExecApprovalConfig {
        security,
        ask,
        rules: RuleSet::parse::<&str>(&[], &[], allow).expect("valid rules"),
    }
}

fn decision(
    command: &str,
    config: &ExecApprovalConfig,
    always: &HashSet<String>,
    can_ask: bool,
) -> Decision {
    let groups = DenyGroups::default();
    decide(
        &analyze(command),
        config,
        ApprovalContext {
            deny_groups: &groups,
            always_allowed: always,
            can_ask,
        },
    )
}

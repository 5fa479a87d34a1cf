//! Helpers shared by the analysis harnesses: deny-group hits and approval decisions of a
//! command under a configuration built from rules.
#![allow(dead_code, clippy::expect_used)]

use std::collections::HashSet;

use talon_exec::analysis::{
    ApprovalContext, Ask, Decision, DenyGroups, ExecApprovalConfig, RuleSet, Security, analyze,
    decide,
};

/// The deny groups that refuse `command`.
pub fn groups_hit(command: &str) -> Vec<&'static str> {
    DenyGroups::default()
        .check(&analyze(command))
        .into_iter()
        .map(|h| h.group)
        .collect()
}

/// A configuration allowing the rules `allow`.
pub fn config(security: Security, ask: Ask, allow: &[&str]) -> ExecApprovalConfig {
    ExecApprovalConfig {
        security,
        ask,
        rules: RuleSet::parse::<&str>(&[], &[], allow).expect("valid rules"),
    }
}

/// What the approval step decides for `command`.
pub fn decision(
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

//! Permission modes, the permission checker, and approvals (pipeline step 6).
//!
//! Claude Code's modes, with Goat's risk table for the defaults:
//!
//! | mode                | allowed without asking              | otherwise                  |
//! |---------------------|-------------------------------------|----------------------------|
//! | `default`           | risk ≤ low, and the auto-allowed set | ask                        |
//! | `acceptEdits`       | risk ≤ medium                       | ask                        |
//! | `dontAsk`           | risk ≤ low, and the auto-allowed set | deny                       |
//! | `plan`              | read-only tools only                | deny                       |
//! | `bypassPermissions` | everything                          | —                          |
//!
//! A PreToolUse hook's deny (step 5) comes first and wins over every mode, including
//! `bypassPermissions`, as in Claude Code. "Ask" goes to an [`Approver`]; the default
//! [`DenyApprover`] refuses, because a headless process has nobody to ask.

use std::collections::BTreeSet;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::CallContext;
use crate::script::ScriptAnalysis;
use crate::tool::{Risk, SideEffect, ToolSpec};

/// Claude Code's permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub enum PermissionMode {
    #[default]
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "acceptEdits")]
    AcceptEdits,
    #[serde(rename = "bypassPermissions")]
    BypassPermissions,
    #[serde(rename = "plan")]
    Plan,
    #[serde(rename = "dontAsk")]
    DontAsk,
}

impl PermissionMode {
    /// How permissive the mode is: `plan` (nothing that changes anything) < `dontAsk` (never
    /// asks, refuses instead) < `default` < `acceptEdits` < `bypassPermissions`. The one
    /// definition of the order; everything else compares through [`PermissionMode::stricter`]
    /// and [`PermissionMode::is_no_looser_than`].
    fn latitude(self) -> u8 {
        match self {
            PermissionMode::Plan => 0,
            PermissionMode::DontAsk => 1,
            PermissionMode::Default => 2,
            PermissionMode::AcceptEdits => 3,
            PermissionMode::BypassPermissions => 4,
        }
    }

    /// The stricter of the two modes. Wherever two sources name a mode (the operator's
    /// configuration and what a session stored, the mode before plan mode and the configured
    /// one), the stricter applies: no source but the operator may loosen what the operator set.
    pub fn stricter(self, other: Self) -> Self {
        if other.latitude() < self.latitude() {
            other
        } else {
            self
        }
    }

    /// Whether this mode allows nothing that `other` does not (it is `other` or stricter).
    pub fn is_no_looser_than(self, other: Self) -> bool {
        self.latitude() <= other.latitude()
    }

    /// The wire name (`acceptEdits`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::Plan => "plan",
            PermissionMode::DontAsk => "dontAsk",
        }
    }
}

impl std::str::FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "acceptEdits" => Ok(Self::AcceptEdits),
            "bypassPermissions" => Ok(Self::BypassPermissions),
            "plan" => Ok(Self::Plan),
            "dontAsk" => Ok(Self::DontAsk),
            other => Err(format!(
                "unknown permission mode {other:?}; expected default, acceptEdits, bypassPermissions, plan or dontAsk"
            )),
        }
    }
}

/// A checker's or hook's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    Ask(String),
}

/// What the checker and approver see.
#[derive(Debug)]
pub struct PermissionRequest<'a> {
    pub spec: &'a ToolSpec,
    pub input: &'a Value,
    pub ctx: &'a CallContext,
    /// The analysis of the tool's shell script argument ([`ToolSpec::shell_script_arg`]), made
    /// once by the pipeline; the tool receives the same one.
    pub script: Option<&'a ScriptAnalysis>,
}

/// Rules that decide before the mode default (for example `Bash(npm test:*)` allow rules, which
/// arrive with the exec issue). `None` defers to the mode.
pub trait PermissionChecker: Send + Sync {
    fn check(&self, request: &PermissionRequest<'_>) -> Option<Decision>;
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run this call.
    Allow,
    /// Refuse, with the reason given to the model.
    Deny(String),
}

/// Something that can ask a person (or a policy service) whether a call may run.
pub trait Approver: Send + Sync {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval>;
}

/// The headless default: nobody to ask, so "ask" means no.
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyApprover;

impl Approver for DenyApprover {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        let message = format!(
            "permission denied: {} needs approval ({reason}) and no interactive approver is available. \
             Use a read-only tool, or ask the user to allow {} (auto_allow in talon.toml, or a \
             different permission mode).",
            request.spec.name, request.spec.name
        );
        Box::pin(async move { Approval::Deny(message) })
    }
}

/// A scripted approver for tests and for non-interactive policies: answers from a fixed list of
/// allowed tool names and records every request.
#[derive(Debug, Default)]
pub struct StaticApprover {
    allow: BTreeSet<String>,
    asked: Mutex<Vec<String>>,
}

impl StaticApprover {
    /// Approves exactly the named tools.
    pub fn allowing<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self {
            allow: names.into_iter().map(Into::into).collect(),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Tool names this approver was asked about, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Approver for StaticApprover {
    fn approve<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        _reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(request.spec.name.clone());
        }
        let verdict = if self.allow.contains(&request.spec.name) {
            Approval::Allow
        } else {
            Approval::Deny(format!(
                "permission denied: the approver refused {}",
                request.spec.name
            ))
        };
        Box::pin(async move { verdict })
    }
}

/// Claude Code's auto-allowed tools (Goat's DefaultRegistry list).
pub const DEFAULT_AUTO_ALLOW: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "ListMcpResources",
    "ReadMcpResource",
];

/// The mode's own verdict for a tool, before asking anyone.
pub fn mode_decision(mode: PermissionMode, spec: &ToolSpec, auto_allowed: bool) -> Decision {
    match mode {
        PermissionMode::BypassPermissions => Decision::Allow,
        PermissionMode::Plan => {
            // Reading and asking the user (AskUserQuestion, ExitPlanMode) change nothing.
            if spec.side_effect.is_read_only() || spec.side_effect == SideEffect::Blocking {
                Decision::Allow
            } else {
                Decision::Deny(format!(
                    "{} is not allowed in plan mode: only read-only tools run while planning. \
                     Present the plan first; the tool can run after the user leaves plan mode.",
                    spec.name
                ))
            }
        }
        _ if auto_allowed => Decision::Allow,
        PermissionMode::AcceptEdits if spec.risk <= Risk::Medium => Decision::Allow,
        PermissionMode::Default | PermissionMode::DontAsk if spec.risk <= Risk::Low => {
            Decision::Allow
        }
        PermissionMode::DontAsk => Decision::Deny(format!(
            "{} was denied by mode default: dontAsk mode runs only low-risk tools and never asks",
            spec.name
        )),
        _ => {
            Decision::Ask(format!("{:?} risk in {} mode", spec.risk, mode.as_str()).to_lowercase())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PermissionMode::{self, *};

    const ALL: [PermissionMode; 5] = [Plan, DontAsk, Default, AcceptEdits, BypassPermissions];

    #[test]
    fn h22_12_the_stricter_mode_always_wins() {
        // ALL is ordered strictest first.
        for (i, a) in ALL.iter().enumerate() {
            for (j, b) in ALL.iter().enumerate() {
                let strictest = ALL[i.min(j)];
                assert_eq!(a.stricter(*b), strictest, "{a:?} vs {b:?}");
                assert_eq!(a.is_no_looser_than(*b), i <= j, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(AcceptEdits.stricter(DontAsk), DontAsk);
        assert_eq!(DontAsk.stricter(BypassPermissions), DontAsk);
    }
}

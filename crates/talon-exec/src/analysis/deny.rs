//! GoClaw's shell deny groups (research/goclaw.md §3.1), matched on analysed segments.
//!
//! GoClaw matches regular expressions on the raw command string, which both over-matches
//! (`echo "rm -rf /"`, `init_db`) and under-matches (`r''m -rf /`, `env sh -c …`). Here each
//! GoClaw pattern is a check on a [`Segment`]: the program after wrappers, its options, its
//! redirections and assignments. The group names and defaults are GoClaw's: all fifteen are on.
//!
//! A hit always refuses the command (except `package_install`, which GoClaw sends to an
//! approval instead, see [`DenyHit::asks_instead`]). Commands the analysis cannot resolve are
//! not refused here: the approval layer asks about them.

use std::collections::HashMap;

use super::{Analysis, Segment};
use super::{patterns, patterns_misc};

/// GoClaw's group names, in GoClaw's order (`DenyGroupNames()`).
pub const GROUP_NAMES: [&str; 15] = [
    "destructive_ops",
    "data_exfiltration",
    "reverse_shell",
    "code_injection",
    "privilege_escalation",
    "dangerous_paths",
    "env_injection",
    "container_escape",
    "crypto_mining",
    "filter_bypass",
    "network_recon",
    "package_install",
    "persistence",
    "process_control",
    "env_dump",
];

/// Why each group exists, and what the model can do instead (same order as [`GROUP_NAMES`]).
const GROUP_TEXT: [(&str, &str); 15] = [
    (
        "it can destroy data or stop the machine, and cannot be undone",
        "Remove specific files without -r/-f, or ask the operator to allow it",
    ),
    (
        "it can send data off the machine or run code fetched from the network",
        "Download to a file and inspect it, or use the web tools",
    ),
    (
        "it can open a network shell or a raw socket",
        "Use the web tools for network access",
    ),
    (
        "it runs text as code where the text is not visible beforehand",
        "Run the decoded or generated commands directly so they can be checked",
    ),
    (
        "it changes the user or the privileges commands run with",
        "Run the command without privilege changes; the sandbox does not grant root",
    ),
    (
        "it changes permissions or ownership of system paths or makes temporary files executable",
        "Work inside the workspace",
    ),
    (
        "it sets variables that make programs load or run other code",
        "Run the command without those variables",
    ),
    (
        "it touches the container runtime or kernel interfaces",
        "Container and kernel settings are not available to tools",
    ),
    (
        "it looks like cryptocurrency mining",
        "Mining is not allowed",
    ),
    (
        "it uses an option that makes a harmless-looking program run another command",
        "Run the intended command directly",
    ),
    (
        "it scans networks, opens remote sessions or tunnels",
        "Network reconnaissance and tunnels are not allowed",
    ),
    (
        "it installs or removes packages",
        "Ask a person to approve the installation, or use what is installed",
    ),
    (
        "it changes scheduled jobs or shell start-up files",
        "Do not persist changes outside the task",
    ),
    (
        "it kills processes by name or with SIGKILL",
        "Stop background work with the process tool, or send SIGTERM to a specific PID",
    ),
    (
        "it prints the environment, which can hold credentials",
        "Print only the specific non-secret variable you need",
    ),
];

/// Which deny groups are on: GoClaw's `tools.shellDenyGroups`, overridable per agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenyGroups {
    enabled: [bool; 15],
}

impl Default for DenyGroups {
    /// All fifteen groups on, as GoClaw's registry (`Default: true`).
    fn default() -> Self {
        Self {
            enabled: [true; 15],
        }
    }
}

/// A deny-group setting that names no group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DenyConfigError {
    /// Rejected so a typo cannot silently leave a group on that the operator meant to change.
    #[error("unknown shell deny group `{0}` (known groups: {known})", known = GROUP_NAMES.join(", "))]
    UnknownGroup(String),
}

impl DenyGroups {
    /// Every group off (an operator's explicit choice; the OS sandbox still applies).
    pub fn none() -> Self {
        Self {
            enabled: [false; 15],
        }
    }

    /// Applies overrides (`true` = deny). Apply the global map first, then the agent's: as in
    /// GoClaw, the agent's value wins per key.
    pub fn with_overrides(
        mut self,
        overrides: &HashMap<String, bool>,
    ) -> Result<Self, DenyConfigError> {
        for (name, on) in overrides {
            self.set(name, *on)?;
        }
        Ok(self)
    }

    /// Turns one group on or off.
    pub fn set(&mut self, group: &str, on: bool) -> Result<(), DenyConfigError> {
        let index =
            group_index(group).ok_or_else(|| DenyConfigError::UnknownGroup(group.to_owned()))?;
        self.enabled[index] = on;
        Ok(())
    }

    /// Whether `group` denies. An unknown name counts as denied, as GoClaw's `IsGroupDenied`.
    pub fn is_enabled(&self, group: &str) -> bool {
        group_index(group).is_none_or(|i| self.enabled[i])
    }

    /// The hits of the enabled groups on every resolvable segment of `analysis`.
    pub fn check(&self, analysis: &Analysis) -> Vec<DenyHit> {
        let mut raw = Vec::new();
        for segment in &analysis.segments {
            patterns::segment(segment, &mut raw);
        }
        patterns_misc::whole(analysis, &mut raw);
        let mut hits: Vec<DenyHit> = Vec::new();
        for hit in raw {
            if !self.is_enabled(hit.group) {
                continue;
            }
            if hits.iter().any(|h| {
                h.group == hit.group && h.pattern == hit.pattern && h.matched == hit.matched
            }) {
                continue;
            }
            hits.push(DenyHit::new(hit));
        }
        hits
    }

    /// Checks one segment (for callers that analyse segment by segment).
    pub fn check_segment(&self, segment: &Segment) -> Vec<DenyHit> {
        let mut raw = Vec::new();
        patterns::segment(segment, &mut raw);
        raw.into_iter()
            .filter(|h| self.is_enabled(h.group))
            .map(DenyHit::new)
            .collect()
    }
}

fn group_index(name: &str) -> Option<usize> {
    GROUP_NAMES.iter().position(|g| *g == name)
}

/// A match found by [`patterns`] before groups are filtered.
#[derive(Debug, Clone)]
pub(crate) struct RawHit {
    pub group: &'static str,
    /// GoClaw's pattern this check stands for.
    pub pattern: &'static str,
    /// What the check saw, in words.
    pub why: String,
    /// The command it saw it in.
    pub matched: String,
}

/// A refused command: which group, which pattern, and a message for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyHit {
    /// The group's GoClaw name.
    pub group: &'static str,
    /// GoClaw's regular expression this check corresponds to (for operators comparing configs).
    pub pattern: &'static str,
    /// The command that matched, as analysed (effective argv after wrappers).
    pub matched: String,
    /// What was refused, why, and how to proceed.
    pub message: String,
}

impl DenyHit {
    fn new(raw: RawHit) -> Self {
        let (risk, how) = group_index(raw.group)
            .and_then(|i| GROUP_TEXT.get(i))
            .copied()
            .unwrap_or(("it matches a deny pattern", "Use a different command"));
        let message = format!(
            "Refused `{}`: {} (deny group `{}`), and {risk}. {how}. An operator can turn the \
             group off for this agent with the `{}` key of the shell deny groups.",
            raw.matched, raw.why, raw.group, raw.group
        );
        Self {
            group: raw.group,
            pattern: raw.pattern,
            matched: raw.matched,
            message,
        }
    }

    /// GoClaw sends `package_install` matches to an approval when one can be asked, instead of
    /// refusing them.
    pub fn asks_instead(&self) -> bool {
        self.group == "package_install"
    }
}

#[cfg(test)]
mod tests {
    use super::super::analyze;
    use super::*;

    #[test]
    fn defaults_are_all_on_and_names_are_goclaws() {
        let groups = DenyGroups::default();
        for name in GROUP_NAMES {
            assert!(groups.is_enabled(name), "{name}");
        }
        assert!(groups.is_enabled("no_such_group"));
        assert_eq!(GROUP_NAMES.len(), 15);
    }

    #[test]
    fn overrides_apply_global_then_agent() {
        let global = HashMap::from([
            ("destructive_ops".to_owned(), false),
            ("env_dump".to_owned(), false),
        ]);
        let agent = HashMap::from([("destructive_ops".to_owned(), true)]);
        let groups = DenyGroups::default()
            .with_overrides(&global)
            .and_then(|g| g.with_overrides(&agent))
            .expect("known groups");
        assert!(groups.is_enabled("destructive_ops"));
        assert!(!groups.is_enabled("env_dump"));
        let bad = HashMap::from([("destructive_op".to_owned(), false)]);
        assert!(matches!(
            DenyGroups::default().with_overrides(&bad),
            Err(DenyConfigError::UnknownGroup(_))
        ));
    }

    #[test]
    fn disabled_groups_do_not_hit() {
        let a = analyze("rm -rf /");
        assert_eq!(DenyGroups::default().check(&a)[0].group, "destructive_ops");
        assert!(DenyGroups::none().check(&a).is_empty());
    }

    #[test]
    fn hits_carry_a_message() {
        let a = analyze("sudo rm -rf /");
        let hits = DenyGroups::default().check(&a);
        let groups: Vec<_> = hits.iter().map(|h| h.group).collect();
        assert!(groups.contains(&"destructive_ops"));
        assert!(groups.contains(&"privilege_escalation"));
        assert!(hits[0].message.contains("rm -rf /"));
        assert!(hits[0].message.contains("deny group"));
    }
}

//! Exec approvals: GoClaw's modes (research/goclaw.md §3.4) with Claude Code's rules.
//!
//! Pure logic: given an [`Analysis`], the deny groups, the rules, the commands a person has
//! allowed "always", and whether a person can be asked at all, [`decide`] returns a
//! [`Decision`]. The order:
//!
//! 1. A deny-group hit refuses (a `package_install` hit asks instead when a person can answer,
//!    as in GoClaw).
//! 2. `security = deny` refuses everything.
//! 3. A deny rule refuses; an unknown analysis asks (or, when no one can be asked, refuses and
//!    says what to change); an ask rule asks.
//! 4. `ask = always` asks.
//! 5. A match (every segment allowed by a rule or inert, or the normalised command stored by
//!    "allow always") allows under `allowlist`; otherwise `allowlist` asks (or refuses with
//!    `ask = off`). `full` allows with `ask = off`; with `on-miss` it allows matches and
//!    read-only safe commands and asks about the rest.
//!
//! GoClaw judged only the first word and stored base names for "allow always" (issues #1200 to
//! #1216); here every segment is judged and the whole normalised command is stored.

use std::collections::HashSet;

use super::deny::DenyGroups;
use super::longopts;
use super::rules::{RuleSet, RuleVerdict, is_inert, sensitive_name};
use super::{Analysis, Segment};

/// GoClaw's `security` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Security {
    /// No shell commands at all.
    Deny,
    /// Only commands the rules (or "allow always") cover.
    Allowlist,
    /// Everything the deny groups and rules do not stop (GoClaw's default).
    #[default]
    Full,
}

/// GoClaw's `ask` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ask {
    /// Never ask (GoClaw's default).
    #[default]
    Off,
    /// Ask when a command is not covered.
    OnMiss,
    /// Ask about every command.
    Always,
}

/// An agent's approval settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecApprovalConfig {
    /// Which commands may run at all.
    pub security: Security,
    /// When to ask a person.
    pub ask: Ask,
    /// Claude Code-style deny, ask and allow rules (GoClaw's allowlist is the allow list).
    pub rules: RuleSet,
}

/// What happens to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask a person first.
    Ask {
        /// Why, for the person and the model.
        reason: String,
    },
    /// Do not run it.
    Deny {
        /// What was refused, why, and how to proceed.
        reason: String,
    },
}

impl Decision {
    /// True for [`Decision::Allow`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allow)
    }

    /// The text the model sees.
    pub fn explain(&self) -> String {
        match self {
            Self::Allow => "The command is allowed.".to_owned(),
            Self::Ask { reason } => format!("The command needs a person's approval: {reason}"),
            Self::Deny { reason } => format!("The command was not run. {reason}"),
        }
    }
}

/// What else the decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalContext<'a> {
    /// The agent's deny groups.
    pub deny_groups: &'a DenyGroups,
    /// Normalised commands a person allowed "always" for this agent.
    pub always_allowed: &'a HashSet<String>,
    /// Someone can answer an approval request (a TTY, the HTTP API, a channel).
    pub can_ask: bool,
}

/// Decides about an analysed command.
pub fn decide(
    analysis: &Analysis,
    config: &ExecApprovalConfig,
    ctx: ApprovalContext<'_>,
) -> Decision {
    let asking = ctx.can_ask && config.ask != Ask::Off;
    let hits = ctx.deny_groups.check(analysis);
    if !hits.is_empty() {
        let text = hits
            .iter()
            .map(|h| h.message.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        if ctx.can_ask && hits.iter().all(|h| h.asks_instead()) {
            return Decision::Ask { reason: text };
        }
        return Decision::Deny { reason: text };
    }
    if config.security == Security::Deny {
        return Decision::Deny {
            reason: "Shell commands are disabled for this agent (exec security is `deny`). An \
                     operator can set it to `allowlist` or `full`."
                .to_owned(),
        };
    }
    let verdict = config.rules.evaluate(analysis);
    match &verdict {
        RuleVerdict::Deny { rule, segment } => {
            return Decision::Deny {
                reason: format!(
                    "`{segment}` matches the deny rule `{rule}`. Use a different command."
                ),
            };
        }
        RuleVerdict::Unknown(why) => {
            return if asking {
                Decision::Ask {
                    reason: format!("the command could not be fully analysed ({why})."),
                }
            } else {
                Decision::Deny {
                    reason: format!(
                        "It could not be fully analysed ({why}), and commands that cannot be \
                         analysed only run with a person's approval, which is off for this \
                         agent. Rewrite it with literal command names and without `eval` or \
                         scripts built at run time, or ask an operator to set exec ask to \
                         `on-miss`."
                    ),
                }
            };
        }
        RuleVerdict::Ask { rule, segment } => {
            return ask_or_deny(
                ctx.can_ask,
                format!("`{segment}` matches the ask rule `{rule}`."),
            );
        }
        RuleVerdict::Allow | RuleVerdict::NoMatch { .. } => {}
    }
    if config.ask == Ask::Always {
        return ask_or_deny(
            ctx.can_ask,
            "exec ask is `always` for this agent.".to_owned(),
        );
    }
    let matched =
        verdict == RuleVerdict::Allow || ctx.always_allowed.contains(&analysis.normalized);
    if matched {
        return Decision::Allow;
    }
    let unmatched = match &verdict {
        RuleVerdict::NoMatch { unmatched } => unmatched.join("`, `"),
        _ => String::new(),
    };
    match (config.security, config.ask) {
        (Security::Full, Ask::Off) => Decision::Allow,
        (Security::Full, _) if analysis.segments.iter().all(is_safe) => Decision::Allow,
        (Security::Allowlist, Ask::Off) => Decision::Deny {
            reason: format!(
                "`{unmatched}` is not on this agent's allowlist, and approvals are off. Use an \
                 allowed command, or ask an operator to add a rule such as `Bash({})`.",
                unmatched.split("`, `").next().unwrap_or("")
            ),
        },
        _ => ask_or_deny(
            asking,
            format!("`{unmatched}` is not covered by this agent's rules."),
        ),
    }
}

fn ask_or_deny(can_ask: bool, reason: String) -> Decision {
    if can_ask {
        Decision::Ask { reason }
    } else {
        Decision::Deny {
            reason: format!("{reason} It needs a person's approval and no one can be asked here."),
        }
    }
}

/// Read-only commands that `full` + `on-miss` runs without asking. Unlike GoClaw's safe bins,
/// no interpreter, nothing that runs other commands (`xargs`, `find`, `sed`, `awk`), nothing
/// that reads the environment for output (`jq`, #1226), and arguments are checked (`sort -o`
/// writes, `grep -R` walks the tree, #1206).
pub fn is_safe(segment: &Segment) -> bool {
    if is_inert(segment) {
        return true;
    }
    if segment.writes_files()
        || segment.is_privileged()
        || segment.assignments.iter().any(|a| sensitive_name(&a.name))
        || !segment.wrappers.is_empty()
    {
        return false;
    }
    let Some(program) = segment.argv.first() else {
        return false;
    };
    let args = segment.args();
    let operands = || args.iter().filter(|a| !a.starts_with('-'));
    let has = |f: &dyn Fn(&str) -> bool| args.iter().any(|a| f(a));
    match program.as_str() {
        "cat" | "ls" | "pwd" | "head" | "tail" | "wc" | "echo" | "which" | "whoami" | "uname"
        | "df" | "du" | "free" | "uptime" | "stat" | "dirname" | "basename" | "realpath"
        | "readlink" | "id" | "cut" | "tr" | "diff" | "cmp" | "comm" | "nl" | "rev" | "tac"
        | "seq" | "md5sum" | "sha1sum" | "sha256sum" | "sha512sum" | "column" | "fold"
        | "paste" | "test" | "true" | "false" | "cd" => true,
        // `printf -v NAME` assigns a variable.
        "printf" => !has(&|a| a.starts_with("-v")),
        "uniq" => operands().count() <= 1,
        // Long options are resolved as getopt_long does (`--co=sh` is `--compress-program`).
        "sort" => {
            longopts::all_harmless(args, longopts::SORT, longopts::SORT_DANGEROUS)
                && !has(&|a| a.starts_with('-') && !a.starts_with("--") && a.contains(['o', 'T']))
        }
        "grep" | "egrep" | "fgrep" => {
            longopts::all_harmless(args, longopts::GREP, longopts::GREP_DANGEROUS)
                && !has(&|a| {
                    (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
                        || a == "-d"
                })
        }
        "date" => {
            longopts::all_harmless(args, longopts::DATE, &["set"])
                && !has(&|a| longopts::cluster_has(a, "s", "dfrI"))
        }
        "file" => {
            longopts::all_harmless(args, longopts::FILE, &["compile"])
                && !has(&|a| a.starts_with('-') && !a.starts_with("--") && a.contains('C'))
        }
        "hostname" => args.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::analyze;
    use super::*;

    fn decide_with(
        command: &str,
        security: Security,
        ask: Ask,
        allow: &[&str],
        can_ask: bool,
    ) -> Decision {
        let config = ExecApprovalConfig {
            security,
            ask,
            rules: RuleSet::parse::<&str>(&[], &[], allow).expect("rules"),
        };
        let groups = DenyGroups::default();
        let always = HashSet::new();
        decide(
            &analyze(command),
            &config,
            ApprovalContext {
                deny_groups: &groups,
                always_allowed: &always,
                can_ask,
            },
        )
    }

    #[test]
    fn goclaw_decision_table() {
        use Ask::*;
        use Security::*;
        let on_list = ["Bash(git status)"];
        assert!(matches!(
            decide_with("git status", Deny, Off, &on_list, true),
            Decision::Deny { .. }
        ));
        assert_eq!(
            decide_with("git status", Allowlist, Off, &on_list, true),
            Decision::Allow
        );
        assert!(matches!(
            decide_with("git status", Allowlist, Always, &on_list, true),
            Decision::Ask { .. }
        ));
        assert!(matches!(
            decide_with("git log", Allowlist, Off, &on_list, true),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide_with("git log", Allowlist, OnMiss, &on_list, true),
            Decision::Ask { .. }
        ));
        assert_eq!(
            decide_with("git log", Full, Off, &on_list, true),
            Decision::Allow
        );
        assert!(matches!(
            decide_with("git log", Full, Always, &on_list, true),
            Decision::Ask { .. }
        ));
        assert_eq!(
            decide_with("git status", Full, OnMiss, &on_list, true),
            Decision::Allow
        );
        assert_eq!(
            decide_with("ls -la", Full, OnMiss, &[], true),
            Decision::Allow
        );
        assert!(matches!(
            decide_with("git log", Full, OnMiss, &on_list, true),
            Decision::Ask { .. }
        ));
    }

    #[test]
    fn unknown_never_allows() {
        for (security, ask, can_ask) in [
            (Security::Full, Ask::Off, true),
            (Security::Full, Ask::OnMiss, false),
            (Security::Allowlist, Ask::OnMiss, true),
        ] {
            let d = decide_with("eval \"$X\"", security, ask, &["Bash"], can_ask);
            assert!(!d.is_allowed(), "{security:?} {ask:?}");
        }
        let asked = decide_with("$CMD", Security::Full, Ask::OnMiss, &[], true);
        assert!(matches!(asked, Decision::Ask { .. }));
        let denied = decide_with("$CMD", Security::Full, Ask::Off, &[], true);
        let Decision::Deny { reason } = denied else {
            panic!("unknown with ask=off must be denied");
        };
        assert!(reason.contains("on-miss"), "{reason}");
    }

    #[test]
    fn deny_groups_beat_everything() {
        let d = decide_with("rm -rf /", Security::Full, Ask::Off, &["Bash"], true);
        assert!(matches!(d, Decision::Deny { .. }));
        assert!(d.explain().contains("destructive_ops"));
        let install = decide_with(
            "npm install left-pad",
            Security::Full,
            Ask::Off,
            &["Bash"],
            true,
        );
        assert!(matches!(install, Decision::Ask { .. }));
        let install = decide_with(
            "npm install left-pad",
            Security::Full,
            Ask::Off,
            &["Bash"],
            false,
        );
        assert!(matches!(install, Decision::Deny { .. }));
    }

    #[test]
    fn safe_commands_are_checked_by_argument() {
        let safe = |c: &str| analyze(c).segments.iter().all(is_safe);
        assert!(safe("ls -la && cat README.md | wc -l"));
        assert!(!safe("sort -o out.txt in.txt"));
        assert!(!safe("grep -R secret /"));
        assert!(!safe("jq -n env"));
        assert!(!safe("cat x > y"));
        assert!(!safe("python3 -c 'print(1)'"));
        assert!(!safe("find . -name x"));
        assert!(!safe("hostname evil"));
        assert!(!safe("uniq a b"));
    }
}

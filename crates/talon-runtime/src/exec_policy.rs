//! `[exec.approvals]` and `[exec.agents.<name>]`: when shell commands run without a person.
//!
//! ```toml
//! [exec.approvals]
//! security = "full"        # deny | allowlist | full (GoClaw's default: full)
//! ask = "off"              # off | on-miss | always (GoClaw's default: off)
//! deny_groups = { package_install = false }   # GoClaw's group names; true turns one on
//! [exec.approvals.rules]   # Claude Code's rule syntax; deny, then ask, then allow
//! allow = ["Bash(npm run test:*)", "Bash(git status)"]
//! deny = ["Bash(git push --force:*)"]
//!
//! [exec.agents.ops]        # one agent's settings: modes replace, rules and groups add up
//! security = "allowlist"
//! ask = "on-miss"
//! ```

use std::collections::HashMap;

use serde::Deserialize;
use talon_exec::analysis::approval::{Ask, ExecApprovalConfig, Security};
use talon_exec::analysis::deny::DenyGroups;
use talon_exec::analysis::rules::RuleSet;
use talon_tools::runtime::approvals::AgentExecPolicy;

/// Claude Code-style rule lists.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleLists {
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    pub allow: Vec<String>,
}

/// Approval settings, for every agent or for one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalSettings {
    pub security: Option<String>,
    pub ask: Option<String>,
    pub rules: RuleLists,
    pub deny_groups: HashMap<String, bool>,
}

fn security(value: &str, key: &str) -> Result<Security, String> {
    match value {
        "deny" => Ok(Security::Deny),
        "allowlist" => Ok(Security::Allowlist),
        "full" => Ok(Security::Full),
        other => Err(format!(
            "{key}.security: unknown value {other:?}; use deny, allowlist or full"
        )),
    }
}

fn ask(value: &str, key: &str) -> Result<Ask, String> {
    match value {
        "off" => Ok(Ask::Off),
        "on-miss" => Ok(Ask::OnMiss),
        "always" => Ok(Ask::Always),
        other => Err(format!(
            "{key}.ask: unknown value {other:?}; use off, on-miss or always"
        )),
    }
}

/// `settings` applied over `base` (`key` names the section in errors).
fn apply(
    base: &AgentExecPolicy,
    base_rules: &RuleLists,
    settings: &ApprovalSettings,
    key: &str,
) -> Result<(AgentExecPolicy, RuleLists), String> {
    let mut lists = base_rules.clone();
    lists.deny.extend(settings.rules.deny.iter().cloned());
    lists.ask.extend(settings.rules.ask.iter().cloned());
    lists.allow.extend(settings.rules.allow.iter().cloned());
    let rules = RuleSet::parse(&lists.deny, &lists.ask, &lists.allow)
        .map_err(|e| format!("{key}.rules: {e}"))?;
    let deny_groups = base
        .deny_groups
        .with_overrides(&settings.deny_groups)
        .map_err(|e| format!("{key}.deny_groups: {e}"))?;
    let approval = ExecApprovalConfig {
        security: match &settings.security {
            Some(s) => security(s, key)?,
            None => base.approval.security,
        },
        ask: match &settings.ask {
            Some(a) => ask(a, key)?,
            None => base.approval.ask,
        },
        rules,
    };
    Ok((
        AgentExecPolicy {
            approval,
            deny_groups,
        },
        lists,
    ))
}

/// Every mistake found in `[exec.approvals]` and `[exec.agents.<name>]`, each naming its key.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct PolicyMistakes(pub Vec<String>);

/// The defaults and each configured agent's settings, or every mistake found.
pub fn policies(
    defaults: &ApprovalSettings,
    agents: &HashMap<String, ApprovalSettings>,
) -> Result<(AgentExecPolicy, HashMap<String, AgentExecPolicy>), PolicyMistakes> {
    let mut problems = Vec::new();
    let base = AgentExecPolicy {
        approval: ExecApprovalConfig::default(),
        deny_groups: DenyGroups::default(),
    };
    let (global, global_rules) =
        match apply(&base, &RuleLists::default(), defaults, "exec.approvals") {
            Ok(pair) => pair,
            Err(e) => {
                problems.push(e);
                (base, RuleLists::default())
            }
        };
    let mut per_agent = HashMap::new();
    for (agent, settings) in agents {
        match apply(
            &global,
            &global_rules,
            settings,
            &format!("exec.agents.{agent}"),
        ) {
            Ok((policy, _)) => {
                per_agent.insert(agent.clone(), policy);
            }
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        Ok((global, per_agent))
    } else {
        Err(PolicyMistakes(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(value: serde_json::Value) -> ApprovalSettings {
        serde_json::from_value(value).expect("valid settings")
    }

    #[test]
    fn agents_inherit_modes_and_add_rules() {
        let defaults = settings(
            serde_json::json!({"ask": "on-miss", "rules": {"allow": ["Bash(git status)"]}}),
        );
        let agents = HashMap::from([(
            "ops".to_string(),
            settings(
                serde_json::json!({"security": "allowlist", "rules": {"allow": ["Bash(make:*)"]}}),
            ),
        )]);
        let (global, agents) = policies(&defaults, &agents).expect("valid");
        assert_eq!(global.approval.security, Security::Full);
        assert_eq!(global.approval.ask, Ask::OnMiss);
        let ops = &agents["ops"];
        assert_eq!(
            (ops.approval.security, ops.approval.ask),
            (Security::Allowlist, Ask::OnMiss)
        );
        assert_eq!(ops.approval.rules.allow.len(), 2);
    }

    #[test]
    fn every_mistake_is_named_with_its_key() {
        let defaults = settings(serde_json::json!({"security": "open"}));
        let agents = HashMap::from([
            (
                "a".to_string(),
                settings(serde_json::json!({"ask": "sometimes"})),
            ),
            (
                "b".to_string(),
                settings(serde_json::json!({"deny_groups": {"no_such_group": true}})),
            ),
            (
                "c".to_string(),
                settings(serde_json::json!({"rules": {"allow": ["Bash("]}})),
            ),
        ]);
        let problems = policies(&defaults, &agents).expect_err("invalid");
        let text = problems.0.join("\n");
        for want in [
            "exec.approvals.security",
            "exec.agents.a.ask",
            "exec.agents.b.deny_groups",
            "exec.agents.c.rules",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }
}

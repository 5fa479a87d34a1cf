//! Security regressions from the outside review (issue 21), items 8, 9, 10 and 15: each test
//! names the item it guards (`h21_NN_…`) and failed before its fix.

#![allow(clippy::expect_used)]

use crate::common;
use std::collections::HashSet;

use talon_exec::analysis::{Ask, Decision, Security, analyze};
use talon_exec::credentialed::Site;

/// What the approval step decides for `command` where it may ask.
fn decision(command: &str, security: Security, ask: Ask, allow: &[&str]) -> Decision {
    common::decision(
        command,
        &common::config(security, ask, allow),
        &HashSet::new(),
        true,
    )
}

/// Bash evaluates these words as variable names with subscripts, or as arithmetic, and runs
/// the command substitution inside (`PAYLOAD` stands for it).
const SUBSCRIPT_EVALUATIONS: &[&str] = &[
    "[[ -v 'a[PAYLOAD]' ]]",
    "[[ -R 'a[PAYLOAD]' ]]",
    "test -v 'a[PAYLOAD]'",
    "[ -v 'a[PAYLOAD]' ]",
    "[[ 'a[PAYLOAD]' -eq 1 ]]",
    "declare 'a[PAYLOAD]=1'",
    "declare -a 'a[PAYLOAD]'",
    "typeset 'a[PAYLOAD]=1'",
    "f() { local 'a[PAYLOAD]=1'; }; f",
    "export 'a[PAYLOAD]=1'",
    "readonly 'a[PAYLOAD]'",
    "a=(1); unset 'a[PAYLOAD]'",
    "a=(1); unset -v \"a[PAYLOAD]\"",
    "printf -v 'a[PAYLOAD]' %s x",
    "printf -v'a[PAYLOAD]' %s x",
    "read 'a[PAYLOAD]' <<< x",
    "read -r -a 'a[PAYLOAD]' <<< x",
    "mapfile -t 'a[PAYLOAD]' < /dev/null",
    "readarray 'a[PAYLOAD]' < /dev/null",
    "getopts ab 'a[PAYLOAD]'",
    "sleep 1 & wait -p 'a[PAYLOAD]'",
    "let 'a[PAYLOAD]=1'",
    "(( 'a[PAYLOAD]' ))",
    "echo $(( 'a[PAYLOAD]' ))",
    "declare -n r='a[PAYLOAD]'; echo \"$r\"",
    "x='a[PAYLOAD]'; echo \"${!x}\"",
    "v=abc; o='a[PAYLOAD]'; echo \"${v:o}\"",
    "f() { local -n r=\"$1\"; echo \"$r\"; }; f 'a[PAYLOAD]'",
    "mapfile -t -C 'echo PAYLOAD' -c 1 lines < /dev/null",
    "a=(1); echo \"${a['b[PAYLOAD]']}\"",
    "a=(1); a['b[PAYLOAD]']=2",
    "declare a['b[PAYLOAD]']=2",
    "x=(1); echo ${x[@]: 'b[PAYLOAD]'}",
    "a=(); a+=(['b[PAYLOAD]']=1)",
    "x='a[PAYLOAD]'; unset \"$x\"",
    "x='a[PAYLOAD]'; [[ -v $x ]]",
    "x='a[PAYLOAD]'; printf -v \"$x\" %s 1",
    "x='a[PAYLOAD]'; read \"$x\" <<< 1",
];

#[test]
fn h21_08_subscript_evaluation_is_unknown() {
    for template in SUBSCRIPT_EVALUATIONS {
        let command = template.replace("PAYLOAD", "$(touch X)");
        let a = analyze(&command);
        assert!(a.is_unknown(), "{command:?} must be unknown: {a:?}");
    }
}

#[test]
fn h21_08_allowlist_refuses_subscript_payloads() {
    for template in SUBSCRIPT_EVALUATIONS {
        let command = template.replace("PAYLOAD", "$(touch X)");
        for command in [command.clone(), format!("git status; {command}")] {
            let d = decision(
                &command,
                Security::Allowlist,
                Ask::Off,
                &["Bash(git status)"],
            );
            assert!(
                matches!(d, Decision::Deny { .. }),
                "{command:?} must be refused: {d:?}"
            );
        }
    }
}

#[test]
fn h21_08_default_mode_cannot_carry_rm_past_deny_groups() {
    for template in SUBSCRIPT_EVALUATIONS {
        let command = template.replace("PAYLOAD", "$(rm -rf ~/x)");
        let d = decision(&command, Security::Full, Ask::Off, &[]);
        assert!(!d.is_allowed(), "{command:?} must not run: {d:?}");
    }
}

#[test]
fn h21_08_ordinary_names_and_data_stay_known() {
    for command in [
        "[[ -v HOME ]]",
        "declare -a list=(1 2); unset 'list[1]'",
        "export MSG='run $(date) later'",
        "printf '%s\\n' '$(not run)'",
        "read -r line <<< x",
        "echo '$(literal)' | grep -F '$('",
        "let i=i+1",
        "for ((i = 0; i < 3; i++)); do echo \"$i\"; done",
    ] {
        let a = analyze(command);
        assert!(
            !a.is_unknown(),
            "{command:?} should stay known: {:?}",
            a.unknown
        );
    }
}

#[test]
fn h21_10_abbreviated_long_options_are_not_safe() {
    for command in [
        "sort -S 1k --co=sh file",
        "sort --compress=sh file",
        "sort --ou=out.txt file",
        "sort --o out.txt file",
        "sort --te=/tmp file",
        "sort --zzz file",
        "grep --rec secret .",
        "grep --dereference secret .",
        "grep --dir=recurse secret .",
        "grep --r secret .",
        "grep --nosuch secret file",
        "date --s '2020-01-01'",
        "date -us '2020-01-01'",
        "file --comp -m magic",
        "file -C -m magic",
    ] {
        let d = decision(command, Security::Full, Ask::OnMiss, &[]);
        assert!(!d.is_allowed(), "{command:?} must not run as safe: {d:?}");
    }
    for command in [
        "sort --rev --numeric file",
        "sort -k2 -t, file",
        "grep --ignore-case --line-num x file",
        "date --utc",
        "date -d yesterday +%F",
        "file --brief README.md",
    ] {
        let d = decision(command, Security::Full, Ask::OnMiss, &[]);
        assert_eq!(d, Decision::Allow, "{command:?} is read-only");
    }
}

#[test]
fn h21_10_deny_groups_see_abbreviated_long_options() {
    for command in ["rm --r --f ./x", "rm --re ./x", "rm --fo ./x"] {
        let d = decision(command, Security::Full, Ask::Off, &[]);
        assert!(
            matches!(d, Decision::Deny { .. }),
            "{command:?} must be refused: {d:?}"
        );
    }
    let d = decision("sort --co=sh file", Security::Full, Ask::Off, &[]);
    assert!(matches!(d, Decision::Deny { .. }), "{d:?}");
}

#[test]
fn h21_15_deny_group_evasions_are_refused() {
    for command in [
        "echo -rf ./x | xargs rm",
        "printf '%s\\n' -rf ./x | xargs -n2 rm",
        "echo -rf | xargs -I{} rm {} ./x",
        "find dir -delete",
        "find . -name '*.o' -delete",
        "find dir -exec rm {} +",
        "find dir -type f -execdir rm {} \\;",
        "find dir -ok rm {} \\;",
        "find . -fprint ~/.bashrc",
        "printf 'rm -rf x' > s.sh; sh s.sh",
        "printf 'rm -rf x' > s.sh && bash ./s.sh",
        "echo 'rm -rf x' > s.sh; . ./s.sh",
        "cat > s.sh <<'EOF'\nrm -rf x\nEOF\nsource s.sh",
        "echo 'rm -rf x' > s.sh; chmod +x s.sh; ./s.sh",
        "sed -i 's/^/rm -rf x #/' s.sh; sh s.sh",
        "perl -pi -e 's/^/rm -rf x #/' s.sh; sh s.sh",
        "cat /proc/self/env*",
        "cat /proc/*/environ",
        "cat /proc/self/../self/environ",
        "tr '\\0' '\\n' < /proc/self/e?viron",
    ] {
        let d = decision(command, Security::Full, Ask::Off, &[]);
        assert!(
            matches!(d, Decision::Deny { .. }),
            "{command:?} must be refused in the default mode: {d:?}"
        );
    }
}

#[test]
fn h21_15_ordinary_uses_still_run() {
    for command in [
        "find . -name '*.rs' | xargs grep -n TODO",
        "find . -name '*.sh' | xargs chmod +x",
        "find . -name '*.rs' -print",
        "sh build.sh > build.log",
        "cat /proc/cpuinfo",
        "du -sh /*",
        "ls src/*.rs",
        // Reading a script is not writing it: sed and perl write only in place.
        "perl get.pl http://localhost/hi",
        "sed -n 1p run.sh; sh run.sh",
        "python3 tool.py input.txt > out.txt",
    ] {
        let d = decision(command, Security::Full, Ask::Off, &[]);
        assert_eq!(d, Decision::Allow, "{command:?}");
    }
}

/// A credential for `name` backed by an executable script, with its preset's patterns.
fn credential(name: &str) -> (tempfile::TempDir, talon_exec::credentialed::Credential) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, "#!/bin/sh\nenv\n").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let preset = talon_exec::credentialed::preset(name).expect("preset");
    let credential = talon_exec::credentialed::Credential {
        binary_name: name.into(),
        binary_path: path,
        env: vec![("SECRET".into(), "s3cret".into())],
        deny_args: preset.deny_args.iter().map(|s| s.to_string()).collect(),
        deny_verbose: preset.deny_verbose.iter().map(|s| s.to_string()).collect(),
        destinations: Vec::new(),
    };
    (dir, credential)
}

#[test]
fn h21_09_credentialed_configuration_injection_is_refused() {
    use talon_exec::credentialed::Refusal;
    let cases: &[(&str, &[&str])] = &[
        (
            "git",
            &[
                "git -c 'alias.y=!env | base64' y",
                "git -c core.pager='env|base64' log",
                "git --config-env=core.pager=SECRET log",
                "git --exec-path=/tmp/x status",
                "git -C /tmp/evil status",
                "git --git-dir=/tmp/evil/.git log",
                "git fetch --upload-pack='env >&2' origin",
                "git ls-remote -u 'sh -c env' origin",
                "git push --receive-pack=x origin",
                "git clone 'ext::sh -c env' x",
                "git clone --template=/tmp/t https://example.com/r",
                "git config --list",
                "git rebase --exec env main",
                "git submodule foreach env",
            ],
        ),
        (
            "gh",
            &["gh alias set y '!env'", "gh config set pager 'env'"],
        ),
        ("kubectl", &["kubectl --kubeconfig=/tmp/k get pods"]),
        ("aws", &["aws configure get aws_secret_access_key"]),
        ("gcloud", &["gcloud config set proxy/address evil.example"]),
        ("terraform", &["terraform -chdir=/tmp/x apply"]),
        (
            "psql",
            &["psql -c '\\! env'", "psql -o '|sh' -c 'select 1'"],
        ),
    ];
    for (name, commands) in cases {
        let (_dir, cred) = credential(name);
        for command in *commands {
            let err = cred.plan(command, &Site::default()).expect_err(command);
            assert!(
                matches!(err, Refusal::Injection { .. } | Refusal::DeniedArgs { .. }),
                "{command}: {err}"
            );
            assert!(err.to_string().contains("refused") || err.to_string().contains("deny"));
        }
    }
    let (_dir, git) = credential("git");
    let err = git
        .plan("git -c 'alias.y=!env | base64' y", &Site::default())
        .expect_err("alias");
    let text = err.to_string();
    assert!(
        text.contains("-c") && text.contains("configuration"),
        "{text}"
    );
    // Environment a command sets (`GIT_*`, `GH_PAGER`) never reaches a credentialed binary.
    for command in [
        "GIT_CONFIG_PARAMETERS=\"'core.pager'='env'\" git log",
        "env GIT_EXTERNAL_DIFF=env git diff",
    ] {
        let err = git.plan(command, &Site::default()).expect_err(command);
        assert!(matches!(err, Refusal::Shell { .. }), "{command}: {err}");
    }
    for fine in [
        "git status",
        "git push -u origin main",
        "git log -c --oneline",
    ] {
        assert!(git.plan(fine, &Site::default()).is_ok(), "{fine}");
    }
}

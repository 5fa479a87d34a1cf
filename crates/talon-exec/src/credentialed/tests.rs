#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use super::*;
use crate::{SandboxMode, ShellConfig};

const SCRIPT: &str =
    "#!/bin/sh\necho \"token=$GH_TOKEN\"\necho \"args=$*\"\nenv | cut -d= -f1 | sort\n";

/// A directory holding an executable `gh` script, and the credential for it.
fn fake_gh() -> (tempfile::TempDir, Credential) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gh");
    std::fs::write(&path, SCRIPT).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gh = preset("gh").unwrap();
    let credential = Credential {
        binary_name: "gh".into(),
        binary_path: path,
        env: vec![("GH_TOKEN".into(), "ghp_unit_test_token".into())],
        deny_args: gh.deny_args.iter().map(|s| s.to_string()).collect(),
        deny_verbose: gh.deny_verbose.iter().map(|s| s.to_string()).collect(),
        destinations: Vec::new(),
    };
    (dir, credential)
}

fn args_of(plan: &Plan) -> Vec<String> {
    plan.argv[1..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn names_normalise_and_relative_paths_are_refused() {
    assert_eq!(normalize_binary_name("/usr/bin/gh").unwrap(), "gh");
    assert_eq!(normalize_binary_name("GH").unwrap(), "gh");
    assert_eq!(normalize_binary_name("gh").unwrap(), "gh");
    for relative in ["./gh", "../x/gh", "bin/gh"] {
        let err = normalize_binary_name(relative).expect_err(relative);
        assert!(matches!(err, Refusal::Path(_)), "{relative}: {err}");
        assert!(err.to_string().contains("path verification"), "{err}");
    }
    assert_eq!(binary_key("./GH").as_deref(), Some("gh"));
    assert_eq!(binary_key("/usr/bin/"), None);
}

#[test]
fn a_plain_command_runs_the_configured_binary_with_the_parsed_words() {
    let (_dir, cred) = fake_gh();
    let plan = cred
        .plan(
            r#"gh api 'repos/a/b?x=1;y' --jq ".a | .b" "two words""#,
            &Site::default(),
        )
        .unwrap();
    assert_eq!(plan.argv[0], cred.binary_path.as_os_str());
    assert_eq!(
        args_of(&plan),
        vec!["api", "repos/a/b?x=1;y", "--jq", ".a | .b", "two words"],
        "quoted operators are data, not syntax"
    );
    // The exact configured path and a different case of the name are the same binary.
    let exact = format!("{} api user", cred.binary_path.display());
    assert_eq!(
        args_of(&cred.plan(&exact, &Site::default()).unwrap()),
        vec!["api", "user"]
    );
    assert!(cred.plan("GH api user", &Site::default()).is_ok());
}

#[test]
fn the_permission_steps_analysis_plans_as_a_fresh_parse_does() {
    // exec hands over the analysis of the command as the model wrote it (not trimmed).
    let (_dir, cred) = fake_gh();
    for command in [
        "  gh api user \n",
        "\tgh api 'a b'",
        "gh api user; gh x",
        " true && gh api",
        "gh $X",
    ] {
        let carried = crate::analysis::analyze(command);
        let planned = cred.plan_analysed(command, &carried, &Site::default());
        match cred.plan(command, &Site::default()) {
            Ok(fresh) => assert_eq!(args_of(&planned.unwrap()), args_of(&fresh), "{command:?}"),
            Err(fresh) => assert_eq!(planned.unwrap_err(), fresh, "{command:?}"),
        }
        assert_eq!(
            programs_in(command, &carried),
            programs(command),
            "{command:?}"
        );
    }
}

#[test]
fn spoofed_paths_fail_path_verification() {
    let (dir, cred) = fake_gh();
    let other = dir.path().join("sub");
    std::fs::create_dir(&other).unwrap();
    for command in [
        "./gh api user".to_string(),
        "../x/gh api user".to_string(),
        format!("{}/gh api user", other.display()),
        "/usr/local/bin/gh api user".to_string(),
    ] {
        let err = cred.plan(&command, &Site::default()).expect_err(&command);
        assert!(matches!(err, Refusal::Path(_)), "{command}: {err}");
    }
    // A configured binary the workspace could replace is refused.
    let err = cred
        .plan(
            "gh api user",
            &Site {
                writable_roots: &[dir.path().to_path_buf()],
                ..Site::default()
            },
        )
        .expect_err("inside a writable root");
    assert!(err.to_string().contains("writable directory"), "{err}");
    // A configured path that is missing, not executable or named otherwise is refused.
    let mut missing = cred.clone();
    missing.binary_path = dir.path().join("nope/gh");
    assert!(matches!(
        missing.plan("gh x", &Site::default()),
        Err(Refusal::Path(_))
    ));
    let plain = dir.path().join("sub/gh");
    std::fs::write(&plain, "not a program").unwrap();
    let mut not_exec = cred.clone();
    not_exec.binary_path = plain;
    let err = not_exec
        .plan("gh x", &Site::default())
        .expect_err("not executable");
    assert!(err.to_string().contains("not an executable file"), "{err}");
    let mut renamed = cred.clone();
    renamed.binary_name = "hub".into();
    let err = renamed
        .plan("hub x", &Site::default())
        .expect_err("file name differs");
    assert!(err.to_string().contains("does not name"), "{err}");
}

#[test]
fn shell_syntax_is_refused_by_parsing() {
    let (_dir, cred) = fake_gh();
    for command in [
        "gh repo list; rm -rf /",
        "gh $(id)",
        "gh `id`",
        "gh > f",
        "gh api user < input",
        "gh api user | head",
        "gh api user && true",
        "true && gh api user",
        "gh api user || true",
        "gh api user &",
        "(gh api user)",
        "{ gh api user; }",
        "GH_TOKEN=other gh api user",
        "env X=1 gh api user",
        "timeout 5 gh api user",
        "sh -c 'gh api user'",
        "gh api $HOME",
        "gh api ${HOME}",
        "gh api *.txt",
        "gh api ~/x",
        "gh api user # comment",
        "gh api user\nrm -rf /",
    ] {
        let err = cred.plan(command, &Site::default()).expect_err(command);
        assert!(matches!(err, Refusal::Shell { .. }), "{command:?}: {err}");
        assert!(
            err.to_string().contains("without a shell"),
            "the refusal explains why: {err}"
        );
    }
    assert!(matches!(
        cred.plan("  ", &Site::default()),
        Err(Refusal::Command(_))
    ));
    assert!(matches!(
        cred.plan("gh\0x", &Site::default()),
        Err(Refusal::Command(_))
    ));
}

#[test]
fn everyday_cli_arguments_pass() {
    let (_dir, cred) = fake_gh();
    for (command, args) in [
        (
            "gh api repos/{owner}/{repo}/pulls",
            vec!["api", "repos/{owner}/{repo}/pulls"],
        ),
        (
            "gh issue list --json number,title -L 5",
            vec!["issue", "list", "--json", "number,title", "-L", "5"],
        ),
        (
            "gh pr create --title 'Fix: a|b' --body \"x && y\"",
            vec!["pr", "create", "--title", "Fix: a|b", "--body", "x && y"],
        ),
        (
            "gh api -f key=value user",
            vec!["api", "-f", "key=value", "user"],
        ),
        (
            "gh api user \\\n  --jq .login",
            vec!["api", "user", "--jq", ".login"],
        ),
    ] {
        let plan = cred
            .plan(command, &Site::default())
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        assert_eq!(args_of(&plan), args, "{command}");
    }
}

#[test]
fn quoted_tildes_are_data() {
    let (_dir, cred) = fake_gh();
    let plan = cred
        .plan(r#"gh api '~/x' "~y" a~b"#, &Site::default())
        .unwrap();
    assert_eq!(args_of(&plan), vec!["api", "~/x", "~y", "a~b"]);
    assert!(starts_word_with_tilde("gh api ~"));
    assert!(starts_word_with_tilde("gh 'a b' ~/x"));
    assert!(!starts_word_with_tilde(r"gh \~x"));
}

#[test]
fn deny_args_and_deny_verbose() {
    let (_dir, cred) = fake_gh();
    for command in [
        "gh auth token",
        "gh auth  status",
        "gh repo delete me/x",
        "gh secret list",
        "gh ssh-key list",
    ] {
        let err = cred.plan(command, &Site::default()).expect_err(command);
        assert!(
            matches!(err, Refusal::DeniedArgs { .. }),
            "{command}: {err}"
        );
    }
    for command in ["gh api -v user", "gh api -vv user", "gh api --verbose user"] {
        let err = cred.plan(command, &Site::default()).expect_err(command);
        assert!(
            matches!(err, Refusal::DeniedVerbose { .. }),
            "{command}: {err}"
        );
    }
    for command in ["gh --version", "gh api user", "gh repo view me/auth"] {
        assert!(cred.plan(command, &Site::default()).is_ok(), "{command}");
    }
}

#[test]
fn invalid_patterns_fail_closed() {
    let err = check_patterns("gh", &["(unclosed".into()], &[]).expect_err("invalid");
    assert!(matches!(err, Refusal::InvalidPattern { .. }), "{err}");
    let err = check_patterns("gh", &[], &["[z-a]".into()]).expect_err("invalid");
    assert!(matches!(err, Refusal::InvalidPattern { .. }), "{err}");
    assert!(check_patterns("gh", &[r"auth\s+".into()], &["-v".into()]).is_ok());

    let (_dir, mut cred) = fake_gh();
    cred.deny_args.push("(unclosed".into());
    let err = cred
        .plan("gh api user", &Site::default())
        .expect_err("fails closed");
    assert!(matches!(err, Refusal::InvalidPattern { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("refused until an operator fixes it"),
        "{err}"
    );
    let (_dir, mut cred) = fake_gh();
    cred.deny_verbose = vec!["(".into()];
    assert!(matches!(
        cred.plan("gh api user", &Site::default()),
        Err(Refusal::InvalidPattern { .. })
    ));
}

#[test]
fn presets_match_goclaw() {
    let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        ["gh", "gcloud", "aws", "kubectl", "terraform", "git", "psql"]
    );
    let timeouts: Vec<u64> = PRESETS.iter().map(|p| p.timeout_secs).collect();
    assert_eq!(timeouts, [30, 120, 60, 60, 300, 300, 60]);
    for p in PRESETS {
        let deny_args: Vec<String> = p.deny_args.iter().map(|s| s.to_string()).collect();
        let deny_verbose: Vec<String> = p.deny_verbose.iter().map(|s| s.to_string()).collect();
        check_patterns(p.name, &deny_args, &deny_verbose).unwrap();
    }
    let denied = |name: &str, args: &[&str]| {
        let p = preset(name).unwrap();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let deny_args: Vec<String> = p.deny_args.iter().map(|s| s.to_string()).collect();
        let deny_verbose: Vec<String> = p.deny_verbose.iter().map(|s| s.to_string()).collect();
        check_args(name, &args, &deny_args, &deny_verbose).is_err()
    };
    assert!(denied("aws", &["sts", "assume-role"]));
    assert!(denied("aws", &["s3", "ls", "--debug"]));
    assert!(!denied("aws", &["s3", "ls"]));
    assert!(denied("kubectl", &["delete", "namespace", "prod"]));
    assert!(!denied("kubectl", &["get", "pods"]));
    assert!(denied("terraform", &["apply", "-destroy"]));
    assert!(denied("git", &["-c", "core.sshCommand=evil", "fetch"]));
    assert!(denied("git", &["config", "--global", "user.name", "x"]));
    assert!(!denied("git", &["fetch", "origin"]));
    assert!(
        !denied("psql", &["-c", "drop table x"]),
        "case-sensitive as in GoClaw"
    );
    assert!(denied("psql", &["-c", "DROP TABLE x"]));
    assert!(denied("psql", &["-c", r"\! id"]));
    assert!(denied("gcloud", &["compute", "list", "--log-http"]));
    assert!(preset("rapidapi").is_none());
}

#[test]
fn routing_sees_every_command() {
    assert_eq!(programs("gh api user"), vec!["gh"]);
    assert!(programs("true && gh api user").contains(&"gh".to_string()));
    assert!(programs("cd x; /usr/bin/GH api").contains(&"gh".to_string()));
    assert!(programs("./gh api").contains(&"gh".to_string()));
    assert!(programs("env A=1 gh api").contains(&"gh".to_string()));
    assert!(!programs("echo gh").contains(&"gh".to_string()));
    assert!(!programs("ls | grep gh").contains(&"gh".to_string()));
}

#[test]
fn the_environment_is_minimal() {
    let (_dir, cred) = fake_gh();
    let plan = cred.plan("gh api user", &Site::default()).unwrap();
    let names: Vec<&str> = plan.env.iter().map(|(n, _)| n.as_str()).collect();
    for name in &names {
        assert!(
            ["PATH", "HOME", "USER", "LANG", "GH_TOKEN"].contains(name),
            "{name} must not reach the binary"
        );
    }
    assert!(names.contains(&"PATH") && names.contains(&"HOME") && names.contains(&"USER"));
    assert!(
        plan.env
            .iter()
            .any(|(n, v)| n == "GH_TOKEN" && v == "ghp_unit_test_token")
    );
}

#[tokio::test]
async fn it_runs_directly_with_the_credentials() {
    let (dir, cred) = fake_gh();
    let ws = tempfile::tempdir().unwrap();
    let shell = Shell::new(ShellConfig {
        mode: SandboxMode::Off,
        ..ShellConfig::default()
    });
    let outcome = run_as_ops(&shell, &cred, "gh api 'a b' c", ws.path()).await;
    assert!(outcome.success(), "{:?}", outcome.stderr.text());
    let out = outcome.stdout.text();
    assert!(out.contains("token=ghp_unit_test_token\n"), "{out}");
    assert!(out.contains("args=api a b c\n"), "{out}");
    let vars: Vec<&str> = out.lines().skip(2).collect();
    assert!(
        vars.contains(&"GH_TOKEN") && vars.contains(&"PATH"),
        "{vars:?}"
    );
    assert!(
        !vars
            .iter()
            .any(|v| v.starts_with("CARGO") || v.starts_with("TALON")),
        "nothing of Talon's environment: {vars:?}"
    );
    assert!(network_note(&shell, Some("ops")).is_none(), "not sandboxed");
    drop(dir);
}

#[tokio::test]
async fn h21_sandbox_from_tmp_a_credentialed_binary_there_runs_sandboxed() {
    // `fake_gh` lives under /tmp, which the sandbox replaces with a private one.
    let (dir, cred) = fake_gh();
    assert!(
        cred.binary_path.starts_with("/tmp"),
        "{:?}",
        cred.binary_path
    );
    let ws = tempfile::tempdir().unwrap();
    let shell = Shell::new(ShellConfig::default());
    let outcome = run_as_ops(&shell, &cred, "gh api x", ws.path()).await;
    assert!(outcome.success(), "{:?}", outcome.stderr.text());
    assert!(outcome.stdout.text().contains("args=api x\n"));
    assert!(network_note(&shell, Some("ops")).is_some(), "sandboxed");
    drop(dir);
}

#[test]
fn the_network_note_appears_only_when_the_sandbox_has_none() {
    let shell = Shell::new(ShellConfig::default());
    assert!(
        network_note(&shell, Some("ops"))
            .unwrap()
            .contains("has no network")
    );
    let shell = Shell::new(ShellConfig {
        mode: SandboxMode::NonMain,
        ..ShellConfig::default()
    });
    assert!(network_note(&shell, Some("main")).is_none());
}

/// Plans `command` for `cred` and runs it in `ws` as agent `ops`.
async fn run_as_ops(
    shell: &Shell,
    cred: &Credential,
    command: &str,
    ws: &std::path::Path,
) -> crate::Outcome {
    let roots = writable_roots(shell, ws);
    let site = Site {
        writable_roots: &roots,
        workspace: Some(ws),
        cwd: Some(ws),
    };
    let plan = cred.plan(command, &site).unwrap();
    let at = Placement {
        cwd: ws,
        workspace: ws,
        agent: Some("ops"),
        timeout: Duration::from_secs(10),
    };
    run(shell, &plan, &at, &CancellationToken::new())
        .await
        .unwrap()
}

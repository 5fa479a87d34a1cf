//! `talon cli-credentials` end to end: register a fake `gh` with a token, run it through
//! `talon tool call exec` as the granted agent, and take it away again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use support::command;

/// Matches no built-in scrub pattern: only the stored credential list can redact it.
const TOKEN: &str = "zq7-plain-looking-value-9902";

fn run(home: &Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = command(home)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn add_list_run_revoke_remove() {
    // Under the target directory: the sandbox's private /tmp would hide a binary kept in /tmp.
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = std::fs::canonicalize(home.path()).unwrap();
    let (bin, ws) = (home.join("bin"), home.join("ws"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let gh = bin.join("gh");
    executable(
        &gh,
        &format!(
            "#!/bin/sh\nif [ \"$GH_TOKEN\" = \"{TOKEN}\" ]; then echo token-ok; fi\necho \"token=$GH_TOKEN args=$*\"\n"
        ),
    );
    executable(&bin.join("aws"), "#!/bin/sh\n");
    let gh_path = gh.display().to_string();

    assert_eq!(run(&home, &["agents", "create", "ops"], None).0, 0);
    let (code, stdout, stderr) = run(
        &home,
        &[
            "cli-credentials",
            "add",
            "gh",
            "--path",
            &gh_path,
            "--env-from-stdin",
            "--grant",
            "ops",
        ],
        Some(&format!("# GitHub\nGH_TOKEN={TOKEN}\n")),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("registered gh") && stdout.contains("preset gh"),
        "{stdout}"
    );
    assert!(stdout.contains("gh: granted to ops"), "{stdout}");
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));

    // Refusals at add time: an existing name, a relative path, an invalid pattern.
    let (code, _, stderr) = run(
        &home,
        &["cli-credentials", "add", "gh", "--path", &gh_path],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--replace"), "{stderr}");
    let (code, _, stderr) = run(&home, &["cli-credentials", "add", "./gh"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("path verification"), "{stderr}");
    let aws = bin.join("aws").display().to_string();
    let (code, _, stderr) = run(
        &home,
        &[
            "cli-credentials",
            "add",
            "aws",
            "--path",
            &aws,
            "--deny-arg",
            "(oops",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("not a valid regular expression"),
        "{stderr}"
    );

    let (code, stdout, _) = run(&home, &["cli-credentials", "list"], None);
    assert_eq!(code, 0);
    assert!(stdout.contains(&format!("gh\t{gh_path}")), "{stdout}");
    assert!(stdout.contains("env: GH_TOKEN"), "{stdout}");
    assert!(stdout.contains("granted to: ops"), "{stdout}");
    assert!(stdout.contains("preset: gh; timeout 30s"), "{stdout}");
    assert!(
        !stdout.contains(TOKEN) && !stdout.contains("aws"),
        "{stdout}"
    );
    let (_, stdout, _) = run(&home, &["cli-credentials", "list", "--json"], None);
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list[0]["env"], serde_json::json!(["GH_TOKEN"]));
    assert_eq!(list[0]["grants"], serde_json::json!(["ops"]));

    // exec as the granted agent runs the binary with its token, redacted from the result.
    let ws_arg = ws.display().to_string();
    let call = |agent: &str, workspace: &str| {
        run(
            &home,
            &[
                "tool",
                "call",
                "exec",
                "--agent",
                agent,
                "--workspace",
                workspace,
                "--args",
                r#"{"command": "gh api user"}"#,
            ],
            None,
        )
    };
    let (code, stdout, stderr) = call("ops", &ws_arg);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("token-ok\n"), "{stdout}");
    assert!(
        stdout.contains("token=[REDACTED] args=api user"),
        "{stdout}"
    );
    assert!(!stdout.contains(TOKEN));
    // With the binary inside the workspace, a command could replace it: refused.
    let (code, _, stderr) = call("ops", &home.display().to_string());
    assert_eq!(code, 1);
    assert!(stderr.contains("writable directory"), "{stderr}");

    // Revoked: exec is an ordinary shell command again (no gh on PATH, no token).
    let (code, stdout, _) = run(&home, &["cli-credentials", "revoke", "gh", "ops"], None);
    assert_eq!((code, stdout.trim()), (0, "gh: revoked from ops"));
    let (code, stdout, stderr) = call("ops", &ws_arg);
    assert_ne!(code, 0);
    assert!(!stdout.contains("token-ok") && !stderr.contains("token-ok"));
    let (code, _, _) = run(&home, &["cli-credentials", "grant", "gh", "ops"], None);
    assert_eq!(code, 0);

    let (code, stdout, _) = run(&home, &["cli-credentials", "remove", "gh"], None);
    assert_eq!(code, 0, "{stdout}");
    let (_, stdout, _) = run(&home, &["cli-credentials", "list"], None);
    assert!(stdout.contains("no CLIs registered"), "{stdout}");
    let (_, stdout, _) = run(&home, &["secrets", "list"], None);
    assert!(
        !stdout.contains("cli-credential/gh"),
        "the secret went too: {stdout}"
    );
    let (code, _, stderr) = run(&home, &["cli-credentials", "remove", "gh"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("not registered"), "{stderr}");
}

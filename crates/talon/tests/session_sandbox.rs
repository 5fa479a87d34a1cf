//! Session sandboxes for real: one bubblewrap sandbox per session, its init being this `talon`
//! binary, with the same confinement as a sandbox per call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use talon_exec::{Ending, Outcome, Request, Shell, ShellConfig};
use tokio_util::sync::CancellationToken;

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    shell: Shell,
}

fn env() -> Env {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let shell = Shell::new(ShellConfig {
        helper: Some(PathBuf::from(env!("CARGO_BIN_EXE_talon"))),
        ..ShellConfig::default()
    });
    Env {
        _dir: dir,
        ws,
        shell,
    }
}

impl Env {
    async fn sh_in(&self, session: &str, command: &str, timeout: Duration) -> Outcome {
        let request = Request {
            shell: Path::new("/bin/sh"),
            command,
            cwd: &self.ws,
            workspace: &self.ws,
            agent: None,
            session: Some(session),
            timeout,
            env: &[],
        };
        self.shell
            .run(&request, &CancellationToken::new())
            .await
            .expect("runs")
    }

    async fn ok(&self, session: &str, command: &str) -> String {
        let out = self.sh_in(session, command, Duration::from_secs(20)).await;
        assert!(out.success(), "{command}: {out:?}");
        String::from_utf8_lossy(&out.stdout.bytes).into_owned()
    }
}

#[tokio::test]
async fn a_session_keeps_one_sandbox_and_sessions_do_not_share() {
    let e = env();
    // The sandbox's /tmp is private: what one call leaves there the next call of the same
    // session sees, and another session does not.
    e.ok("a", "echo kept > /tmp/marker").await;
    assert_eq!(e.ok("a", "cat /tmp/marker").await, "kept\n");
    let other = e
        .sh_in("b", "cat /tmp/marker", Duration::from_secs(20))
        .await;
    assert_eq!(other.ending, Ending::Exited(1), "{other:?}");
    // Still confined: the workspace is writable, the rest read-only, no network.
    e.ok("a", "echo hi > inside.txt").await;
    assert_eq!(
        std::fs::read_to_string(e.ws.join("inside.txt")).unwrap(),
        "hi\n"
    );
    let out = e
        .sh_in("a", "echo x > /etc/talon-escape", Duration::from_secs(20))
        .await;
    assert!(!out.success());
    let seccomp = e.ok("a", "grep Seccomp: /proc/self/status").await;
    assert!(seccomp.contains('2'), "{seccomp}");
    let out = e.sh_in("a", "exit 7", Duration::from_secs(20)).await;
    assert_eq!(out.ending, Ending::Exited(7));
    let out = e
        .sh_in("a", "echo out; echo err >&2", Duration::from_secs(20))
        .await;
    assert_eq!(
        (out.stdout.bytes.as_slice(), out.stderr.bytes.as_slice()),
        (&b"out\n"[..], &b"err\n"[..])
    );
}

#[tokio::test]
async fn timeouts_and_escaped_processes_are_killed() {
    let e = env();
    let out = e.sh_in("s", "sleep 30", Duration::from_millis(300)).await;
    assert_eq!(out.ending, Ending::TimedOut);
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    // One that ignores SIGTERM gets SIGKILL after the grace period.
    let out = e
        .sh_in(
            "s",
            "trap '' TERM; sleep 30; sleep 30",
            Duration::from_millis(200),
        )
        .await;
    assert_eq!(out.ending, Ending::TimedOut);
    assert!(
        out.elapsed >= Duration::from_secs(3) && out.elapsed < Duration::from_secs(10),
        "{:?}",
        out.elapsed
    );
    // The sandbox is still usable afterwards.
    assert_eq!(e.ok("s", "echo still").await, "still\n");
    // A process that left the command's group with setsid does not outlive the command.
    let count =
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c '^sleep 3[01]'";
    let during = e
        .ok(
            "s",
            &format!("setsid sh -c 'sleep 30' > /dev/null 2>&1 & (sh -c 'sleep 31' &); sleep 0.2; {count}"),
        )
        .await;
    assert_eq!(during.trim(), "2", "both were running during the command");
    let after = e.sh_in("s", count, Duration::from_secs(20)).await;
    assert_eq!(
        String::from_utf8_lossy(&after.stdout.bytes).trim(),
        "0",
        "strays survived"
    );
}

#[tokio::test]
async fn protected_paths_created_between_calls_are_protected_at_once() {
    let e = env();
    e.ok("s", "true").await;
    // A file tool (on the host) creates .git/hooks; the next command must not write there.
    std::fs::create_dir_all(e.ws.join(".git/hooks")).unwrap();
    let out = e
        .sh_in(
            "s",
            "echo evil > .git/hooks/pre-commit",
            Duration::from_secs(20),
        )
        .await;
    assert!(!out.success(), "{out:?}");
    assert!(!e.ws.join(".git/hooks/pre-commit").exists());
    // No placeholder files sit in the workspace between calls...
    assert!(!e.ws.join(".mcp.json").exists());
    // ...and what a command creates under a protected name is removed when it ends, with a note.
    let out = e
        .sh_in(
            "s",
            "echo '{}' > .mcp.json; mkdir -p .vscode; echo x > .vscode/tasks.json",
            Duration::from_secs(20),
        )
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr.bytes).into_owned();
    assert!(
        stderr.contains(".mcp.json: sandboxed commands may not create it"),
        "{stderr}"
    );
    assert!(
        stderr.contains(".vscode: sandboxed commands may not create it"),
        "{stderr}"
    );
    assert!(!e.ws.join(".mcp.json").exists());
    assert!(!e.ws.join(".vscode").exists());
    // A symlink planted under a protected name is removed, not followed.
    let target = e.ws.join("keep.txt");
    std::fs::write(&target, "keep").unwrap();
    e.ok("s", "ln -s keep.txt .profile").await;
    assert!(std::fs::symlink_metadata(e.ws.join(".profile")).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

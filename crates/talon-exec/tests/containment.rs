//! Containment under the default backend (bubblewrap), for real: what a sandboxed command can
//! and cannot touch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use talon_exec::{Ending, Outcome, Request, Shell, ShellConfig};
use tokio_util::sync::CancellationToken;

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    data: PathBuf,
    shell: Shell,
}

/// A workspace, a directory beside it and a data directory. Under `/tmp` (the sandbox's private
/// `/tmp` must not hide a workspace there) or under the target directory (so the directory
/// beside the workspace is visible, read-only, as the host's files are).
fn env_in(base: Option<&Path>) -> Env {
    let dir = match base {
        Some(base) => tempfile::tempdir_in(base).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, outside, data) = (root.join("ws"), root.join("outside"), root.join("data"));
    for d in [&ws, &outside, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(data.join("talon.db"), "state").unwrap();
    std::fs::write(outside.join("note.txt"), "readable").unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    let shell = Shell::new(ShellConfig {
        hidden: vec![data.clone()],
        ..ShellConfig::default()
    });
    Env {
        _dir: dir,
        ws,
        outside,
        data,
        shell,
    }
}

fn env() -> Env {
    env_in(None)
}

impl Env {
    async fn sh(&self, command: &str, timeout: Duration) -> Outcome {
        let request = Request {
            shell: Path::new("/bin/bash"),
            command,
            cwd: &self.ws,
            workspace: &self.ws,
            agent: None,
            timeout,
        };
        self.shell
            .run(&request, &CancellationToken::new())
            .await
            .expect("the sandbox starts")
    }

    async fn ok(&self, command: &str) -> String {
        let out = self.sh(command, Duration::from_secs(20)).await;
        assert!(out.success(), "{command}: {out:?}");
        String::from_utf8_lossy(&out.stdout.bytes).into_owned()
    }

    async fn fails(&self, command: &str) -> String {
        let out = self.sh(command, Duration::from_secs(20)).await;
        assert!(!out.success(), "{command} should fail: {out:?}");
        String::from_utf8_lossy(&out.stderr.bytes).into_owned()
    }
}

#[tokio::test]
async fn writes_stay_in_the_workspace_and_out_of_protected_paths() {
    let e = env_in(Some(Path::new(env!("CARGO_TARGET_TMPDIR"))));
    e.ok("echo hi > made.txt && mkdir -p sub && echo x > sub/y")
        .await;
    assert_eq!(
        std::fs::read_to_string(e.ws.join("made.txt")).unwrap(),
        "hi\n"
    );
    // Reading elsewhere is allowed; writing is not.
    assert_eq!(
        e.ok(&format!("cat {}", e.outside.join("note.txt").display()))
            .await,
        "readable"
    );
    let err = e
        .fails(&format!("echo x > {}", e.outside.join("new.txt").display()))
        .await;
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(!e.outside.join("new.txt").exists());
    e.fails("echo evil > .git/hooks/pre-commit").await;
    e.fails("echo '[alias]' >> .git/config").await;
    e.fails("echo '{}' > .mcp.json").await;
    e.fails("mkdir -p .claude/commands").await;
    e.fails("echo x > ~/.bashrc_from_sandbox").await;
    assert!(!e.ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(e.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // The empty files that pinned missing names are gone afterwards.
    assert!(!e.ws.join(".mcp.json").exists());
    assert!(!e.ws.join(".claude").exists());
    assert!(!e.ws.join(".bashrc").exists());
}

#[tokio::test]
async fn talon_state_is_hidden_and_tmp_is_private() {
    let e = env();
    let listing = e.ok(&format!("ls -A {}", e.data.display())).await;
    assert_eq!(listing, "", "the data directory looks empty");
    e.fails(&format!("cat {}", e.data.join("talon.db").display()))
        .await;
    e.ok("echo scratch > /tmp/talon-sandbox-probe").await;
    assert!(!Path::new("/tmp/talon-sandbox-probe").exists());
}

#[tokio::test]
async fn no_network_and_no_host_processes() {
    let e = env();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = e
        .fails(&format!("echo hi > /dev/tcp/127.0.0.1/{port}"))
        .await;
    assert!(
        err.contains("Connection refused") || err.contains("Network is unreachable"),
        "{err}"
    );
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing reached the host");
    let pids = e.ok("ls /proc | grep -E '^[0-9]+$' | wc -l").await;
    let count: usize = pids.trim().parse().unwrap();
    assert!(count < 10, "only the sandbox's own processes: {count}");
    let me = std::process::id().to_string();
    let seen = e.ok("ls /proc").await;
    assert!(
        !seen.lines().any(|l| l == me),
        "the host's pid {me} is visible"
    );
}

#[tokio::test]
async fn nothing_outlives_the_timeout_even_in_a_new_session() {
    let e = env();
    let out = e
        .sh(
            "setsid sh -c 'sleep 1; echo late > escaped.txt' & sleep 30",
            Duration::from_millis(300),
        )
        .await;
    assert_eq!(out.ending, Ending::TimedOut);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(!e.ws.join("escaped.txt").exists(), "a process escaped");
}

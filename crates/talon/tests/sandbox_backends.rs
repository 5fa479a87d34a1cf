//! The sandbox backends through the binary: the Landlock + seccomp backend (`[exec] backend =
//! "landlock"`) confining real commands run by `talon tool call exec`, the Docker backend
//! refusing them, and `talon doctor` reporting which backend is active.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::path::{Path, PathBuf};

/// A home with a workspace, a directory beside it and `talon.toml` holding `config`.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["ws", "outside"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("outside/note.txt"), "readable").unwrap();
        std::fs::write(dir.path().join("talon.toml"), config).unwrap();
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `talon tool call exec --json` with `command`: (exit status, the tool's text for the
    /// model, is_error).
    fn exec(&self, command: &str) -> (i32, String, bool) {
        support::tool_exec(self.dir.path(), &self.path("ws"), command)
    }

    fn ok(&self, command: &str) -> String {
        let (code, text, is_error) = self.exec(command);
        assert!(code == 0 && !is_error, "{command} should succeed: {text}");
        text
    }

    fn fails(&self, command: &str) -> String {
        let (_, text, is_error) = self.exec(command);
        assert!(is_error, "{command} should fail: {text}");
        text
    }

    fn doctor(&self) -> (i32, String) {
        let out = support::command(self.dir.path())
            .arg("doctor")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }
}

/// The kernel's Landlock ABI; fails the test, saying why, where there is none (these tests must
/// not pass without confining anything).
fn require_landlock() -> i64 {
    let abi = support::landlock_abi();
    assert!(
        abi > 0,
        "Landlock is not supported by this kernel ({}); the Landlock backend tests need Linux \
         5.13+ with Landlock enabled",
        std::io::Error::last_os_error()
    );
    abi
}

/// The Landlock backend. These tests probe the sandbox itself, so the deny group that would
/// refuse their `/dev/tcp` probe before it reached the sandbox is off.
const LANDLOCK: &str = "[exec]\nbackend = \"landlock\"\n[exec.approvals]\ndeny_groups = { data_exfiltration = false }\n";

#[test]
fn landlock_backend_keeps_writes_in_the_workspace() {
    require_landlock();
    let home = Home::new(LANDLOCK);
    let text = home.ok("echo hi > made.txt && mkdir -p sub && echo x > sub/y && cat made.txt");
    assert!(text.contains("hi"), "{text}");
    assert_eq!(
        std::fs::read_to_string(home.path("ws/made.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.path("ws/sub/y")).unwrap(),
        "x\n"
    );
    // Reading beside the workspace is allowed; writing there, or anywhere else, is not.
    let note = home.path("outside/note.txt");
    assert!(
        home.ok(&format!("cat {}", note.display()))
            .contains("readable")
    );
    let target = home.path("outside/new.txt");
    let err = home.fails(&format!("echo x > {}", target.display()));
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!target.exists());
    home.fails("echo x > /tmp/talon-landlock-probe");
    assert!(!Path::new("/tmp/talon-landlock-probe").exists());
    // The private TMPDIR works and is gone afterwards.
    let tmp = home.ok("echo t > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" && echo \"$TMPDIR\"");
    let dir = tmp.lines().nth(1).unwrap_or_default().trim().to_string();
    assert!(dir.contains("talon-landlock/"), "{tmp}");
    assert!(!Path::new(&dir).exists(), "{dir} was removed");
}

#[test]
fn landlock_backend_hides_talon_state() {
    require_landlock();
    let home = Home::new(LANDLOCK);
    // The first call creates the store in the data directory.
    home.ok("true");
    assert!(
        support::data_dir(home.dir.path())
            .join("talon.db")
            .is_file()
    );
    let err = home.fails(&format!(
        "cat {}",
        support::data_dir(home.dir.path())
            .join("talon.db")
            .display()
    ));
    assert!(err.contains("Permission denied"), "{err}");
    let config = support::config_file(home.dir.path()).unwrap();
    let err = home.fails(&format!("cat {}", config.display()));
    assert!(err.contains("Permission denied"), "{err}");
    home.fails(&format!(
        "cp {} ws-copy.key",
        support::data_dir(home.dir.path())
            .join("encryption.key")
            .display()
    ));
    assert!(!home.path("ws/ws-copy.key").exists());
}

#[test]
fn landlock_backend_has_no_network_and_a_seccomp_filter() {
    require_landlock();
    let home = Home::new(LANDLOCK);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = home.fails(&format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"));
    assert!(err.contains("Operation not permitted"), "{err}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing reached the host");
    let status = home.ok("grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    // Namespaces and tracing stay refused as under bubblewrap.
    home.fails("unshare -U true");
}

#[test]
fn docker_backend_refuses_commands_with_the_reason() {
    let home = Home::new(
        "[exec]\nbackend = \"docker\"\n[exec.docker]\nhost = \"unix:///nonexistent/docker.sock\"\n",
    );
    let (code, text, _) = home.exec("echo should-not-run");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("Docker backend: engine at unix:///nonexistent/docker.sock not reachable"),
        "{text}"
    );
    assert!(!text.contains("should-not-run\n"), "{text}");
}

#[test]
fn doctor_reports_bubblewrap_active_here() {
    let home = Home::new("");
    let (code, text) = home.doctor();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Active backend: bubblewrap"), "{text}");
    assert!(text.contains("Network: off"), "{text}");
    for backend in ["bubblewrap", "landlock", "seccomp", "docker"] {
        assert!(
            text.contains(&format!("\n  {backend} ")),
            "{backend}: {text}"
        );
    }
    assert!(text.contains("cannot be re-protected"), "{text}");
}

#[test]
fn doctor_with_landlock_reports_its_abi() {
    let abi = require_landlock();
    let home = Home::new(LANDLOCK);
    let (code, text) = home.doctor();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Active backend: landlock"), "{text}");
    assert!(text.contains(&format!("kernel ABI {abi}")), "{text}");
    assert!(text.contains("Landlock backend limits (active)"), "{text}");
}

#[test]
fn doctor_with_the_docker_backend_exits_1_and_says_why() {
    let home = Home::new("[exec]\nbackend = \"docker\"\n");
    let (code, text) = home.doctor();
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("Docker backend: engine at unix:///var/run/docker.sock not reachable"),
        "{text}"
    );
    assert!(text.contains("Active backend: none"), "{text}");
}

#[test]
fn an_unknown_backend_is_a_configuration_error() {
    let home = Home::new("[exec]\nbackend = \"nsjail\"\n");
    let (code, text) = home.doctor();
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("exec.backend"), "{text}");
}

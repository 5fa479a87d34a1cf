//! Containment under the default backend (bubblewrap), for real: what a sandboxed command can
//! and cannot touch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use talon_exec::{Ending, NetworkMode, Outcome, Request, Shell, ShellConfig};
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
    env_with(base, false)
}

fn env_with(base: Option<&Path>, network: bool) -> Env {
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
        network: if network {
            NetworkMode::Host
        } else {
            NetworkMode::Off
        },
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
            session: None,
            timeout,
            env: &[],
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
    let e = env_in(Some(&sandbox_visible_tmp()));
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
    e.fails("echo x > ~/.bashrc_from_sandbox").await;
    // A missing protected name is not pinned for a foreground command: what the command
    // creates there is removed as soon as it ends, and the model is told why.
    let out = e
        .sh(
            "echo '{}' > .mcp.json; mkdir -p .claude/commands",
            Duration::from_secs(20),
        )
        .await;
    let err = String::from_utf8_lossy(&out.stderr.bytes);
    for name in [".mcp.json", ".claude"] {
        let note = format!(
            "{}: sandboxed commands may not create it",
            e.ws.join(name).display()
        );
        assert!(err.contains(&note), "{err}");
    }
    assert!(!e.ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(e.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // Nothing is left of what it created, nor any placeholder.
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
    // The seccomp filter refuses the socket before the empty network namespace could.
    assert!(
        err.contains("Operation not permitted")
            || err.contains("Connection refused")
            || err.contains("Network is unreachable"),
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

/// `perl -e SCRIPT`: perl is on every Debian (and can make raw system calls), so the probes below
/// need no compiler and no python.
fn perl(script: &str) -> String {
    format!("perl -e '{script}'")
}

/// A system call by number through perl, printing its result and errno text. `setup` declares
/// the variables that string (pointer) arguments need: perl refuses literals there.
fn syscall(setup: &str, nr: i64, args: &str) -> String {
    perl(&format!(
        "{setup} $r = syscall({nr}{args}); print \"$r $!\\n\""
    ))
}

/// Creating a socket of `family` (and `protocol`) through perl: prints `ok` or fails.
fn socket(family: i32, protocol: i32) -> String {
    perl(&format!(
        "socket(my $s, {family}, 2, {protocol}) or die \"socket: $!\\n\"; print \"ok\\n\""
    ))
}

const EPERM: &str = "-1 Operation not permitted";

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const PTRACE: i64 = 101;
    pub const CLONE: i64 = 56;
    pub const MOUNT: i64 = 165;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const PTRACE: i64 = 117;
    pub const CLONE: i64 = 220;
    pub const MOUNT: i64 = 40;
}
/// The same number on every architecture (the unified table).
const IO_URING_SETUP: i64 = 425;
const CLONE3: i64 = 435;

#[tokio::test]
async fn the_seccomp_filter_is_installed_and_ordinary_commands_still_work() {
    let e = env();
    let status = e.ok("grep Seccomp: /proc/self/status").await;
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert_eq!(
        e.ok("printf 'b\\na\\nc\\n' | sort | head -n 2 | tr '\\n' ' '")
            .await,
        "a b "
    );
    assert!(
        e.ok("ls -la /usr/bin | wc -l")
            .await
            .trim()
            .parse::<u32>()
            .unwrap()
            > 10
    );
    let out = e
        .ok("echo made > f.txt && cat f.txt && (cd / && pwd) && sh -c 'exit 0'")
        .await;
    assert_eq!(out, "made\n/\n");
    // glibc starts threads with clone3; its ENOSYS sends glibc back to clone, which passes.
    let threads = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join()'"
    } else {
        "echo thread"
    };
    assert_eq!(e.ok(threads).await, "thread\n");
    let git = e
        .ok("if command -v git >/dev/null; then git --version; else echo 'git version (absent)'; fi")
        .await;
    assert!(git.starts_with("git version"), "{git}");
    // Socket pairs stay available (local IPC); Unix sockets, which reach the host's by path,
    // do not with the network off.
    let pair = perl(
        "use Socket; socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die \"pair: $!\\n\"; print \"ok\\n\"",
    );
    assert_eq!(e.ok(&pair).await, "ok\n");
    let err = e.fails(&socket(1, 0)).await;
    assert!(err.contains("socket: Operation not permitted"), "{err}");
}

#[tokio::test]
async fn namespaces_cannot_be_created() {
    let e = env();
    for command in [
        "unshare -U true",
        "unshare -r true",
        "unshare -m true",
        "unshare -n true",
    ] {
        let err = e.fails(command).await;
        assert!(err.contains("Operation not permitted"), "{command}: {err}");
    }
    // clone(CLONE_NEWUSER | SIGCHLD): a child that got through would print nothing and exit.
    let clone = syscall("", nr::CLONE, ", 0x10000000 | 17, 0, 0, 0, 0");
    let clone = clone.replace("print", "exit 0 if $r == 0; print");
    assert_eq!(e.ok(&clone).await, format!("{EPERM}\n"));
    // clone3 answers ENOSYS (its flags are out of a filter's reach) so libc falls back to clone.
    assert_eq!(
        e.ok(&syscall("", CLONE3, ", 0, 0")).await,
        "-1 Function not implemented\n"
    );
}

#[tokio::test]
async fn io_uring_ptrace_and_mount_are_refused() {
    let e = env();
    // io_uring_setup(4, &params): io_uring would run sockets and opens the filter cannot see.
    let uring = syscall("my $p = \"\\0\" x 120;", IO_URING_SETUP, ", 4, $p");
    assert_eq!(e.ok(&uring).await, format!("{EPERM}\n"));
    // ptrace(PTRACE_TRACEME): allowed to any process without the filter.
    let ptrace = syscall("", nr::PTRACE, ", 0, 0, 0, 0");
    assert_eq!(e.ok(&ptrace).await, format!("{EPERM}\n"));
    let setup = "my ($s, $t, $f) = (\"none\", \"/tmp\", \"tmpfs\");";
    let mount = syscall(setup, nr::MOUNT, ", $s, $t, $f, 0, 0");
    assert_eq!(e.ok(&mount).await, format!("{EPERM}\n"));
}

#[tokio::test]
async fn socket_families_follow_the_network_mode() {
    let off = env();
    for family in [1, 2, 10, 16, 17] {
        // AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET
        let err = off.fails(&socket(family, 0)).await;
        assert!(
            err.contains("socket: Operation not permitted"),
            "{family}: {err}"
        );
    }
    let on = env_with(None, true);
    assert_eq!(on.ok(&socket(2, 0)).await, "ok\n");
    assert_eq!(on.ok(&socket(1, 0)).await, "ok\n");
    // NETLINK_ROUTE (getaddrinfo's AI_ADDRCONFIG) yes; AF_PACKET and NETLINK_AUDIT never.
    assert_eq!(on.ok(&socket(16, 0)).await, "ok\n");
    for (family, protocol) in [(17, 0), (16, 9)] {
        let err = on.fails(&socket(family, protocol)).await;
        assert!(
            err.contains("socket: Operation not permitted"),
            "{family}: {err}"
        );
    }
    let status = on.ok("grep Seccomp: /proc/self/status").await;
    assert!(status.contains("Seccomp:\t2"), "{status}");
}

/// `git` on the host, in `dir`, with an identity (the test's fixtures only).
fn host_git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(status.status.success(), "git {args:?}: {status:?}");
}

/// Issue 21 item 3: the repository is protected as a unit. `.git` cannot be renamed away and
/// copied back, `commondir` and `config.worktree` cannot be created, a submodule's repository
/// is protected like the root's — and git inside the sandbox still adds and commits.
#[tokio::test]
async fn h21_03_the_repository_is_protected_as_a_unit() {
    let e = env_in(Some(&sandbox_visible_tmp()));
    std::fs::remove_dir_all(e.ws.join(".git")).unwrap();
    host_git(&e.ws, &["init", "-q"]);
    std::fs::write(e.ws.join("a.txt"), "a\n").unwrap();
    host_git(&e.ws, &["add", "a.txt"]);
    host_git(&e.ws, &["commit", "-qm", "first"]);
    let module = e.ws.join(".git/modules/lib");
    std::fs::create_dir_all(module.join("hooks")).unwrap();
    std::fs::write(module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(module.join("config"), "[core]\n").unwrap();
    let config = std::fs::read_to_string(e.ws.join(".git/config")).unwrap();

    // (a) rename it away and copy it back.
    let err = e.fails("mv .git .gitold").await;
    assert!(err.contains("busy"), "{err}");
    e.fails("mv .git/modules/lib .git/modules/lib.old").await;
    e.fails("rm -rf .git/hooks").await;
    e.fails("echo '[core] fsmonitor = touch pwned' >> .git/modules/lib/config")
        .await;
    e.fails("echo x > .git/modules/lib/hooks/post-checkout")
        .await;
    // (b) `commondir` at a copy with a malicious configuration, and `config.worktree`.
    let out = e
        .sh(
            "mkdir -p /tmp/evil && echo /tmp/evil > .git/commondir; \
             printf '[core]\\n\\tfsmonitor = touch pwned\\n' > .git/config.worktree; \
             echo x > .git/modules/lib/commondir",
            Duration::from_secs(20),
        )
        .await;
    let err = String::from_utf8_lossy(&out.stderr.bytes);
    assert!(
        err.contains("commondir: sandboxed commands may not create it"),
        "{err}"
    );
    for gone in [
        ".git/commondir",
        ".git/config.worktree",
        ".git/modules/lib/commondir",
    ] {
        assert!(!e.ws.join(gone).exists(), "{gone} was left behind");
    }
    assert!(e.ws.join(".git/HEAD").is_file());
    assert!(!e.ws.join(".gitold").exists());
    assert_eq!(
        std::fs::read_to_string(e.ws.join(".git/config")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(module.join("config")).unwrap(),
        "[core]\n"
    );
    // Git itself still works: objects, index and refs are writable.
    let log = e
        .ok("echo b > b.txt && git add b.txt && \
             git -c user.name=t -c user.email=t@example.com commit -qm second && \
             git log --format=%s")
        .await;
    assert_eq!(log, "second\nfirst\n");
}

/// Issue 21 item 3 (c): the `.git` file of a worktree-style workspace cannot be rewritten, nor
/// removed.
#[tokio::test]
async fn h21_03_a_git_file_cannot_be_rewritten() {
    let e = env_in(Some(&sandbox_visible_tmp()));
    std::fs::remove_dir_all(e.ws.join(".git")).unwrap();
    let pointer = format!(
        "gitdir: {}\n",
        e.outside.join("repo/.git/worktrees/ws").display()
    );
    std::fs::write(e.ws.join(".git"), &pointer).unwrap();
    e.fails("echo 'gitdir: /tmp/evil' > .git").await;
    e.fails("rm -f .git").await;
    e.fails("mv .git .git-old").await;
    assert_eq!(std::fs::read_to_string(e.ws.join(".git")).unwrap(), pointer);
}

/// Issue 21 item 5: a command in a worktree-style workspace replaces `.git` with a symlink to a
/// host directory; the clean-up after it must not follow the link and delete the host's
/// `config` and `hooks`.
#[tokio::test]
async fn h21_05_cleanup_never_follows_a_planted_symlink() {
    let e = env_in(Some(&sandbox_visible_tmp()));
    std::fs::remove_dir_all(e.ws.join(".git")).unwrap();
    std::fs::write(e.ws.join(".git"), "gitdir: /nowhere\n").unwrap();
    let host = e.outside.join("dotssh");
    std::fs::create_dir_all(host.join("hooks")).unwrap();
    std::fs::write(host.join("config"), "Host *\n").unwrap();
    std::fs::write(host.join("hooks/keep"), "x").unwrap();
    std::fs::write(host.join("commondir"), "x").unwrap();
    let _ = e
        .sh(
            &format!("rm -f .git; ln -s {} .git", host.display()),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(host.join("config")).unwrap(),
        "Host *\n"
    );
    assert!(host.join("hooks/keep").exists());
    assert!(host.join("commondir").exists());
}

/// A directory for fixtures that sandboxed commands must see: the target directory's scratch
/// space, unless that lies under `/tmp` (a clone or `CARGO_TARGET_DIR` there), which the sandbox
/// replaces with a private `/tmp`; then `/var/tmp`.
fn sandbox_visible_tmp() -> std::path::PathBuf {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    if target.starts_with("/tmp") {
        std::path::PathBuf::from("/var/tmp")
    } else {
        target.to_path_buf()
    }
}

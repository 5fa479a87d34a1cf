//! Security regressions of the command sandbox (issue 21): what a sandboxed command must not
//! reach, through every backend and through the session sandbox.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use talon_exec::sandbox::Backend;
use talon_exec::{Outcome, Request, Shell, ShellConfig};
use tokio_util::sync::CancellationToken;

use crate::support;

/// A workspace the sandbox can see (under the target directory, not the private `/tmp`).
struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir_in(support::sandbox_visible_tmp()).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    Env {
        _dir: dir,
        root,
        ws,
    }
}

fn shell(backend: Backend, config: ShellConfig) -> Shell {
    Shell::new(ShellConfig {
        helper: Some(PathBuf::from(env!("CARGO_BIN_EXE_talon"))),
        backend,
        ..config
    })
}

async fn sh(shell: &Shell, ws: &Path, session: Option<&str>, command: &str) -> Outcome {
    let request = Request {
        shell: Path::new("/bin/sh"),
        command,
        cwd: ws,
        workspace: ws,
        agent: None,
        session,
        timeout: Duration::from_secs(20),
        env: &[],
    };
    shell
        .run(&request, &CancellationToken::new())
        .await
        .expect("runs")
}

fn text(out: &Outcome) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout.bytes),
        String::from_utf8_lossy(&out.stderr.bytes)
    )
}

/// Whether this kernel has Landlock (the Landlock cases are skipped loudly where it has not).
fn landlock_available() -> bool {
    let abi = support::landlock_abi();
    if abi <= 0 {
        eprintln!("no Landlock on this kernel: the Landlock case is not run");
    }
    abi > 0
}

/// The backends (and ways through them) every network-off case is run through.
fn cases() -> Vec<(&'static str, Backend, Option<&'static str>)> {
    let mut cases = vec![
        ("bubblewrap, a sandbox per call", Backend::Bubblewrap, None),
        (
            "bubblewrap, the session sandbox",
            Backend::Bubblewrap,
            Some("s"),
        ),
    ];
    if landlock_available() {
        cases.push(("landlock", Backend::Landlock, None));
    }
    cases
}

const CONNECT: &str = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
s.connect(sys.argv[1])\n\
print('connected:', s.recv(16).decode())\n";

#[tokio::test]
async fn h21_06_network_off_reaches_no_host_unix_socket() {
    let e = env();
    let path = e.ws.join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::write(e.root.join("connect.py"), CONNECT).unwrap();
    for (name, backend, session) in cases() {
        let shell = shell(backend, ShellConfig::default());
        let out = sh(
            &shell,
            &e.ws,
            session,
            &format!(
                "python3 {} {}",
                e.root.join("connect.py").display(),
                path.display()
            ),
        )
        .await;
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.write_all(b"secret");
            panic!("{name}: a sandboxed command reached a host Unix socket: {out:?}");
        }
        let said = text(&out);
        assert!(!out.success(), "{name}: {said}");
        assert!(!said.contains("connected"), "{name}: {said}");
        assert!(said.contains("Operation not permitted"), "{name}: {said}");
        // Perl too: no family is special to one interpreter.
        let out = sh(
            &shell,
            &e.ws,
            session,
            &format!(
                "perl -e 'use Socket; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\\n\"; \
                 connect($s, pack_sockaddr_un(\"{}\")) or die \"connect: $!\\n\"; print \"connected\\n\"'",
                path.display()
            ),
        )
        .await;
        assert!(listener.accept().is_err(), "{name}: {out:?}");
        assert!(!out.success(), "{name}: {}", text(&out));
        // A socket pair names nothing on the host and stays allowed (local IPC).
        let out = sh(
            &shell,
            &e.ws,
            session,
            "python3 -c 'import socket; a,b=socket.socketpair(); a.send(b\"ok\"); print(b.recv(2).decode())'",
        )
        .await;
        assert!(out.success(), "{name}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout.bytes), "ok\n", "{name}");
        shell.shutdown().await;
    }
}

/// Writes `line` to every pipe of every other process the command can open through `/proc`.
fn to_every_pipe(line: &str) -> String {
    format!(
        "for f in /proc/[0-9]*/fd/*; do case $f in /proc/$$/*|/proc/self/*) continue;; esac; \
         [ -p \"$f\" ] && (printf '%s\\n' '{line}' > \"$f\") 2>/dev/null; done; \
         for p in 1 2; do tr '\\0' ' ' < /proc/$p/cmdline; echo; for f in /proc/$p/fd/*; do (: < \"$f\") 2>&1; done; done; true"
    )
}

#[tokio::test]
async fn h21_07_commands_cannot_reach_the_session_init() {
    let e = env();
    let shell = shell(Backend::Bubblewrap, ShellConfig::default());
    let marker = e.ws.join("injected");
    let limits = serde_json::to_string(&talon_exec::Limits::default()).unwrap();
    let mut attacks = String::new();
    for id in 1..=8 {
        // A request of its own (it would outlive the call and create files after cleanup),
        // and a forged reply for the calls that follow.
        let run = format!(
            r#"{{"op":"run","id":{},"argv":["/bin/sh","-c","sleep 2; touch {}"],"cwd":"/","env":[],"limits":{limits}}}"#,
            1000 + id,
            marker.display()
        );
        attacks.push_str(&to_every_pipe(&run));
        attacks.push_str("; ");
        let forged = format!(r#"{{"op":"output","id":{id},"stream":1,"len":7}}"#);
        attacks.push_str(&to_every_pipe(&format!("{forged}\nFORGED")));
        attacks.push_str("; ");
    }
    let out = sh(&shell, &e.ws, Some("s"), &attacks).await;
    let said = text(&out);
    assert!(
        said.contains("/proc/2/fd") && said.contains("Permission denied"),
        "the init's descriptors are closed to commands: {said}"
    );
    // Later calls of the session carry only their own output.
    for _ in 0..3 {
        let out = sh(&shell, &e.ws, Some("s"), "echo mine").await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout.bytes),
            "mine\n",
            "{out:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "an injected command ran");
    let out = sh(
        &shell,
        &e.ws,
        Some("s"),
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done",
    )
    .await;
    assert!(!text(&out).contains("sleep 2"), "{}", text(&out));
    // A command can still end the init (same user), which ends the sandbox: Talon notices at
    // once (the channel closes) and the next call gets a new one.
    let request = Request {
        shell: Path::new("/bin/sh"),
        command: "kill -9 2; sleep 30",
        cwd: &e.ws,
        workspace: &e.ws,
        agent: None,
        session: Some("s"),
        timeout: Duration::from_secs(20),
        env: &[],
    };
    let begin = std::time::Instant::now();
    let killed = shell.run(&request, &CancellationToken::new()).await;
    assert!(killed.is_err(), "{killed:?}");
    assert!(
        begin.elapsed() < Duration::from_secs(10),
        "{:?}",
        begin.elapsed()
    );
    let out = sh(&shell, &e.ws, Some("s"), "echo again").await;
    assert_eq!(String::from_utf8_lossy(&out.stdout.bytes), "again\n");
    shell.shutdown().await;
}

#[tokio::test]
async fn h21_07_nothing_a_command_started_survives_its_call() {
    let e = env();
    let shell = shell(Backend::Bubblewrap, ShellConfig::default());
    // Processes that leave the command's group and keep forking while they are killed.
    let out = sh(
        &shell,
        &e.ws,
        Some("s"),
        "for i in 1 2 3 4; do setsid sh -c 'while :; do sleep 40 & done' >/dev/null 2>&1 & done; \
         sleep 0.3; echo started",
    )
    .await;
    assert!(out.success(), "{}", text(&out));
    let count = "n=0; for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in \
                 'sleep 40 '*|*[w]hile' :'*) n=$((n+1));; esac; done; echo $n";
    for _ in 0..3 {
        let out = sh(&shell, &e.ws, Some("s"), count).await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout.bytes),
            "0\n",
            "{}",
            text(&out)
        );
    }
    shell.shutdown().await;
}

/// A fake home holding the usual credential stores, each with a secret naming it.
const STORES: &[&str] = &[
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".docker/config.json",
    ".kube/config",
    ".gnupg/private-keys-v1.d/key",
    ".config/gcloud/credentials.db",
    ".azure/msal_token_cache.json",
    ".npmrc",
    ".netrc",
    ".git-credentials",
    ".pgpass",
];

#[test]
fn h21_14_credential_stores_are_hidden_by_default() {
    let e = env();
    let home = &e.root;
    for (i, store) in STORES.iter().enumerate() {
        let path = home.join(store);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("SECRET-{i}\n")).unwrap();
    }
    std::fs::write(home.join(".vault-token"), "SECRET-extra\n").unwrap();
    std::fs::write(home.join("notes.txt"), "PLAIN\n").unwrap();
    let mut backends = vec!["bubblewrap"];
    if landlock_available() {
        backends.push("landlock");
    }
    let read_all = STORES
        .iter()
        .chain([&".vault-token"])
        .map(|s| format!("cat {}/{s};", home.display()))
        .collect::<String>();
    for backend in backends {
        // Defaults, plus one store added and one shown again.
        std::fs::write(
            home.join("talon.toml"),
            format!(
                "[exec]\nbackend = \"{backend}\"\nhidden_paths = [\"~/.vault-token\"]\n\
                 unhidden_paths = [\"~/.pgpass\"]\n"
            ),
        )
        .unwrap();
        let (_, text, _) = support::tool_exec(
            home,
            &e.ws,
            &format!("{read_all} cat {}/notes.txt", home.display()),
        );
        assert!(
            text.contains("PLAIN"),
            "{backend}: the rest of the home stays readable: {text}"
        );
        let pgpass = STORES.iter().position(|s| *s == ".pgpass").unwrap();
        assert!(
            text.contains(&format!("SECRET-{pgpass}")),
            "{backend}: unhidden: {text}"
        );
        for (i, store) in STORES.iter().enumerate().filter(|(i, _)| *i != pgpass) {
            assert!(
                !text.contains(&format!("SECRET-{i}\n")),
                "{backend}: {store} was read: {text}"
            );
        }
        assert!(!text.contains("SECRET-extra"), "{backend}: {text}");
        // Not by another name either.
        let (_, text, _) = support::tool_exec(
            home,
            &e.ws,
            &format!(
                "cd {} && cat ./.ssh/../.ssh/id_ed25519 .aws/credentials; grep -r SECRET . 2>/dev/null",
                home.display()
            ),
        );
        assert!(
            !text.contains("SECRET-0") && !text.contains("SECRET-1\n"),
            "{backend}: {text}"
        );
        // Run as root, the password hashes are root's to read in the sandbox too: hidden.
        // SAFETY: geteuid has no failure mode.
        if unsafe { nix::libc::geteuid() } == 0 && Path::new("/etc/shadow").is_file() {
            let (_, text, _) = support::tool_exec(home, &e.ws, "cat /etc/shadow /etc/gshadow");
            assert!(!text.contains("root:"), "{backend}: {text}");
        }
    }
    // A relative path is a configuration error, not a silent no-op.
    std::fs::write(
        home.join("talon.toml"),
        "[exec]\nhidden_paths = [\"secrets\"]\n",
    )
    .unwrap();
    let (code, text, _) = support::tool_exec(home, &e.ws, "true");
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("exec.hidden_paths"), "{text}");
}

/// This test's `talon` binary at a path under `/tmp` (a hard link, else a copy), as with a
/// `CARGO_TARGET_DIR` or a download there.
fn talon_under_tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("talon-bin-")
        .tempdir_in("/tmp")
        .unwrap();
    let path = dir.path().join("talon");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_talon"), &path).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_talon"), &path).unwrap();
    }
    (dir, path)
}

#[tokio::test]
async fn h21_sandbox_from_tmp_commands_run() {
    let e = env();
    let (_bin, talon) = talon_under_tmp();
    let mut backends = vec![Backend::Bubblewrap];
    if landlock_available() {
        backends.push(Backend::Landlock);
    }
    for backend in backends {
        let shell = Shell::new(ShellConfig {
            helper: Some(talon.clone()),
            backend,
            ..ShellConfig::default()
        });
        for session in [Some("s"), None] {
            let out = sh(&shell, &e.ws, session, "echo ran; ls /tmp >/dev/null").await;
            assert!(out.success(), "{backend:?} {session:?}: {}", text(&out));
            assert_eq!(String::from_utf8_lossy(&out.stdout.bytes), "ran\n");
        }
        shell.shutdown().await;
    }
}

/// `talon doctor` run from `talon` (a path) in `home`: (exit status, report).
fn doctor(talon: &Path, home: &Path) -> (i32, String) {
    let mut command = std::process::Command::new(talon);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TALON_DATA_DIR", crate::support::data_dir(home))
        .current_dir(home)
        .arg("doctor");
    if let Some(config) = support::config_file(home) {
        command.env("TALON_CONFIG", config);
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn h21_sandbox_from_tmp_doctor_runs_a_real_command() {
    let e = env();
    let (_bin, talon) = talon_under_tmp();
    let (code, report) = doctor(&talon, &e.root);
    assert_eq!(code, 0, "{report}");
    assert!(
        report.contains("Test command: a command ran through the sandbox exec uses"),
        "{report}"
    );
    // When commands fail, doctor says so and exits 1, though every probe passes.
    std::fs::write(
        e.root.join("talon.toml"),
        "[exec]\nwritable_roots = [\"/nonexistent-talon-doctor-root\"]\n",
    )
    .unwrap();
    let (code, report) = doctor(&talon, &e.root);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("Active backend: bubblewrap"), "{report}");
    assert!(report.contains("Test command: FAILED"), "{report}");
    assert!(report.contains("nonexistent-talon-doctor-root"), "{report}");
}

#[tokio::test]
async fn h21_06_proxy_mode_keeps_its_proxy_but_reaches_no_host_unix_socket() {
    let e = env();
    let path = e.ws.join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::write(e.root.join("connect.py"), CONNECT).unwrap();
    // An HTTP server on the host's loopback, reached only through the proxy.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in server.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nproxied",
            );
        }
    });
    let lists = talon_exec::NetworkLists {
        allowed_domains: vec!["localhost".into()],
        denied_domains: Vec::new(),
        allowed_cidrs: vec!["127.0.0.1/32".into()],
    };
    let policy = talon_exec::NetworkPolicy::from_lists(&lists).unwrap();
    let shell = shell(
        Backend::Bubblewrap,
        ShellConfig {
            network: talon_exec::NetworkMode::Proxy(std::sync::Arc::new(policy)),
            ..ShellConfig::default()
        },
    );
    let get = format!(
        "python3 -c 'import os,socket; h,p=os.environ[\"HTTP_PROXY\"][7:].split(\":\"); \
         s=socket.create_connection((h,int(p))); \
         s.sendall(b\"GET http://localhost:{port}/ HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n\"); \
         print(s.recv(4096).decode())'"
    );
    let out = sh(&shell, &e.ws, None, &get).await;
    assert!(out.success(), "{}", text(&out));
    assert!(text(&out).contains("proxied"), "{}", text(&out));
    let out = sh(
        &shell,
        &e.ws,
        None,
        &format!(
            "python3 {} {}",
            e.root.join("connect.py").display(),
            path.display()
        ),
    )
    .await;
    assert!(listener.accept().is_err(), "{}", text(&out));
    assert!(!out.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Operation not permitted"),
        "{}",
        text(&out)
    );
}

//! The sandbox's network modes, for real, through the `talon` binary: with `[exec] network =
//! "proxy"` a command reaches allowed destinations only through Talon's proxy, refused ones are
//! reported to the model after the output, and nothing bypasses the proxy; with the network off
//! (the default) nothing is reachable at all.
//!
//! Requests are made with perl (always installed where `git` is), speaking HTTP to the proxy named
//! by `$HTTP_PROXY` itself, so the tests do not depend on curl's proxy rules; curl is used in
//! addition when it is installed. Names resolve with the system resolver: `localhost` is the only
//! name every host resolves locally, and the test server listens on the host's loopback, made
//! reachable with `allowed_cidrs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// `perl direct.pl HOST PORT`: a direct TCP connection, bypassing any proxy.
const DIRECT_PL: &str = r#"use strict; use IO::Socket::INET;
my ($h, $p) = @ARGV;
my $s = IO::Socket::INET->new(PeerAddr => $h, PeerPort => $p, Proto => 'tcp', Timeout => 5);
if ($s) { print $s "GET / HTTP/1.0\r\n\r\n"; print "direct: connected\n"; exit 0 }
print "direct: failed: $!\n"; exit 4;
"#;

const BODY: &str = "hello-from-the-host";

/// An HTTP server on the host's loopback that answers every request with [`BODY`] and counts
/// the connections it accepted.
struct HostServer {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn host_server() -> HostServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                BODY.len()
            );
        }
    });
    HostServer { port, accepted }
}

/// A home with a `talon.toml` and a workspace holding the request scripts.
struct Home {
    dir: tempfile::TempDir,
    ws: PathBuf,
}

fn home(config: &str) -> Home {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("talon.toml"), config).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("get.pl"), support::PERL_PROXY_GET).unwrap();
    std::fs::write(ws.join("direct.pl"), DIRECT_PL).unwrap();
    Home { dir, ws }
}

/// `[exec] network = "proxy"` allowing `localhost` (the host's loopback, for the test server).
fn proxy_config() -> String {
    "[exec]\nnetwork = \"proxy\"\nallowed_domains = [\"localhost\"]\n\
     allowed_cidrs = [\"127.0.0.1/32\", \"::1/128\"]\n"
        .to_string()
}

/// One `talon tool call TOOL --json`: (is the result an error, the text the model sees).
fn call(home: &Home, tool: &str, args: Value) -> (bool, String) {
    let out = support::command(home.dir.path())
        .args(["tool", "call", tool, "--json", "--workspace"])
        .arg(&home.ws)
        .args(["--args", &args.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let result = &report["result"];
    (
        result["is_error"].as_bool().unwrap_or(false),
        result["for_llm"].as_str().unwrap_or_default().to_string(),
    )
}

fn exec(home: &Home, command: &str) -> (bool, String) {
    call(home, "exec", json!({ "command": command }))
}

fn curl() -> Option<&'static Path> {
    [Path::new("/usr/bin/curl"), Path::new("/bin/curl")]
        .into_iter()
        .find(|p| p.is_file())
}

#[test]
fn proxy_mode_reaches_allowed_domains_and_reports_the_refused_ones() {
    let server = host_server();
    let home = home(&proxy_config());
    let (failed, text) = exec(
        &home,
        &format!(
            "echo \"proxy=$HTTP_PROXY\"; perl get.pl http://localhost:{}/hi",
            server.port
        ),
    );
    assert!(!failed, "{text}");
    assert!(text.contains("proxy=http://127.0.0.1:3128"), "{text}");
    assert!(
        text.contains("HTTP/1.1 200 OK") && text.contains(BODY),
        "{text}"
    );
    assert!(!text.contains("Network:"), "nothing was refused: {text}");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);

    // A domain that is not allowed: the proxy answers 403 and the model is told why.
    let (failed, text) = exec(&home, "perl get.pl http://denied.test/x");
    assert!(!failed, "the command itself succeeded: {text}");
    assert!(text.contains("HTTP/1.1 403"), "{text}");
    assert!(
        text.contains(
            "Network: connection to denied.test:80 refused (not in the allowed domains)."
        ),
        "{text}"
    );
    assert!(
        text.contains("The sandbox reaches the network only through Talon's proxy")
            && text.contains("only these domains: localhost."),
        "{text}"
    );
    assert!(
        text.rfind("Network:") > text.find("HTTP/1.1 403"),
        "the footer comes after the output: {text}"
    );
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn bash_reports_refusals_on_failure_too() {
    let home = home(&proxy_config());
    let mut command = "perl get.pl http://evil.test/; exit 3".to_string();
    if let Some(curl) = curl() {
        command = format!(
            "{} -sS -m 10 https://evil-tls.test/ 2>&1; {command}",
            curl.display()
        );
    }
    let (failed, text) = call(&home, "Bash", json!({ "command": command }));
    assert!(failed, "{text}");
    assert!(text.contains("Exit code 3"), "{text}");
    assert!(
        text.contains("Network: connection to evil.test:80 refused (not in the allowed domains)."),
        "{text}"
    );
    if curl().is_some() {
        // curl honours HTTPS_PROXY and tunnels with CONNECT, which is refused the same way.
        assert!(
            text.contains(
                "Network: connection to evil-tls.test:443 refused (not in the allowed domains)."
            ),
            "{text}"
        );
    }
    assert!(text.ends_with("retrying will not get through."), "{text}");
}

#[test]
fn proxy_mode_cannot_bypass_the_proxy() {
    let server = host_server();
    let home = home(&proxy_config());
    // Straight to the host's listener: the sandbox's loopback is its own, nothing listens there.
    let (failed, text) = exec(&home, &format!("perl direct.pl 127.0.0.1 {}", server.port));
    assert!(failed, "{text}");
    assert!(text.contains("direct: failed"), "{text}");
    // Nor through the proxy by address: an IP literal is not an allowed domain.
    let (_, text) = exec(
        &home,
        &format!("perl get.pl http://127.0.0.1:{}/", server.port),
    );
    assert!(
        text.contains(&format!(
            "Network: connection to 127.0.0.1:{} refused (not in the allowed domains).",
            server.port
        )),
        "{text}"
    );
    assert_eq!(
        server.accepted.load(Ordering::SeqCst),
        0,
        "nothing got through"
    );
}

#[test]
fn with_the_network_off_nothing_is_reachable() {
    let server = host_server();
    for config in [
        "",
        "[exec]\nnetwork = \"off\"\n",
        "[exec]\nnetwork = false\n",
    ] {
        let home = home(config);
        let (failed, text) = exec(
            &home,
            &format!(
                "echo \"proxy=${{HTTP_PROXY:-none}}\"; perl direct.pl 127.0.0.1 {}",
                server.port
            ),
        );
        assert!(failed, "{config}: {text}");
        assert!(text.contains("proxy=none"), "{config}: {text}");
        // The seccomp filter refuses the socket itself.
        assert!(
            text.contains("direct: failed: Operation not permitted"),
            "{config}: {text}"
        );
        let (failed, text) = exec(&home, "perl get.pl http://localhost/");
        assert!(failed && text.contains("no HTTP_PROXY"), "{config}: {text}");
    }
    assert_eq!(
        server.accepted.load(Ordering::SeqCst),
        0,
        "nothing got through"
    );
}

#[test]
fn metadata_is_refused_even_when_its_range_is_allowed() {
    let home = home(
        "[exec]\nnetwork = \"proxy\"\nallowed_domains = [\"169.254.169.254\", \"localhost\"]\n\
         allowed_cidrs = [\"169.254.0.0/16\"]\n",
    );
    let (_, text) = exec(
        &home,
        "perl get.pl http://169.254.169.254/latest/meta-data/",
    );
    assert!(text.contains("HTTP/1.1 403"), "{text}");
    assert!(
        text.contains(
            "Network: connection to 169.254.169.254:80 refused (169.254.169.254 is a cloud metadata \
             address, never reachable from tools)."
        ),
        "{text}"
    );
}

#[test]
fn network_settings_are_checked_at_startup_naming_the_key() {
    for (config, expected) in [
        (
            "network = true",
            "exec.network: `true` no longer says which network",
        ),
        ("network = \"wifi\"", "exec.network: unknown mode \"wifi\""),
        (
            "network = \"proxy\"",
            "exec.allowed_domains: network = \"proxy\" with no allowed domains",
        ),
        (
            "network = \"proxy\"\nallowed_domains = [\"a b.test\"]",
            "exec.allowed_domains: invalid domain pattern `a b.test`",
        ),
        (
            "network = \"proxy\"\nallowed_domains = [\"x.test\"]\ndenied_domains = [\"*.*.test\"]",
            "exec.denied_domains: invalid domain pattern",
        ),
        (
            "network = \"proxy\"\nallowed_domains = [\"x.test\"]\nallowed_cidrs = [\"10.0.0.0/99\"]",
            "exec.allowed_cidrs: invalid address range `10.0.0.0/99`",
        ),
        (
            "network = \"off\"\nallowed_domains = [\"bad pattern\"]",
            "exec.allowed_domains",
        ),
    ] {
        let home = home(&format!("[exec]\n{config}\n"));
        let out = support::command(home.dir.path())
            .args(["tool", "call", "exec", "--args", r#"{"command":"true"}"#])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {stderr}");
        assert!(stderr.contains(expected), "{config}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn background_commands_keep_their_proxy_and_report_refusals() {
    let server = host_server();
    let home = home("");
    std::fs::write(
        home.dir.path().join("talon.toml"),
        format!(
            "{}\n[tools]\npermission_mode = \"bypassPermissions\"\n\n[gateway]\nworkspace = {:?}\n",
            proxy_config(),
            home.ws.display().to_string()
        ),
    )
    .unwrap();
    let running = support::serve_in(home.dir.path(), &[]);
    let invoke = |body: Value| support::invoke(&running.addr, None, body);
    let command = format!(
        "sleep 1; perl get.pl http://localhost:{}/bg; perl get.pl http://denied.test/bg",
        server.port
    );
    let (status, body) = invoke(json!({
        "tool": "exec",
        "args": {"command": command, "background": true},
    }))
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["result"]["for_llm"].as_str().unwrap_or_default();
    let id = text
        .split("Started background process ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no id in {text}"))
        .to_string();
    let (status, body) = invoke(json!({
        "tool": "process",
        "args": {"action": "output", "id": id, "timeout": 30},
    }))
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["result"]["for_llm"].as_str().unwrap_or_default();
    assert!(
        text.contains(BODY),
        "the proxy served the command after the call: {text}"
    );
    assert!(
        text.contains(
            "Network: connection to denied.test:80 refused (not in the allowed domains)."
        ),
        "{text}"
    );
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

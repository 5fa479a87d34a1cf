//! Issue 35, the sandbox and the users of one gateway: a sandboxed command never reaches the
//! gateway's own API, whatever the proxy's allow list says; under Landlock one command cannot read
//! another's scratch files, and a shared gateway refuses Landlock (which cannot hide one user's
//! processes from another's) unless the operator says one person uses it.

use std::io::{Read, Write};
use std::net::TcpListener;

use serde_json::json;

use crate::support;

/// A loopback HTTP server answering every request with `body`; its port.
fn host_server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0u8; 2048];
            let _ = stream.read(&mut head);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A `talon serve` (no token) with `config` and one shared workspace, holding `get.pl`.
fn serve(config: &str) -> (tempfile::TempDir, std::path::PathBuf, support::Running) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("get.pl"), support::PERL_PROXY_GET).unwrap();
    let mut cmd = support::command(home.path());
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
        .arg(&ws);
    let server = support::spawn(cmd);
    (home, ws, server)
}

async fn exec(addr: &str, command: &str) -> (bool, String) {
    let (status, body) = support::invoke(
        addr,
        None,
        json!({"tool": "exec", "args": {"command": command}}),
    )
    .await;
    assert!(status == 200 || status == 400, "{status} {body}");
    (
        body["result"]["is_error"].as_bool().unwrap_or(true),
        body["result"]["for_llm"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

const BYPASS: &str = "[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
                      [exec.approvals]\ndeny_groups = { data_exfiltration = false }\n";

/// Proxy mode allowing loopback reaches a local service, never the gateway that runs the command
/// (on a tokenless gateway that was every user's API).
#[tokio::test(flavor = "multi_thread")]
async fn h35_a_sandboxed_command_never_reaches_the_gateway() {
    let service = host_server("h35-local-service");
    let config = format!(
        "{BYPASS}[exec]\nnetwork = \"proxy\"\nallowed_domains = [\"localhost\", \"127.0.0.1\"]\n\
         allowed_cidrs = [\"127.0.0.1/32\", \"::1/128\"]\n"
    );
    let (_home, _ws, server) = tokio::task::spawn_blocking(move || serve(&config))
        .await
        .unwrap();
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let (_, text) = exec(
        &server.addr,
        &format!(
            "perl get.pl http://localhost:{service}/ ; echo; echo ---; \
             perl get.pl http://127.0.0.1:{port}/v1/sessions; echo; echo ---; \
             perl get.pl http://localhost:{port}/healthz"
        ),
    )
    .await;
    assert!(text.contains("h35-local-service"), "{text}");
    let parts: Vec<&str> = text.split("---").collect();
    for gateway in &parts[1..] {
        assert!(
            gateway.contains("403") && gateway.contains("Talon's own gateway"),
            "the gateway was reached: {text}"
        );
    }
}

/// Under Landlock a command cannot read another running command's scratch directory.
#[test]
fn h35_landlock_scratch_is_private_to_each_command() {
    assert!(
        support::landlock_abi() > 0,
        "the Landlock tests need a kernel with Landlock"
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        "[exec]\nbackend = \"landlock\"\n",
    )
    .unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    // The first command writes a file in its scratch directory and waits there.
    let mut holder = support::command(home.path())
        .args(["tool", "call", "exec", "--workspace"])
        .arg(&ws)
        .args([
            "--args",
            r#"{"command":"echo h35-scratch-secret > \"$TMPDIR/held\" && echo \"$TMPDIR\" > tmpdir.txt && sleep 8"}"#,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let held = loop {
        if let Ok(dir) = std::fs::read_to_string(ws.join("tmpdir.txt"))
            && !dir.trim().is_empty()
        {
            break dir.trim().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the first command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(std::path::Path::new(&held).join("held").exists());
    let (_, text, _) = support::tool_exec(
        home.path(),
        &ws,
        &format!(
            "cat {held}/held; ls {}; echo done",
            std::path::Path::new(&held).parent().unwrap().display()
        ),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(text.contains("done"), "{text}");
    assert!(
        !text.contains("h35-scratch-secret"),
        "another command's scratch was read: {text}"
    );
}

/// A gateway refuses Landlock, saying why and what to do; the operator's word that one person
/// uses it lets commands run.
#[tokio::test(flavor = "multi_thread")]
async fn h35_landlock_is_refused_on_a_shared_gateway() {
    assert!(
        support::landlock_abi() > 0,
        "the Landlock tests need a kernel with Landlock"
    );
    let config = format!("{BYPASS}[exec]\nbackend = \"landlock\"\n");
    let (_home, _ws, server) = tokio::task::spawn_blocking(move || serve(&config))
        .await
        .unwrap();
    let (failed, text) = exec(&server.addr, "echo h35-ran").await;
    assert!(failed, "{text}");
    assert!(
        text.contains("/proc") && text.contains("landlock_single_user"),
        "{text}"
    );
    assert!(!text.contains("h35-ran\n"), "{text}");
    drop(server);

    let config = format!("{BYPASS}[exec]\nbackend = \"landlock\"\nlandlock_single_user = true\n");
    let (_home, _ws, server) = tokio::task::spawn_blocking(move || serve(&config))
        .await
        .unwrap();
    let (failed, text) = exec(&server.addr, "echo h35-ran").await;
    assert!(!failed && text.contains("h35-ran"), "{text}");
}

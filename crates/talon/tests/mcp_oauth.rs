//! OAuth sign-in for a remote MCP server, end to end against a local authorization server
//! (`support/oauth_server.py`): discovery, dynamic registration, PKCE with `resource`, the
//! loopback callback, tokens in the encrypted store, refresh with rotated refresh tokens kept
//! across processes, and what the model and the operator are told when a login is needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::command;

struct AuthServer {
    child: Child,
    port: u16,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn auth_server(expires_secs: u32) -> AuthServer {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/oauth_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .env("EXPIRES", expires_secs.to_string())
        .env("PREREGISTERED", "talon-preregistered")
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    AuthServer { child, port }
}

fn stats(port: u16) -> Value {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())",
            &format!("http://127.0.0.1:{port}/stats"),
        ])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn talon(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = command(home)
        .env("BROWSER", home.join("browser"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The "browser": follows the authorization URL's redirects to Talon's loopback callback, as a
/// person who approves at once would.
fn install_browser(home: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        home.join("browser"),
        "#!/bin/sh\nexec python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(home.join("browser"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_preregistered_client_signs_in_without_registering() {
    let server = auth_server(3600);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    install_browser(home);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    std::fs::write(
        home.join("talon.toml"),
        format!(
            "[mcp_servers.pre]\nurl = {url:?}\noauth = true\noauth_client_id = \"talon-preregistered\"\n"
        ),
    )
    .unwrap();
    let (ok, out, err) = talon(home, &["mcp-servers", "login", "pre"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = talon(home, &["tool", "call", "mcp__pre__whoami"]);
    assert!(
        ok && out.contains("hello talon-preregistered"),
        "{out}{err}"
    );
    assert_eq!(stats(server.port)["registrations"], 0);
}

#[test]
fn login_refresh_rotation_and_logout() {
    let server = auth_server(1);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    install_browser(home);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);

    let (ok, out, err) = talon(
        home,
        &["mcp-servers", "add", "signed", "--url", &url, "--oauth"],
    );
    assert!(ok, "{out}{err}");
    let (_, out, _) = talon(home, &["mcp-servers", "list", "--json"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["oauth"], "needs login", "{listed}");
    let (ok, _, err) = talon(home, &["tool", "call", "mcp__signed__whoami"]);
    assert!(
        !ok && err.contains("run `talon mcp-servers login signed`"),
        "{err}"
    );

    let (ok, out, err) = talon(home, &["mcp-servers", "login", "signed"]);
    assert!(ok && out.contains("signed in"), "{out}{err}");
    let after_login = stats(server.port);
    assert_eq!(after_login["registrations"], 1, "{after_login}");
    assert_eq!(after_login["token_exchanges"], 1);
    assert_eq!(
        after_login["resource_params"][0],
        url.as_str(),
        "RFC 8707 resource"
    );
    let (_, out, _) = talon(home, &["mcp-servers", "list", "--json"]);
    assert!(out.contains("\"signed in\""), "{out}");

    // Access tokens live 1 s: every process refreshes, and each refresh token works once, so
    // these calls succeed only if every rotated refresh token was stored.
    for round in 0..3 {
        let (ok, out, err) = talon(home, &["tool", "call", "mcp__signed__whoami"]);
        assert!(
            ok && out.contains("hello client-"),
            "round {round}: {out}{err}"
        );
    }
    let after = stats(server.port);
    assert!(after["refreshes"].as_u64().unwrap() >= 3, "{after}");
    assert_eq!(after["rejected_refreshes"], 0, "{after}");
    // The tokens are a secret: never in the store in the clear.
    let db = std::fs::read(support::data_dir(home).join("talon.db")).unwrap();
    assert!(!String::from_utf8_lossy(&db).contains("refresh_token"));

    let (ok, out, err) = talon(home, &["mcp-servers", "logout", "signed"]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = talon(home, &["tool", "call", "mcp__signed__whoami"]);
    assert!(
        !ok && err.contains("talon mcp-servers login signed"),
        "{err}"
    );
}

/// A running gateway that could not connect a server for want of a login connects it once
/// `talon mcp-servers login` has run in another process.
#[tokio::test]
async fn a_running_gateway_connects_a_server_once_signed_in() {
    let server = auth_server(3600);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    install_browser(home);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    std::fs::write(
        home.join("talon.toml"),
        format!("[mcp_servers.signed]\nurl = {url:?}\noauth = true\n"),
    )
    .unwrap();
    let gateway = support::serve_in(home, &[]);
    let listed = || async {
        let tools = support::get_json(&format!("http://{}/v1/tools", gateway.addr)).await;
        tools.to_string().contains("mcp__signed__whoami")
    };
    assert!(!listed().await, "not connected before the login");
    let (ok, out, err) = talon(home, &["mcp-servers", "login", "signed"]);
    assert!(ok, "{out}{err}");
    for _ in 0..300 {
        if listed().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the gateway did not connect the server after the login");
}

//! `talon mcp-servers` and the HTTP administration API end to end: servers stored and bridged
//! without a restart, grants and access requests holding on the next call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::npm;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::command;

fn talon(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = command(home).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn echo(home: &Path, message: &str) -> (bool, String, String) {
    let args = json!({ "message": message }).to_string();
    talon(
        home,
        &["tool", "call", "mcp__everything__echo", "--args", &args],
    )
}

#[test]
fn stored_servers_grants_and_requests_through_the_cli() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let entry = entry.to_str().unwrap();
    let add = [
        "mcp-servers",
        "add",
        "everything",
        "--command",
        "node",
        "--env",
        "GREETING=stored-greeting-value",
        "--require-grant",
        "--",
        entry,
        "stdio",
    ];
    let (ok, stdout, stderr) = talon(home, &add);
    assert!(ok, "{stdout}{stderr}");
    let (ok, _, stderr) = talon(home, &add);
    assert!(!ok && stderr.contains("already added"), "{stderr}");
    let (ok, stdout, _) = talon(home, &["mcp-servers", "list", "--json"]);
    assert!(ok);
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed[0]["name"], "everything");
    assert_eq!(listed[0]["source"], "store");
    assert_eq!(listed[0]["secrets"], json!(["GREETING"]));
    assert!(
        !stdout.contains("stored-greeting-value"),
        "values never listed"
    );
    let (ok, stdout, stderr) = talon(home, &["mcp-servers", "test", "everything"]);
    assert!(ok && stdout.contains("  echo"), "{stdout}{stderr}");

    // Stored, and bridged by the next command; but it needs a grant.
    // Not offered to an agent without a grant, and refused if called anyway.
    let (_, listing, _) = talon(home, &["tools", "list"]);
    assert!(!listing.contains("mcp__everything__"), "{listing}");
    let (ok, _, stderr) = echo(home, "no grant yet");
    assert!(
        !ok && stderr.contains("may be used only with a grant"),
        "{stderr}"
    );
    let (ok, stdout, _) = talon(
        home,
        &[
            "mcp-servers",
            "request",
            "everything",
            "--agent",
            "default",
            "--tools",
            "echo",
            "--reason",
            "to echo",
        ],
    );
    assert!(ok && stdout.contains("request 1 filed"), "{stdout}");
    let (_, stdout, _) = talon(home, &["mcp-servers", "requests", "--status", "pending"]);
    assert!(
        stdout.contains("tools=echo") && stdout.contains("to echo"),
        "{stdout}"
    );
    let (ok, stdout, _) = talon(home, &["mcp-servers", "approve", "1"]);
    assert!(ok && stdout.contains("approved"), "{stdout}");
    let (ok, _, stderr) = talon(home, &["mcp-servers", "reject", "1"]);
    assert!(!ok && stderr.contains("already approved"), "{stderr}");

    let (_, listing, _) = talon(home, &["tools", "list"]);
    assert!(
        listing.contains("mcp__everything__echo") && !listing.contains("mcp__everything__get-sum"),
        "only the granted tool is listed: {listing}"
    );
    let (ok, stdout, stderr) = echo(home, "granted now");
    assert!(
        ok && stdout.contains("Echo: granted now"),
        "{stdout}{stderr}"
    );
    // The approval granted echo only.
    let (ok, _, stderr) = talon(
        home,
        &[
            "tool",
            "call",
            "mcp__everything__get-sum",
            "--args",
            r#"{"a":1,"b":2}"#,
        ],
    );
    assert!(
        !ok && stderr.contains("not among the tools granted"),
        "{stderr}"
    );
    // Deny wins.
    let (ok, ..) = talon(
        home,
        &[
            "mcp-servers",
            "grant",
            "everything",
            "--agent",
            "default",
            "--deny",
            "echo",
        ],
    );
    assert!(ok);
    let (ok, _, stderr) = echo(home, "denied");
    assert!(!ok && stderr.contains("denied"), "{stderr}");
    let (_, stdout, _) = talon(home, &["mcp-servers", "grants", "--json"]);
    let grants: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(grants[0]["deny"], json!(["echo"]));
    let (ok, ..) = talon(
        home,
        &["mcp-servers", "revoke", "everything", "--agent", "default"],
    );
    assert!(ok);

    let (ok, stdout, _) = talon(home, &["mcp-servers", "remove", "everything"]);
    assert!(ok, "{stdout}");
    let (ok, stdout, stderr) = echo(home, "gone");
    assert!(!ok && (stdout + &stderr).contains("unknown tool"));
    let (ok, _, stderr) = talon(home, &["mcp-servers", "add", "x", "--url", "ftp://nope"]);
    assert!(!ok && stderr.contains("http:// or https://"), "{stderr}");
}

/// The gateways here take a token: without one, no server running a host command is accepted
/// over HTTP.
const TOKEN: &str = "tok-admin-123456-zyxwvuts";

/// A client sending [`TOKEN`].
fn authed() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

async fn tool_names(addr: &str) -> Vec<String> {
    let listed: Value = authed()
        .get(format!("http://{addr}/v1/tools"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what} did not happen within 60 s");
}

#[tokio::test]
async fn a_running_gateway_follows_servers_added_and_removed_over_http_and_the_cli() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let server = support::serve(&[("TALON_GATEWAY__TOKEN", TOKEN)], None);
    let addr = server.addr.clone();
    let client = authed();
    let api = |path: &str| format!("http://{addr}{path}");

    // Added over HTTP: the running gateway connects it and offers its tools.
    let added = client
        .post(api("/v1/mcp-servers"))
        .json(&json!({"name": "everything", "command": "node",
            "args": [entry.to_str().unwrap(), "stdio"], "require_grant": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201, "{}", added.text().await.unwrap());
    let bridged = async || -> Value {
        client
            .get(api("/v1/mcp-servers"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["bridged"]
            .clone()
    };
    until("the added server connects", async || {
        bridged().await["everything"]["state"] == "connected"
    })
    .await;
    // It needs a grant: not offered yet.
    assert!(
        !tool_names(&addr)
            .await
            .contains(&"mcp__everything__echo".to_string())
    );
    let call = json!({"tool": "mcp__everything__echo", "args": {"message": "over http"}});
    let (_, body) = support::invoke(&addr, Some(TOKEN), call.clone()).await;
    assert!(
        body.to_string().contains("may be used only with a grant"),
        "{body}"
    );

    // A request filed and approved over HTTP holds on the next call.
    let filed: Value = client
        .post(api("/v1/mcp-access-requests"))
        .json(&json!({"server": "everything", "agent": "default", "reason": "echo"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = filed["id"].as_i64().unwrap();
    let approved = client
        .post(api(&format!("/v1/mcp-access-requests/{id}/approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let again = client
        .post(api(&format!("/v1/mcp-access-requests/{id}/approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    let (status, body) = support::invoke(&addr, Some(TOKEN), call.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("Echo: over http"), "{body}");
    assert!(
        tool_names(&addr)
            .await
            .contains(&"mcp__everything__echo".to_string()),
        "offered once granted"
    );
    let bad = client
        .post(api("/v1/mcp-grants"))
        .json(&json!({"server": "everything", "agent": "a", "user": "b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    // A grant or a request for a server nobody configured is refused over HTTP as on the CLI
    // (one operation): it would otherwise wait for whoever adds a server under that name.
    for (path, body) in [
        ("/v1/mcp-grants", json!({"server": "nowhere", "agent": "a"})),
        (
            "/v1/mcp-access-requests",
            json!({"server": "nowhere", "agent": "a"}),
        ),
    ] {
        let unknown = client.post(api(path)).json(&body).send().await.unwrap();
        assert_eq!(unknown.status(), 404, "{path}");
    }

    // Removed with the CLI (another process): the gateway drops its tools.
    let (ok, stdout, stderr) = talon(server.home.path(), &["mcp-servers", "remove", "everything"]);
    assert!(ok, "{stdout}{stderr}");
    until("the removed server's tools disappear", async || {
        !tool_names(&addr)
            .await
            .contains(&"mcp__everything__echo".to_string())
            && bridged().await.get("everything").is_none()
    })
    .await;
    let gone = client
        .delete(api("/v1/mcp-servers/everything"))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

/// Two gateways sharing one PostgreSQL database: a server added through one is connected by the
/// other (it hears `NOTIFY talon_mcp`, and reads the revision as a fallback), and removed alike.
/// Runs where `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets it).
#[tokio::test]
async fn gateways_sharing_postgresql_follow_each_others_changes() {
    let Some(url) = std::env::var("TALON_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("TALON_TEST_DATABASE_URL is not set; PostgreSQL variant not run here");
        return;
    };
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let schema = format!(
        "t_gw_{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let key = "11".repeat(32);
    let env = [
        ("TALON_DATABASE_URL", url.as_str()),
        ("TALON_DATABASE__SCHEMA", schema.as_str()),
        ("TALON_ENCRYPTION_KEY", key.as_str()),
        ("TALON_GATEWAY__TOKEN", TOKEN),
    ];
    let first = support::serve(&env, None);
    let second = support::serve(&env, None);
    let client = authed();
    let added = client
        .post(format!("http://{}/v1/mcp-servers", first.addr))
        .json(&json!({"name": "everything", "command": "node",
            "args": [entry.to_str().unwrap(), "stdio"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201, "{}", added.text().await.unwrap());
    until("the other gateway connects the server", async || {
        tool_names(&second.addr)
            .await
            .contains(&"mcp__everything__echo".to_string())
    })
    .await;
    let call = json!({"tool": "mcp__everything__echo", "args": {"message": "via the other"}});
    let (status, body) = support::invoke(&second.addr, Some(TOKEN), call).await;
    assert_eq!(status, 200, "{body}");
    let removed = client
        .delete(format!("http://{}/v1/mcp-servers/everything", second.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 200);
    until("the first gateway drops the server", async || {
        !tool_names(&first.addr)
            .await
            .contains(&"mcp__everything__echo".to_string())
    })
    .await;
    drop((first, second));
    let store = talon_store::Store::connect(&talon_store::StoreConfig::url(url))
        .await
        .unwrap();
    store
        .execute_admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}

//! The remote transports against server-everything's own HTTP servers (streamable HTTP and the
//! legacy HTTP+SSE one, from npm), a server that demands authorization, grants checked on
//! every call, and servers added and removed while the bridge runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::npm;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use talon_bridge::access::{Access, Caller, Grant, GrantsFuture};
use talon_bridge::{Bridge, Dialect, HttpConfig, ServerConfig, Startup, Transport};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall, ToolOutput};

/// server-everything listening on a free port in `mode` (`streamableHttp` or `sse`); killed
/// when dropped.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_everything(mode: &str) -> HttpServer {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("node")
        .arg(&entry)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node runs");
    let server = HttpServer { child, port };
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("server-everything ({mode}) did not listen on {port}");
}

fn remote(name: &str, transport: Transport) -> ServerConfig {
    let mut config = ServerConfig::new(name, transport);
    config.required = true;
    config.startup_timeout = Duration::from_secs(60);
    config
}

fn http(url: String) -> HttpConfig {
    HttpConfig {
        url,
        headers: BTreeMap::from([("X-Talon-Test".to_string(), "1".to_string())]),
        bearer: Some("test-token".into()),
        oauth: None,
        protocol_version: None,
    }
}

async fn call(
    registry: &Arc<Registry>,
    tool: &str,
    args: serde_json::Value,
    agent: Option<&str>,
) -> ToolOutput {
    let pipeline = Pipeline::builder(Arc::clone(registry))
        .rate_limiter(None)
        .build()
        .unwrap();
    let mut ctx = CallContext::new("transport-test");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    ctx.agent_key = agent.map(str::to_string);
    pipeline
        .call(Arc::new(ctx), ToolCall::new(tool, args))
        .await
        .output
}

#[tokio::test]
async fn streamable_http_and_legacy_sse_bridge_server_everything() {
    let streamable = start_everything("streamableHttp").await;
    let legacy = start_everything("sse").await;
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    let configs = [
        remote(
            "streamable",
            Transport::Http(http(format!("http://127.0.0.1:{}/mcp", streamable.port))),
        ),
        remote(
            "legacy",
            Transport::Sse(http(format!("http://127.0.0.1:{}/sse", legacy.port))),
        ),
    ];
    let connected = bridge.connect(&configs, Startup::Wait).await.unwrap();
    assert_eq!(connected.links.len(), 2, "{:?}", connected.failed);
    for server in ["streamable", "legacy"] {
        let out = call(
            &registry,
            &format!("mcp__{server}__echo"),
            json!({"message": format!("over {server}")}),
            None,
        )
        .await;
        assert!(
            !out.is_error && out.for_llm.contains(&format!("Echo: over {server}")),
            "{}",
            out.for_llm
        );
        let out = call(
            &registry,
            &format!("mcp__{server}__get-sum"),
            json!({"a": 20, "b": 22}),
            None,
        )
        .await;
        assert!(out.for_llm.contains("42"), "{}", out.for_llm);
    }
    // Resources come over the remote transports too.
    let out = call(
        &registry,
        "ListMcpResources",
        json!({"server": "legacy"}),
        None,
    )
    .await;
    assert!(
        out.for_llm.contains("\"server\": \"legacy\""),
        "{}",
        out.for_llm
    );
}

/// A server that answers every request with 401, as a server needing OAuth does.
async fn unauthorized_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 65536];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    port
}

#[tokio::test]
async fn a_server_demanding_authorization_says_what_to_run() {
    let port = unauthorized_server().await;
    for transport in [
        Transport::Http(http(format!("http://127.0.0.1:{port}/mcp"))),
        Transport::Sse(http(format!("http://127.0.0.1:{port}/sse"))),
    ] {
        let e = talon_bridge::Server::start("locked", &transport, Duration::from_secs(10))
            .await
            .expect_err("401");
        let message = e.to_string();
        assert!(
            message.contains("needs authorization")
                && message.contains("talon mcp-servers add locked --replace"),
            "{message}"
        );
    }
}

/// Grants held in memory, changed by the test between calls.
#[derive(Default)]
struct Grants(Mutex<Vec<(String, Grant)>>);

impl Access for Grants {
    fn grants<'a>(&'a self, _server: &'a str, caller: Caller<'a>) -> GrantsFuture<'a> {
        let found: Vec<Grant> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(agent, _)| Some(agent.as_str()) == caller.agent)
            .map(|(_, g)| g.clone())
            .collect();
        Box::pin(async move { Ok(found) })
    }
}

/// What a pipeline with the bridge's offer filter lists to `agent`.
async fn offered_to(
    registry: &Arc<Registry>,
    bridge: &Arc<Bridge>,
    agent: Option<&str>,
) -> Vec<String> {
    let pipeline = Pipeline::builder(Arc::clone(registry))
        .rate_limiter(None)
        .offer_filter(bridge.offer_filter())
        .build()
        .unwrap();
    let mut ctx = CallContext::new("listing");
    ctx.agent_key = agent.map(str::to_string);
    pipeline
        .offered_to(&ctx)
        .await
        .iter()
        .map(|t| t.spec().name.clone())
        .collect()
}

#[tokio::test]
async fn grants_hold_on_the_next_call_and_servers_come_and_go_at_runtime() {
    let streamable = start_everything("streamableHttp").await;
    let registry = Arc::new(Registry::new());
    let grants = Arc::new(Grants::default());
    let bridge = Bridge::new(
        &registry,
        Dialect::GoClaw,
        Some(Arc::clone(&grants) as Arc<dyn Access>),
    );
    let mut config = remote(
        "everything",
        Transport::Http(http(format!("http://127.0.0.1:{}/mcp", streamable.port))),
    );
    config.require_grant = true;
    bridge.add(config.clone()).await.unwrap();
    let echo = "mcp_everything__echo";
    let args = json!({"message": "granted?"});

    let out = call(&registry, echo, args.clone(), Some("helper")).await;
    assert!(
        out.is_error && out.for_llm.contains("may be used only with a grant"),
        "{}",
        out.for_llm
    );
    let grant = |allow: &[&str], deny: &[&str]| Grant {
        subject: "agent \"helper\"".into(),
        enabled: true,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    };
    *grants.0.lock().unwrap() = vec![("helper".into(), grant(&[], &[]))];
    let out = call(&registry, echo, args.clone(), Some("helper")).await;
    assert!(out.for_llm.contains("Echo: granted?"), "{}", out.for_llm);
    // Another agent has no grant of its own.
    let out = call(&registry, echo, args.clone(), Some("other")).await;
    assert!(out.is_error, "{}", out.for_llm);
    // Deny wins over allow.
    *grants.0.lock().unwrap() = vec![("helper".into(), grant(&["echo"], &["echo"]))];
    let out = call(&registry, echo, args.clone(), Some("helper")).await;
    assert!(
        out.is_error && out.for_llm.contains("denied"),
        "{}",
        out.for_llm
    );
    // An allow list lets only its tools through, in listings as in calls.
    *grants.0.lock().unwrap() = vec![("helper".into(), grant(&["get-sum"], &[]))];
    let listed = offered_to(&registry, &bridge, Some("helper")).await;
    assert!(
        listed.contains(&"mcp_everything__get-sum".to_string()),
        "{listed:?}"
    );
    assert!(
        !listed.contains(&"mcp_everything__echo".to_string()),
        "{listed:?}"
    );
    let stranger = offered_to(&registry, &bridge, Some("other")).await;
    assert!(
        !stranger.iter().any(|n| n.starts_with("mcp_everything__")),
        "{stranger:?}"
    );
    assert!(
        stranger.contains(&"mcp_list_resources".to_string()),
        "other tools stay"
    );
    let out = call(&registry, echo, args.clone(), Some("helper")).await;
    assert!(
        out.for_llm.contains("not among the tools granted"),
        "{}",
        out.for_llm
    );
    let out = call(
        &registry,
        "mcp_everything__get-sum",
        json!({"a": 1, "b": 2}),
        Some("helper"),
    )
    .await;
    assert!(out.for_llm.contains('3'), "{}", out.for_llm);
    // Resources need a grant as well.
    let out = call(
        &registry,
        "mcp_list_resources",
        json!({"server": "everything"}),
        Some("other"),
    )
    .await;
    assert!(
        out.for_llm.contains("may be used only with a grant"),
        "{}",
        out.for_llm
    );

    // Removed at runtime: tools and groups go at once.
    assert!(bridge.remove("everything"));
    assert!(registry.resolve(echo).is_none());
    assert!(registry.group("mcp").unwrap_or_default().is_empty());
    assert!(bridge.statuses().is_empty());
    // Added again in the background: its tools come back when it answers.
    config.require_grant = false;
    bridge.add_in_background(config);
    for _ in 0..300 {
        if registry.resolve(echo).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = call(&registry, echo, args, Some("anyone")).await;
    assert!(out.for_llm.contains("Echo: granted?"), "{}", out.for_llm);
}

/// A server whose first session expires and whose answer arrives only on a resumed stream.
struct Resuming {
    child: std::process::Child,
    port: u16,
}

impl Drop for Resuming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn stats(port: u16) -> serde_json::Value {
    reqwest::get(format!("http://127.0.0.1:{port}/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn streamable_http_reinitialises_an_expired_session_and_resumes_a_dropped_stream() {
    use std::io::BufRead;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/resuming_server.py"
    );
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Resuming {
        port: line.trim().strip_prefix("PORT ").unwrap().parse().unwrap(),
        child,
    };
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    let mut config = remote(
        "resuming",
        Transport::Http(HttpConfig {
            url: format!("http://127.0.0.1:{}/mcp", server.port),
            headers: BTreeMap::new(),
            bearer: None,
            oauth: None,
            protocol_version: None,
        }),
    );
    config.call_timeout = Duration::from_secs(20);
    bridge.connect(&[config], Startup::Wait).await.unwrap();
    // The first call ends the session at the server; the second finds it expired.
    for _ in 0..2 {
        let out = call(&registry, "mcp__resuming__echo", json!({}), None).await;
        assert!(
            !out.is_error && out.for_llm.contains("echo"),
            "{}",
            out.for_llm
        );
    }
    let seen = stats(server.port).await;
    assert_eq!(seen["initializations"], 2, "re-initialised once: {seen}");
    assert!(seen["expired_404"].as_u64().unwrap() >= 1, "{seen}");

    let out = call(&registry, "mcp__resuming__resume", json!({}), None).await;
    assert!(
        out.for_llm.contains("delivered after resuming"),
        "{}",
        out.for_llm
    );
    let seen = stats(server.port).await;
    assert_eq!(seen["resumed_with"][0], "ev-1", "{seen}");
}

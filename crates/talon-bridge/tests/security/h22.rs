//! Issue 22, Talon as the client of hostile MCP servers: a bridged name always means the same
//! server (item 10), a redirect never carries the configured credentials to another origin
//! (item 11), `mcp_tool_search` finds only tools the caller may call (item 14), and a result's
//! images are capped (item 16).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use talon_bridge::access::{Access, Caller, GrantsFuture};
use talon_bridge::{Bridge, Dialect, HttpConfig, ServerConfig, Startup, StdioConfig, Transport};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall, ToolOutput};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The fixture server named `name`, listing `tools`, with `env` added.
fn fixture(name: &str, tools: &str, env: &[(&str, &str)]) -> ServerConfig {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h22_server.py");
    let mut vars: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.insert("SERVER".into(), name.into());
    vars.insert("TOOLS".into(), tools.into());
    ServerConfig::stdio(
        name,
        StdioConfig {
            command: "python3".into(),
            args: vec![script.into()],
            env: vars,
            cwd: None,
        },
    )
}

fn pipeline(registry: &Arc<Registry>) -> Pipeline {
    Pipeline::builder(Arc::clone(registry))
        .rate_limiter(None)
        .build()
        .unwrap()
}

async fn call(pipeline: &Pipeline, tool: &str, input: serde_json::Value) -> ToolOutput {
    let mut ctx = CallContext::new("h22");
    ctx.permission_mode = PermissionMode::BypassPermissions;
    ctx.agent_key = Some("agent".into());
    pipeline
        .call(Arc::new(ctx), ToolCall::new(tool, input))
        .await
        .output
}

/// Item 10: a server named `a__b` would take `mcp__a__b__c`, the name of server `a`'s tool `b__c`,
/// by connecting first, and receive the arguments meant for `a`. Such a name is refused, and
/// the name keeps meaning server `a` whatever connects first.
#[tokio::test]
async fn h22_10_a_server_name_cannot_take_another_servers_tool_names() {
    for dialect in [Dialect::ClaudeCode, Dialect::GoClaw] {
        let registry = Arc::new(Registry::new());
        let bridge = Bridge::new(&registry, dialect, None);
        let squatter = bridge.add(fixture("a__b", "c", &[])).await;
        let error = squatter
            .expect_err("a server named a__b is refused")
            .to_string();
        assert!(
            error.contains("a__b") && error.contains("in a row"),
            "{error}"
        );
        bridge.add(fixture("a", "b__c", &[])).await.unwrap();
        let name = match dialect {
            Dialect::ClaudeCode => "mcp__a__b__c",
            Dialect::GoClaw => "mcp_a__b__c",
        };
        let out = call(&pipeline(&registry), name, json!({"secret": "s3cret"})).await;
        assert!(
            out.for_llm.contains("a got {\"secret\": \"s3cret\"}"),
            "{name} must reach server a: {}",
            out.for_llm
        );
        // Connecting (in any way) never lets it in.
        let connected = bridge
            .connect(&[fixture("a__b", "c", &[])], Startup::Wait)
            .await
            .unwrap();
        assert_eq!(connected.failed.len(), 1, "{:?}", connected.failed);
        bridge.add_in_background(fixture("b_", "x", &[]));
        assert_eq!(bridge.server_names(), ["a"]);
    }
    // Names ending in a separator meet `__` the same way (`a_` + `__x` is `a` + `___x`).
    for bad in ["a__b", "a_", "-a", "a-_b", "", &"x".repeat(41), "a.b"] {
        assert!(
            talon_bridge::names::check_server_name(bad).is_err(),
            "{bad:?}"
        );
    }
    for good in ["a", "my-server", "my_server", "gh2", &"x".repeat(40)] {
        assert!(
            talon_bridge::names::check_server_name(good).is_ok(),
            "{good:?}"
        );
    }
}

/// Item 10: two servers whose names are written alike (GoClaw writes `-` as `_`) cannot share
/// tool names: the second is not bridged, and the name keeps meaning the first.
#[tokio::test]
async fn h22_10_look_alike_servers_never_share_a_name() {
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::GoClaw, None);
    bridge.add(fixture("my-srv", "t", &[])).await.unwrap();
    bridge.add(fixture("my_srv", "t", &[])).await.unwrap();
    let out = call(
        &pipeline(&registry),
        "mcp_my_srv__t",
        json!({"secret": "x"}),
    )
    .await;
    assert!(out.for_llm.contains("my-srv got"), "{}", out.for_llm);
    assert_eq!(bridge.tool_names(), ["mcp_my_srv__t"]);
}

/// A minimal HTTP server at 127.0.0.1 answering every request with `response`; records each
/// request's head.
async fn recording_server(
    response: impl Fn(u16) -> String + Send + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 16 * 1024];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).to_lowercase());
            let _ = socket.write_all(response(port).as_bytes()).await;
        }
    });
    (port, heads)
}

/// Item 11: a configured server that redirects to another origin (here another port of the same
/// host) does not get Talon's request there, and with it the stored `X-Api-Key` and token; on
/// every transport.
#[tokio::test]
async fn h22_11_redirects_never_carry_credentials_to_another_origin() {
    let (elsewhere, arrived) = recording_server(|_| {
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
    })
    .await;
    let (configured, _) = recording_server(move |_| {
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    })
    .await;
    let http = HttpConfig {
        url: format!("http://127.0.0.1:{configured}/mcp"),
        headers: BTreeMap::from([("X-Api-Key".to_string(), "key-h22".to_string())]),
        bearer: Some("token-h22".into()),
        oauth: None,
        protocol_version: None,
    };
    for transport in [Transport::Http(http.clone()), Transport::Sse(http)] {
        let started =
            talon_bridge::Server::start("bouncing", &transport, Duration::from_secs(5)).await;
        assert!(started.is_err(), "nothing here answers MCP");
    }
    let arrived = arrived.lock().unwrap();
    assert!(
        !arrived
            .iter()
            .any(|h| h.contains("key-h22") || h.contains("token-h22")),
        "the credentials reached the other origin: {arrived:?}"
    );
}

/// Item 11, OAuth's own requests: a redirect to another origin (another port of the allowed
/// host) is followed through the address guard but without the request's credentials.
#[tokio::test]
async fn h22_11_oauth_redirects_drop_credentials_across_origins() {
    let (elsewhere, arrived) = recording_server(|_| {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".into()
    })
    .await;
    let (configured, _) = recording_server(move |_| {
        format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{elsewhere}/.well-known/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    })
    .await;
    let url = format!("http://127.0.0.1:{configured}/.well-known/x");
    let guard = talon_bridge::oauth_http::guard_for(&url).await.unwrap();
    let client = talon_bridge::oauth_http::GuardedOAuthHttp::new(guard).unwrap();
    let mut request = reqwest::Request::new(reqwest::Method::GET, url.parse().unwrap());
    for (name, value) in [
        ("authorization", "Basic secret-h22"),
        ("cookie", "session=secret-h22"),
    ] {
        request
            .headers_mut()
            .insert(name, reqwest::header::HeaderValue::from_static(value));
    }
    let response = client
        .send(
            request,
            rmcp::transport::auth::OAuthHttpRedirectPolicy::Follow,
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the redirect was followed");
    let arrived = arrived.lock().unwrap();
    assert_eq!(arrived.len(), 1);
    assert!(
        !arrived[0].contains("secret-h22"),
        "the credentials reached the other origin: {arrived:?}"
    );
}

/// Grants: nobody has one.
struct NoGrants;

impl Access for NoGrants {
    fn grants<'a>(&'a self, _: &'a str, _: Caller<'a>) -> GrantsFuture<'a> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// Item 14: in search mode, `mcp_tool_search` does not show a grant-only server's tools (name,
/// description, schema) to a caller without a grant, as calling them is refused.
#[tokio::test]
async fn h22_14_tool_search_hides_tools_the_caller_may_not_call() {
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, Some(Arc::new(NoGrants)));
    bridge.set_search_threshold(1);
    let mut vault = fixture(
        "vault",
        "payroll_forecast",
        &[(
            "DESCRIPTION",
            "Forecast of the confidential payroll budget.",
        )],
    );
    vault.require_grant = true;
    let open = fixture(
        "open",
        "weather_forecast",
        &[("DESCRIPTION", "Forecast of the weather.")],
    );
    bridge.connect(&[vault, open], Startup::Wait).await.unwrap();
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(None)
        .deferred_activator(bridge.activator())
        .offer_filter(bridge.offer_filter())
        .build()
        .unwrap();
    let out = call(
        &pipeline,
        "mcp_tool_search",
        json!({"query": "forecast payroll budget weather", "limit": 10}),
    )
    .await;
    assert!(
        out.for_llm.contains("mcp__open__weather_forecast"),
        "{}",
        out.for_llm
    );
    assert!(
        !out.for_llm.contains("payroll"),
        "a tool the caller may not call was shown: {}",
        out.for_llm
    );
    // The call path refuses it with the same check.
    let refused = call(&pipeline, "mcp__vault__payroll_forecast", json!({})).await;
    assert!(
        refused.is_error && refused.for_llm.contains("only with a grant"),
        "{}",
        refused.for_llm
    );

    // Now registered (a call by name activated it), it is still never suggested for a misspelt
    // name to a caller who may not call it.
    let typo = call(&pipeline, "mcp__vault__payroll_forecas", json!({})).await;
    assert!(
        typo.is_error && !typo.for_llm.contains("payroll_forecast"),
        "{}",
        typo.for_llm
    );
}

/// Item 16: images a server returns are capped per image and per result; what is over the cap is
/// replaced by a note saying what was dropped and why, so a session never stores (and re-sends)
/// them.
#[tokio::test]
async fn h22_16_image_results_are_capped() {
    let registry = Arc::new(Registry::new());
    let bridge = Bridge::new(&registry, Dialect::ClaudeCode, None);
    let six_mib = (6 * 1024 * 1024).to_string();
    let four_mib = (4 * 1024 * 1024).to_string();
    bridge
        .connect(
            &[
                fixture("big", "image", &[("IMAGE_BYTES", &six_mib)]),
                fixture(
                    "many",
                    "image",
                    &[("IMAGE_BYTES", &four_mib), ("IMAGES", "3")],
                ),
                fixture("small", "image", &[("IMAGE_BYTES", "100")]),
            ],
            Startup::Wait,
        )
        .await
        .unwrap();
    let pipeline = pipeline(&registry);

    let out = call(&pipeline, "mcp__big__image", json!({})).await;
    assert!(out.media.is_empty(), "a 6 MiB image is not kept");
    assert!(
        out.for_llm.contains("image attachment was dropped") && out.for_llm.contains("5 MiB"),
        "{}",
        out.for_llm
    );

    let out = call(&pipeline, "mcp__many__image", json!({})).await;
    assert_eq!(
        out.media.len(),
        2,
        "two 4 MiB images fit in 10 MiB, a third does not"
    );
    assert!(
        out.for_llm.contains("10 MiB of attachments per result"),
        "{}",
        out.for_llm
    );

    let out = call(&pipeline, "mcp__small__image", json!({})).await;
    assert_eq!(out.media.len(), 1);
    assert_eq!(out.media[0].data.len(), 100);
}

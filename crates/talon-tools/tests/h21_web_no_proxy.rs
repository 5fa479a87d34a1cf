//! Issue 21, item 12: with `HTTP_PROXY=http://localhost:PORT` and `NO_PROXY=localhost` (a common
//! set-up), a `web_fetch` of `http://localhost:…/` went direct and its name was resolved without
//! the address guard, because the proxy's host name was trusted for every connection. A local
//! listener stands in for the proxy, another for a loopback service; the fetcher is given the
//! routes those variables set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::http::{ok, serve};
use serde_json::json;
use talon_core::ToolCall;
use talon_net::StaticResolver;
use talon_tools::BuiltinConfig;
use talon_tools::web::WebConfig;

#[tokio::test]
async fn h21_12_a_no_proxy_target_named_like_the_proxy_is_still_checked() {
    let proxy = serve(
        "127.0.0.1",
        0,
        vec![(
            "http://site.test/page",
            ok("text/plain", "served via the proxy"),
        )],
    )
    .await;
    let loopback = serve(
        "127.0.0.1",
        0,
        vec![("/", ok("text/plain", "loopback service"))],
    )
    .await;
    // What any resolver answers for these names; the guard refuses loopback and metadata.
    let resolver = StaticResolver::new()
        .with("site.test", ["93.184.216.34".parse().unwrap()])
        .with("localhost", ["127.0.0.1".parse().unwrap()])
        .with("meta.test", ["169.254.169.254".parse().unwrap()]);
    let mut web = WebConfig {
        resolver: Arc::new(resolver),
        ..WebConfig::default()
    };
    web.fetch.extra_ports = vec![loopback.addr.port(), proxy.addr.port()];
    // What `HTTP_PROXY=http://localhost:<port>` and `NO_PROXY=localhost` set.
    web.fetch.proxy = Some(talon_web::ProxyRoutes {
        proxies: vec![("http", format!("http://localhost:{}", proxy.addr.port()))],
        no_proxy: "localhost".into(),
    });
    let pipeline = common::pipeline(&BuiltinConfig {
        web,
        ..BuiltinConfig::default()
    });
    let ctx = Arc::new(common::context(&std::env::temp_dir(), "proxy"));
    let call = |url: String| {
        let (pipeline, ctx) = (&pipeline, Arc::clone(&ctx));
        async move {
            pipeline
                .call(ctx, ToolCall::new("web_fetch", json!({"url": url})))
                .await
                .output
        }
    };

    // NO_PROXY sends these direct: they are dialled through the guard, which refuses loopback,
    // whatever the proxy is called.
    for port in [loopback.addr.port(), proxy.addr.port()] {
        let out = call(format!("http://localhost:{port}/")).await;
        assert!(out.is_error, "localhost:{port} reached: {}", out.for_llm);
        assert!(
            out.for_llm.contains("refused"),
            "refused by the guard: {}",
            out.for_llm
        );
    }
    assert_eq!(loopback.connections.load(Ordering::SeqCst), 0);

    // A target sent to the proxy is checked before it is sent.
    let out = call("http://meta.test/latest/meta-data/".into()).await;
    assert!(out.is_error, "{}", out.for_llm);

    // The proxy itself still works (its own name is resolved for it, unchecked).
    let out = call("http://site.test/page".into()).await;
    assert!(
        !out.is_error && out.for_llm.contains("served via the proxy"),
        "{}",
        out.for_llm
    );
    let requests = proxy.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "only the allowed target: {requests:?}");
    assert!(requests[0].starts_with("GET http://site.test/page HTTP/1.1"));
}

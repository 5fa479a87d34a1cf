//! `web_fetch` through an HTTP proxy (`HTTP_PROXY`'s routes, given to the fetcher as the
//! environment would give them): requests go to the proxy, and the target is still checked
//! first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use common::http::{ok, serve};
use serde_json::json;
use talon_core::ToolCall;
use talon_net::StaticResolver;
use talon_tools::BuiltinConfig;
use talon_tools::web::WebConfig;

#[tokio::test]
async fn requests_go_through_the_proxy_and_targets_are_still_checked() {
    let proxy = serve(
        "127.0.0.1",
        0,
        vec![(
            "http://site.test/page",
            ok("text/plain", "served via the proxy"),
        )],
    )
    .await;
    let resolver = StaticResolver::new()
        .with("site.test", ["93.184.216.34".parse().unwrap()])
        .with("meta.test", ["169.254.169.254".parse().unwrap()]);
    let mut web = WebConfig {
        resolver: Arc::new(resolver),
        ..WebConfig::default()
    };
    // What `HTTP_PROXY=<proxy>` with no `NO_PROXY` sets.
    web.fetch.proxy = Some(talon_web::ProxyRoutes {
        proxies: vec![("http", proxy.base())],
        no_proxy: String::new(),
    });
    let pipeline = common::pipeline(&BuiltinConfig {
        web,
        ..BuiltinConfig::default()
    });
    let ctx = Arc::new(common::context(&std::env::temp_dir(), "proxy"));
    let call = |url: &str| {
        let (pipeline, ctx) = (&pipeline, Arc::clone(&ctx));
        let args = json!({"url": url});
        async move {
            pipeline
                .call(ctx, ToolCall::new("web_fetch", args))
                .await
                .output
        }
    };
    let out = call("http://site.test/page").await;
    assert!(
        !out.is_error && out.for_llm.contains("served via the proxy"),
        "{}",
        out.for_llm
    );
    for refused in [
        "http://10.0.0.5/admin",
        "http://meta.test/latest/meta-data/",
    ] {
        let out = call(refused).await;
        assert!(out.is_error, "{refused}: {}", out.for_llm);
    }
    let requests = proxy.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("GET http://site.test/page HTTP/1.1"),
        "{}",
        requests[0]
    );
}

//! `web_search` and `WebSearch` through the pipeline, each provider against a local server that
//! replays its response shape, with failures and the fallback chain.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use common::http::{Reply, ok, serve, status};
use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall, ToolOutput};
use talon_tools::BuiltinConfig;
use talon_tools::web::{SearchProvider, WebConfig, WebPolicy};

const BRAVE: &str = r#"{"type":"search","query":{"original":"rust sandbox"},"web":{"type":"search","results":[
 {"title":"Bubblewrap <strong>sandbox</strong>","url":"https://github.com/containers/bubblewrap","description":"Low-level unprivileged <strong>sandboxing</strong> tool","age":"2 days ago"},
 {"title":"Landlock","url":"https://docs.kernel.org/userspace-api/landlock.html","description":"Unprivileged access control","age":"March 3, 2025"},
 {"title":"Spam","url":"https://ads.example.net/buy","description":"Buy now"}]}}"#;

const DDG: &str = r#"<html><body><div id="links">
<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
<h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=abc">Rust Programming Language</a></h2>
<a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F">A language empowering everyone to build <b>reliable</b> software.</a>
</div></div>
<div class="result results_links result--ad"><h2 class="result__title"><a class="result__a" href="https://ads.example.com/">Ad</a></h2></div>
<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
<h2 class="result__title"><a rel="nofollow" class="result__a" href="https://doc.rust-lang.org/book/">The Rust Book</a></h2>
<a class="result__snippet" href="https://doc.rust-lang.org/book/">An introductory book about Rust.</a>
</div></div></div></body></html>"#;

const SEARXNG: &str = r#"{"query":"tides","number_of_results":2,"results":[
 {"url":"https://en.wikipedia.org/wiki/Tide","title":"Tide - Wikipedia","content":"Tides are the rise and fall of sea levels.","publishedDate":"2025-10-01T00:00:00"},
 {"url":"https://www.noaa.gov/tides","title":"NOAA Tides","content":"Tide predictions."}]}"#;

const TAVILY: &str = r#"{"query":"delta works","results":[
 {"title":"Delta Works","url":"https://en.wikipedia.org/wiki/Delta_Works","content":"A series of construction projects in the Netherlands.","score":0.98}],"response_time":0.4}"#;

fn pipeline(search: Vec<SearchProvider>, policy: WebPolicy) -> Pipeline {
    let web = WebConfig {
        default: policy,
        search,
        ..WebConfig::default()
    };
    common::pipeline(&BuiltinConfig {
        web,
        ..BuiltinConfig::default()
    })
}

async fn call(p: &Pipeline, tool: &str, args: Value) -> ToolOutput {
    let ctx = Arc::new(common::context(&std::env::temp_dir(), "search"));
    p.call(ctx, ToolCall::new(tool, args)).await.output
}

#[tokio::test]
async fn every_provider_answers_in_its_own_format() {
    let server = serve(
        "127.0.0.1",
        0,
        vec![
            ("/brave", ok("application/json", BRAVE)),
            ("/ddg", ok("text/html", DDG)),
            ("/search", ok("application/json", SEARXNG)),
            ("/tavily", ok("application/json", TAVILY)),
        ],
    )
    .await;
    let base = server.base();
    let brave = SearchProvider::Brave {
        endpoint: format!("{base}/brave"),
        api_key: Some("brave-test-key-123".into()),
    };
    let p = pipeline(vec![brave], WebPolicy::default());
    let out = call(
        &p,
        "web_search",
        json!({"query": "rust sandbox", "count": 5, "freshness": "week", "country": "DE", "search_lang": "de"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert!(out.for_llm.contains("answered by Brave Search"));
    assert!(out.for_llm.contains("1. Bubblewrap sandbox\n   https://github.com/containers/bubblewrap\n   Low-level unprivileged sandboxing tool\n   Age: 2 days ago"), "{}", out.for_llm);
    assert!(out.for_llm.contains("<<<EXTERNAL_UNTRUSTED_CONTENT id="));
    let request = server.requests.lock().unwrap().last().cloned().unwrap();
    for expected in [
        "GET /brave?q=rust+sandbox&count=5&freshness=pw&country=de&search_lang=de",
        "x-subscription-token: brave-test-key-123",
    ] {
        assert!(
            request
                .to_ascii_lowercase()
                .contains(&expected.to_ascii_lowercase()),
            "{expected}: {request}"
        );
    }

    let ddg = SearchProvider::DuckDuckGo {
        endpoint: format!("{base}/ddg"),
    };
    let p = pipeline(vec![ddg], WebPolicy::default());
    let out = call(&p, "web_search", json!({"query": "rust"})).await;
    assert!(
        out.for_llm.contains("answered by DuckDuckGo"),
        "{}",
        out.for_llm
    );
    assert!(out.for_llm.contains("1. Rust Programming Language\n   https://www.rust-lang.org/\n   A language empowering everyone to build reliable software."), "{}", out.for_llm);
    assert!(out.for_llm.contains("2. The Rust Book"));
    assert!(!out.for_llm.contains("ads.example.com"));

    let searx = SearchProvider::Searxng {
        base_url: base.clone(),
    };
    let p = pipeline(vec![searx], WebPolicy::default());
    let out = call(
        &p,
        "web_search",
        json!({"query": "tides", "freshness": "month"}),
    )
    .await;
    assert!(
        out.for_llm.contains("answered by SearXNG")
            && out.for_llm.contains("Tide - Wikipedia")
            && out.for_llm.contains("Age: 2025-10-01"),
        "{}",
        out.for_llm
    );
    let request = server.requests.lock().unwrap().last().cloned().unwrap();
    assert!(
        request.contains("format=json") && request.contains("time_range=month"),
        "{request}"
    );

    let tavily = SearchProvider::Tavily {
        endpoint: format!("{base}/tavily"),
        api_key: Some("tvly-test".into()),
    };
    let p = pipeline(vec![tavily], WebPolicy::default());
    let out = call(
        &p,
        "WebSearch",
        json!({"query": "delta works", "allowed_domains": ["wikipedia.org"]}),
    )
    .await;
    assert!(
        out.for_llm.contains("answered by Tavily") && out.for_llm.contains("Delta Works"),
        "{}",
        out.for_llm
    );
    let request = server.requests.lock().unwrap().last().cloned().unwrap();
    assert!(
        request
            .to_ascii_lowercase()
            .contains("authorization: bearer tvly-test"),
        "{request}"
    );
    assert!(
        request.contains("\"include_domains\":[\".wikipedia.org\"]"),
        "{request}"
    );
}

#[tokio::test]
async fn failing_providers_fall_back_in_order_and_are_named() {
    let server = serve(
        "127.0.0.1",
        0,
        vec![
            (
                "/brave",
                Reply {
                    status: 429,
                    headers: vec![("Retry-After".into(), "30".into())],
                    body: b"{\"error\":\"rate limited\"}".to_vec(),
                },
            ),
            (
                "/ddg",
                ok(
                    "text/html",
                    "<html><body><p>Please verify you are human</p></body></html>",
                ),
            ),
            ("/search", ok("application/json", SEARXNG)),
            ("/broken", status(502, "bad gateway")),
        ],
    )
    .await;
    let base = server.base();
    let chain = vec![
        SearchProvider::Tavily {
            endpoint: format!("{base}/tavily"),
            api_key: None,
        },
        SearchProvider::Brave {
            endpoint: format!("{base}/brave"),
            api_key: Some("k".into()),
        },
        SearchProvider::DuckDuckGo {
            endpoint: format!("{base}/ddg"),
        },
        SearchProvider::Searxng {
            base_url: base.clone(),
        },
    ];
    let p = pipeline(chain, WebPolicy::default());
    let out = call(&p, "web_search", json!({"query": "tides"})).await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("answered by SearXNG"),
        "{}",
        out.for_llm
    );
    for failure in [
        "Tavily: no API key is configured",
        "Brave Search: rate limited (HTTP 429), retry after 30 s",
        "DuckDuckGo: the response was not understood (no result blocks on the page)",
    ] {
        assert!(out.for_llm.contains(failure), "{failure}: {}", out.for_llm);
    }

    let chain = vec![
        SearchProvider::Brave {
            endpoint: format!("{base}/broken"),
            api_key: Some("k".into()),
        },
        SearchProvider::Searxng {
            base_url: format!("{base}/nowhere"),
        },
    ];
    let p = pipeline(chain, WebPolicy::default());
    let out = call(&p, "web_search", json!({"query": "tides"})).await;
    assert!(out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("every search provider failed")
            && out.for_llm.contains("Brave Search: HTTP 502: bad gateway")
            && out.for_llm.contains("SearXNG: HTTP 404"),
        "{}",
        out.for_llm
    );

    let p = pipeline(vec![], WebPolicy::default());
    let out = call(&p, "web_search", json!({"query": "tides"})).await;
    assert!(out.is_error && out.for_llm.contains("no search provider is configured"));
    for (args, needle) in [
        (json!({"query": " "}), "query is empty"),
        (
            json!({"query": "x", "count": 50}),
            "count must be between 1 and 20",
        ),
        (
            json!({"query": "x", "freshness": "decade"}),
            "unknown freshness",
        ),
        (
            json!({"query": "x", "country": "Germany"}),
            "two-letter code",
        ),
    ] {
        let out = call(&p, "web_search", args.clone()).await;
        assert!(
            out.is_error && out.for_llm.contains(needle),
            "{args}: {}",
            out.for_llm
        );
    }
}

#[tokio::test]
async fn domain_filters_drop_results_from_the_query_and_the_agent_policy() {
    let server = serve(
        "127.0.0.1",
        0,
        vec![("/brave", ok("application/json", BRAVE))],
    )
    .await;
    let brave = || SearchProvider::Brave {
        endpoint: format!("{}/brave", server.base()),
        api_key: Some("k".into()),
    };
    let p = pipeline(vec![brave()], WebPolicy::default());
    let out = call(
        &p,
        "WebSearch",
        json!({"query": "sandbox", "blocked_domains": ["example.net"]}),
    )
    .await;
    assert!(
        !out.for_llm.contains("ads.example.net") && out.for_llm.contains("bubblewrap"),
        "{}",
        out.for_llm
    );
    assert!(
        out.for_llm
            .contains("1 results were dropped by the domain filters")
    );
    let out = call(
        &p,
        "WebSearch",
        json!({"query": "sandbox", "allowed_domains": ["kernel.org"]}),
    )
    .await;
    assert!(
        out.for_llm.contains("docs.kernel.org") && !out.for_llm.contains("github.com"),
        "{}",
        out.for_llm
    );
    let policy = WebPolicy {
        deny_domains: vec![".github.com".into()],
        ..WebPolicy::default()
    };
    let p = pipeline(vec![brave()], policy);
    let out = call(&p, "web_search", json!({"query": "sandbox"})).await;
    assert!(
        !out.for_llm.contains("github.com") && out.for_llm.contains("docs.kernel.org"),
        "{}",
        out.for_llm
    );
}

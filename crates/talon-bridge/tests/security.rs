//! The bridge's security suite (issue 21, `h21_…`). URLs a remote server advertises (OAuth
//! metadata and endpoints, redirects) get no more reach than the configured server: a server
//! configured at 127.0.0.1 may keep its authorization server on 127.0.0.1, but cannot send Talon
//! to another loopback address (127.0.0.2 stands for any internal address the operator did not
//! configure). Issue 22's regressions (`h22_…`) are in `security/h22.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod h22;
mod h22_7;
mod h22_9;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use talon_bridge::HttpConfig;
use talon_bridge::oauth::{OAuthConfig, TokenVault, VaultFuture};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct NoVault;

impl TokenVault for NoVault {
    fn load<'a>(&'a self, _: &'a str) -> VaultFuture<'a, Option<String>> {
        Box::pin(async { Ok(None) })
    }
    fn save<'a>(&'a self, _: &'a str, _: String) -> VaultFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn clear<'a>(&'a self, _: &'a str) -> VaultFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// An HTTP server at `ip` answering each path with what `route` gives (as JSON), 404 where it
/// gives nothing; counts the connections it gets.
async fn http_server(
    ip: &str,
    route: impl Fn(&str) -> Option<String> + Send + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = vec![0u8; 16 * 1024];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let response = match route(&path) {
                Some(body) => format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ),
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string(),
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    (base, hits)
}

/// An MCP server at 127.0.0.1 whose protected-resource metadata names `authorization_server`;
/// tries to sign in to it and returns the error.
async fn sign_in_naming(authorization_server: &str) -> String {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let resource = format!("{base}/mcp");
    let metadata = serde_json::json!({
        "resource": resource,
        "authorization_servers": [authorization_server],
    })
    .to_string();
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 16 * 1024];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let response = if path.starts_with("/.well-known/oauth-protected-resource") {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{metadata}",
                    metadata.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
            };
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    let oauth = OAuthConfig {
        client_id: None,
        client_secret: None,
        client_metadata_url: None,
        scopes: Vec::new(),
        vault: Arc::new(NoVault),
    };
    let http = HttpConfig {
        url: resource,
        headers: BTreeMap::new(),
        bearer: None,
        oauth: Some(oauth.clone()),
        protocol_version: None,
    };
    talon_bridge::oauth::login("hostile", &http, &oauth, |_| {}, Duration::from_secs(5))
        .await
        .expect_err("nothing here completes a sign-in")
        .to_string()
}

fn authorization_metadata(issuer: &str) -> String {
    serde_json::json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    })
    .to_string()
}

#[tokio::test]
async fn h21_arch_oauth_urls_guarded() {
    // An address the configured server does not have: never contacted.
    let (elsewhere, elsewhere_hits) = http_server("127.0.0.2", |_| None).await;
    let error = sign_in_naming(&elsewhere).await;
    assert_eq!(
        elsewhere_hits.load(Ordering::SeqCst),
        0,
        "Talon fetched {elsewhere}, which only the server's metadata named ({error})"
    );

    // The configured server's own host (another port): reached as before.
    let issuer_slot = Arc::new(std::sync::Mutex::new(String::new()));
    let slot = Arc::clone(&issuer_slot);
    let (same_host, same_host_hits) = http_server("127.0.0.1", move |path| {
        path.starts_with("/.well-known/")
            .then(|| authorization_metadata(&slot.lock().unwrap()))
    })
    .await;
    *issuer_slot.lock().unwrap() = same_host.clone();
    let _ = sign_in_naming(&same_host).await;
    assert!(
        same_host_hits.load(Ordering::SeqCst) > 0,
        "the authorization server on the configured server's host was not reached"
    );
}

/// A redirect is a URL the server names too: the configured server cannot bounce Talon's MCP
/// requests (and the credentials on them) to an address the operator did not configure.
#[tokio::test]
async fn h21_arch_redirects_stay_on_the_configured_origin() {
    let (elsewhere, elsewhere_hits) = http_server("127.0.0.2", |_| None).await;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let location = format!("{elsewhere}/mcp");
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 16 * 1024];
            let _ = socket.read(&mut buf).await;
            let response = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    let http = HttpConfig {
        url,
        headers: BTreeMap::from([("X-Api-Key".to_string(), "secret".to_string())]),
        bearer: None,
        oauth: None,
        protocol_version: None,
    };
    let started = talon_bridge::Server::start(
        "bouncing",
        &talon_bridge::Transport::Http(http),
        Duration::from_secs(5),
    )
    .await;
    assert!(started.is_err(), "nothing here answers MCP");
    assert_eq!(
        elsewhere_hits.load(Ordering::SeqCst),
        0,
        "Talon followed the server's redirect to {elsewhere}"
    );
}

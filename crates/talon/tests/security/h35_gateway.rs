//! Issue 35, the gateway: weak tokens refused at start, guessing throttled per peer, and slow
//! clients unable to lock anyone out before authentication.

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support;

const STRONG: &str = "h35-gateway-token-q7Vd2mXo9LpZ4rTn";

/// The README's example token and a one-character one are refused before anything starts, with
/// the way to make a good one.
#[test]
fn h35_weak_gateway_tokens_are_refused_at_start() {
    for weak in ["change-me", "x", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"] {
        let home = tempfile::tempdir().unwrap();
        let out = support::command(home.path())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("TALON_GATEWAY__TOKEN", weak)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{weak}: {stderr}");
        assert!(
            stderr.contains("gateway.token") && stderr.contains("talon init --token"),
            "{weak}: {stderr}"
        );
    }
    // What `talon init --token` prints is accepted.
    let home = tempfile::tempdir().unwrap();
    let out = support::command(home.path())
        .args(["init", "--token"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.len() >= 40, "{token}");
    let server = support::serve(&[("TALON_GATEWAY__TOKEN", &token)], None);
    drop(server);
}

/// Wrong guesses from one peer are slowed to one a second; while a peer is out of tries even the
/// right token is not checked (so a right guess looks like a wrong one), and it works again once
/// the peer waits.
#[tokio::test]
async fn h35_wrong_token_guesses_are_throttled_per_peer() {
    let server = support::serve(&[("TALON_GATEWAY__TOKEN", STRONG)], None);
    let call = json!({"tool": "datetime", "args": {}});
    let mut statuses = Vec::new();
    for guess in 0..40 {
        let (status, _) = support::invoke(
            &server.addr,
            Some(&format!("guess-{guess:030}")),
            call.clone(),
        )
        .await;
        statuses.push(status);
    }
    assert!(statuses[..10].iter().all(|s| *s == 401), "{statuses:?}");
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert!(throttled >= 25, "guessing was not slowed: {statuses:?}");
    // Right after a refused guess the peer is out of tries, so the right token is not checked.
    // A try comes back every second, so a machine slow enough to let one come back between the
    // two requests sees the token accepted (that is not a flaw): try a few times.
    let mut answers = Vec::new();
    for round in 0..5 {
        let (refused, _) = support::invoke(
            &server.addr,
            Some(&format!("again-{round:030}")),
            call.clone(),
        )
        .await;
        let (status, body) = support::invoke(&server.addr, Some(STRONG), call.clone()).await;
        if refused == 429 && status == 429 {
            assert!(body.to_string().contains("retry in"), "{body}");
            answers.clear();
            break;
        }
        answers.push((refused, status, body));
    }
    assert!(
        answers.is_empty(),
        "the right token was checked while throttled: {answers:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (status, body) = support::invoke(&server.addr, Some(STRONG), call).await;
    assert_eq!(status, 200, "{body}");
}

/// 1,100 requests that never finish their headers neither exhaust the gateway's descriptors nor
/// keep `/healthz` or an authenticated caller waiting.
#[tokio::test]
async fn h35_slow_clients_do_not_lock_out_health_or_callers() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    // This test holds the connections, so it needs the descriptors too.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        setrlimit(Resource::RLIMIT_NOFILE, hard.min(8192).max(soft), hard).unwrap();
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        soft >= 1_300,
        "the test needs 1,300 descriptors; the hard limit allows {soft}"
    );
    let server = support::serve(&[("TALON_GATEWAY__TOKEN", STRONG)], None);
    let mut slow = Vec::new();
    for _ in 0..1_100 {
        let Ok(mut stream) = tokio::net::TcpStream::connect(&server.addr).await else {
            continue;
        };
        let _ = stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await;
        slow.push(stream);
    }
    assert!(slow.len() > 1_000, "only {} connected", slow.len());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let health = client
        .get(format!("http://{}/healthz", server.addr))
        .send()
        .await
        .expect("/healthz answered while slow clients hold connections");
    assert_eq!(health.status(), 200);
    let (status, body) = support::invoke(
        &server.addr,
        Some(STRONG),
        json!({"tool": "datetime", "args": {}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The header-read timeout closes what the cap left open.
    tokio::time::sleep(talon_gateway::HEADER_READ_TIMEOUT + Duration::from_secs(2)).await;
    let closed = slow.iter().filter(|stream| is_closed(stream)).count();
    assert!(closed > 1_000, "only {closed} slow connections were closed");
}

/// Whether the server closed `stream` (whatever it wrote before).
fn is_closed(stream: &tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match stream.try_read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

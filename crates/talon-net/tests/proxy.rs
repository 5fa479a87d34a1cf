//! The Unix-socket proxy and the bridge, end to end over real sockets (no internet): local echo
//! and HTTP servers on 127.0.0.1, a static resolver, and a policy that allows 127.0.0.1/32.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use talon_net::{
    AddressPolicy, Bridge, DomainPolicy, Guard, Proxy, ProxyConfig, StaticResolver, Violations,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address parses")
}

fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("allowed.test", [ip("127.0.0.1")])
        .with("blocked.allowed.test", [ip("127.0.0.1")])
        .with("evil.test", [ip("127.0.0.1")])
        .with("meta.test", [ip("169.254.169.254")])
        .with("rebind.test", [ip("93.184.216.34"), ip("169.254.169.254")])
}

fn domains() -> DomainPolicy {
    DomainPolicy::parse(
        Some([
            ".allowed.test",
            "meta.test",
            "rebind.test",
            "ghost.test",
            "127.0.0.1",
            "169.254.169.254",
            "[::ffff:127.0.0.1]",
        ]),
        ["blocked.allowed.test"],
    )
    .expect("domain policy parses")
}

fn loopback_allowed() -> AddressPolicy {
    AddressPolicy::allowing(["127.0.0.1/32"]).expect("cidr parses")
}

struct Running {
    _dir: tempfile::TempDir,
    path: PathBuf,
    violations: Violations,
    cancel: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

fn start_proxy_with(addresses: AddressPolicy, config: ProxyConfig) -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("proxy.sock");
    let guard = Guard::new(domains(), addresses, Arc::new(resolver()));
    let proxy = Proxy::new(Arc::new(guard))
        .with_config(config)
        .bind(&path)
        .expect("proxy binds");
    let violations = proxy.violations();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(proxy.serve(cancel.clone()));
    Running {
        _dir: dir,
        path,
        violations,
        cancel,
        task,
    }
}

fn start_proxy(addresses: AddressPolicy) -> Running {
    start_proxy_with(addresses, ProxyConfig::default())
}

/// An echo server on 127.0.0.1; returns its port.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let port = listener.local_addr().expect("echo addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

/// A one-request-per-connection HTTP server on 127.0.0.1. Each request head (and body, if it
/// has a Content-Length) is sent on the channel; the answer is `200` with body `hello from origin`.
async fn http_server() -> (u16, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let port = listener.local_addr().expect("http addr").port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let head = read_head(&mut s).await;
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().expect("length"))
                    })
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                s.read_exact(&mut body).await.expect("read body");
                let _ = tx.send((head, body));
                let reply = "HTTP/1.1 200 OK\r\nContent-Length: 17\r\nConnection: close\r\n\r\n\
                             hello from origin";
                s.write_all(reply.as_bytes()).await.expect("write reply");
            });
        }
    });
    (port, rx)
}

/// Reads up to and including the blank line that ends an HTTP head.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(IO_TIMEOUT, s.read(&mut byte))
            .await
            .expect("head in time")
            .expect("read head");
        if n == 0 {
            break;
        }
        out.push(byte[0]);
    }
    String::from_utf8(out).expect("head is utf8")
}

async fn read_all<S: AsyncRead + Unpin>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(IO_TIMEOUT, s.read_to_end(&mut out))
        .await
        .expect("response in time")
        .expect("read response");
    out
}

async fn connect(path: &Path) -> UnixStream {
    UnixStream::connect(path).await.expect("connect to proxy")
}

async fn assert_echo<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, msg: &[u8]) {
    s.write_all(msg).await.expect("write through tunnel");
    let mut back = vec![0u8; msg.len()];
    tokio::time::timeout(IO_TIMEOUT, s.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("read echo");
    assert_eq!(back, msg);
}

async fn http_connect<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, target: &str) -> String {
    let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write CONNECT");
    read_head(s).await
}

/// Greets with no-auth and sends a CONNECT request; returns the reply code.
async fn socks_connect<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    command: u8,
    atyp: u8,
    addr: &[u8],
    port: u16,
) -> u8 {
    s.write_all(&[5, 1, 0]).await.expect("greeting");
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).await.expect("method choice");
    assert_eq!(choice, [5, 0], "no-auth accepted");
    let mut req = vec![5, command, 0, atyp];
    if atyp == 3 {
        req.push(u8::try_from(addr.len()).expect("short name"));
    }
    req.extend_from_slice(addr);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.expect("request");
    let mut reply = [0u8; 4];
    tokio::time::timeout(IO_TIMEOUT, s.read_exact(&mut reply))
        .await
        .expect("reply in time")
        .expect("read reply");
    assert_eq!(reply[0], 5);
    let rest = match reply[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        other => panic!("unexpected bound address type {other}"),
    };
    let mut bound = vec![0u8; rest];
    s.read_exact(&mut bound).await.expect("bound address");
    reply[1]
}

#[tokio::test]
async fn http_connect_to_allowed_name_tunnels_bytes() {
    let echo = echo_server().await;
    let proxy = start_proxy(loopback_allowed());
    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, &format!("allowed.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_echo(&mut s, b"ping through CONNECT").await;
    assert!(proxy.violations.is_empty());
}

#[tokio::test]
async fn http_connect_to_denied_domains_gets_403_and_violation() {
    let proxy = start_proxy(loopback_allowed());

    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, "evil.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403 Forbidden"), "{head}");
    assert!(head.contains("X-Proxy-Error: blocked-by-talon"), "{head}");
    let body = String::from_utf8(read_all(&mut s).await).expect("utf8 body");
    assert_eq!(
        body,
        "connection to evil.test:443 refused: not in the allowed domains\n"
    );

    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, "Blocked.Allowed.Test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");

    let v = proxy.violations.drain();
    assert_eq!(v.len(), 2);
    assert_eq!(
        v[0].to_string(),
        "network: connection to evil.test:443 refused (not in the allowed domains)"
    );
    assert_eq!((v[0].host.as_str(), v[0].port), ("evil.test", 443));
    assert_eq!(
        v[1].to_string(),
        "network: connection to blocked.allowed.test:443 refused (it matches the denied \
         domain `blocked.allowed.test`)"
    );
    assert!(proxy.violations.is_empty(), "drained");
}

#[tokio::test]
async fn http_connect_to_rebinding_and_metadata_names_refused() {
    let proxy = start_proxy(loopback_allowed());
    for name in ["rebind.test", "meta.test"] {
        let mut s = connect(&proxy.path).await;
        let head = http_connect(&mut s, &format!("{name}:80")).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{name}: {head}");
        let body = String::from_utf8(read_all(&mut s).await).expect("utf8");
        assert!(
            body.contains("169.254.169.254 is a cloud metadata address"),
            "{body}"
        );
    }
    let report = proxy.violations.report().expect("two refusals");
    assert_eq!(report.lines().count(), 2, "{report}");
    assert!(report.starts_with("network: connection to rebind.test:80 refused ("));
}

#[tokio::test]
async fn loopback_refused_when_policy_does_not_allow_it() {
    let echo = echo_server().await;
    let proxy = start_proxy(AddressPolicy::public_only());

    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, &format!("allowed.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = String::from_utf8(read_all(&mut s).await).expect("utf8");
    assert!(body.contains("127.0.0.1 is a loopback address"), "{body}");

    // The IPv4-mapped spelling is loopback too.
    let mut s = connect(&proxy.path).await;
    let mapped = "::ffff:127.0.0.1"
        .parse::<std::net::Ipv6Addr>()
        .expect("v6");
    let code = socks_connect(&mut s, 1, 4, &mapped.octets(), echo).await;
    assert_eq!(code, 0x02, "refused by ruleset");

    let v = proxy.violations.drain();
    assert_eq!(v.len(), 2);
    assert!(
        v[1].reason
            .starts_with("::ffff:127.0.0.1 is a loopback address"),
        "{}",
        v[1]
    );
}

#[tokio::test]
async fn socks5_domain_connect_allowed_and_denied() {
    let echo = echo_server().await;
    let proxy = start_proxy(loopback_allowed());

    let mut s = connect(&proxy.path).await;
    let code = socks_connect(&mut s, 1, 3, b"allowed.test", echo).await;
    assert_eq!(code, 0x00, "succeeded");
    assert_echo(&mut s, b"ping through SOCKS5").await;

    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 3, b"evil.test", 443).await, 0x02);

    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 3, b"meta.test", 80).await, 0x02);

    // Allowed by name but unknown to the resolver: host unreachable, not a violation.
    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 3, b"ghost.test", 80).await, 0x04);

    // A hostile name with control characters is refused and logged escaped.
    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 3, b"a\nb", 80).await, 0x02);

    let v = proxy.violations.drain();
    let hosts: Vec<&str> = v.iter().map(|x| x.host.as_str()).collect();
    assert_eq!(hosts, ["evil.test", "meta.test", "a\\nb"]);
}

#[tokio::test]
async fn socks5_ipv4_metadata_literal_refused() {
    let proxy = start_proxy(loopback_allowed());
    let mut s = connect(&proxy.path).await;
    let code = socks_connect(&mut s, 1, 1, &[169, 254, 169, 254], 80).await;
    assert_eq!(code, 0x02);
    let v = proxy.violations.drain();
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].to_string(),
        "network: connection to 169.254.169.254:80 refused (169.254.169.254 is a cloud \
         metadata address, never reachable from tools)"
    );
}

#[tokio::test]
async fn socks5_ipv4_and_mapped_ipv6_literals_reach_allowed_loopback() {
    let echo = echo_server().await;
    let proxy = start_proxy(loopback_allowed());

    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 1, &[127, 0, 0, 1], echo).await, 0);
    assert_echo(&mut s, b"v4 literal").await;

    let mapped = "::ffff:127.0.0.1"
        .parse::<std::net::Ipv6Addr>()
        .expect("v6");
    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 1, 4, &mapped.octets(), echo).await, 0);
    assert_echo(&mut s, b"mapped literal, dialled as IPv4").await;
    assert!(proxy.violations.is_empty());
}

#[tokio::test]
async fn socks5_unsupported_command_and_address_type() {
    let proxy = start_proxy(loopback_allowed());

    // BIND (0x02) is not supported.
    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 2, 1, &[127, 0, 0, 1], 80).await, 0x07);
    // UDP ASSOCIATE (0x03) neither.
    let mut s = connect(&proxy.path).await;
    assert_eq!(socks_connect(&mut s, 3, 1, &[127, 0, 0, 1], 80).await, 0x07);

    // Address type 0x09 does not exist.
    let mut s = connect(&proxy.path).await;
    s.write_all(&[5, 1, 0]).await.expect("greeting");
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).await.expect("choice");
    s.write_all(&[5, 1, 0, 9, 1, 2, 3, 4])
        .await
        .expect("request");
    let reply = read_all(&mut s).await;
    assert_eq!(reply.get(..2), Some(&[5u8, 0x08][..]));

    // Only username/password offered: no acceptable method.
    let mut s = connect(&proxy.path).await;
    s.write_all(&[5, 1, 2]).await.expect("greeting");
    assert_eq!(read_all(&mut s).await, [5, 0xff]);
    assert!(proxy.violations.is_empty());
}

#[tokio::test]
async fn absolute_form_get_is_forwarded_in_origin_form() {
    let (port, mut seen) = http_server().await;
    let proxy = start_proxy(loopback_allowed());

    let mut s = connect(&proxy.path).await;
    let req = format!(
        "GET http://allowed.test:{port}/hello?x=1#frag HTTP/1.1\r\nHost: spoofed.example\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic c2VjcmV0\r\n\
         User-Agent: test\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("write request");
    let response = String::from_utf8(read_all(&mut s).await).expect("utf8");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("hello from origin"), "{response}");

    let (head, _) = seen.recv().await.expect("origin saw a request");
    assert_eq!(
        head,
        format!(
            "GET /hello?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nUser-Agent: test\r\n\
             Connection: close\r\n\r\n"
        )
    );

    // A POST body (partly sent with the head, partly after) is forwarded exactly.
    let mut s = connect(&proxy.path).await;
    let req =
        format!("POST http://127.0.0.1:{port}/submit HTTP/1.0\r\nContent-Length: 11\r\n\r\nhello");
    s.write_all(req.as_bytes()).await.expect("write head");
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(b" world").await.expect("write rest of body");
    let response = String::from_utf8(read_all(&mut s).await).expect("utf8");
    assert!(response.ends_with("hello from origin"), "{response}");
    let (head, body) = seen.recv().await.expect("origin saw the POST");
    assert!(
        head.starts_with("POST /submit HTTP/1.0\r\nHost: 127.0.0.1:"),
        "{head}"
    );
    assert_eq!(body, b"hello world");
}

#[tokio::test]
async fn absolute_form_to_refused_or_invalid_targets() {
    let proxy = start_proxy(loopback_allowed());

    let mut s = connect(&proxy.path).await;
    s.write_all(b"GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let response = String::from_utf8(read_all(&mut s).await).expect("utf8");
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");

    for (req, want) in [
        (
            "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "absolute URL",
        ),
        ("GET https://allowed.test/ HTTP/1.1\r\n\r\n", "use CONNECT"),
        (
            "GET http://user:pw@allowed.test/ HTTP/1.1\r\n\r\n",
            "credentials",
        ),
        ("CONNECT allowed.test HTTP/1.1\r\n\r\n", "missing port"),
    ] {
        let mut s = connect(&proxy.path).await;
        s.write_all(req.as_bytes()).await.expect("write");
        let response = String::from_utf8(read_all(&mut s).await).expect("utf8");
        assert!(response.starts_with("HTTP/1.1 400"), "{req:?}: {response}");
        assert!(response.contains(want), "{req:?}: {response}");
    }
    assert_eq!(
        proxy.violations.len(),
        1,
        "only the metadata request was a refusal"
    );
}

#[tokio::test]
async fn garbage_gets_an_error_and_the_proxy_survives() {
    let echo = echo_server().await;
    let config = ProxyConfig {
        handshake_timeout: Duration::from_millis(300),
        ..ProxyConfig::default()
    };
    let proxy = start_proxy_with(loopback_allowed(), config);

    // A TLS ClientHello sent to the proxy port.
    let mut s = connect(&proxy.path).await;
    s.write_all(&[0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00])
        .await
        .expect("write");
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 400 Bad Request"), "{r}");

    // Text that is not a request line.
    let mut s = connect(&proxy.path).await;
    s.write_all(b"HELLO THERE\r\n\r\n").await.expect("write");
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");

    // Control bytes in the head.
    let mut s = connect(&proxy.path).await;
    s.write_all(b"GET http://a\x00b/ HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");

    // A head larger than 16 KiB.
    let mut s = connect(&proxy.path).await;
    let big = format!(
        "GET http://allowed.test/ HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20 * 1024)
    );
    let _ = s.write_all(big.as_bytes()).await;
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 431"), "{r}");

    // A head that never ends.
    let mut s = connect(&proxy.path).await;
    s.write_all(b"GET http://allowed.test/ HTTP/1.1\r\n")
        .await
        .expect("write");
    let r = String::from_utf8_lossy(&read_all(&mut s).await).into_owned();
    assert!(r.starts_with("HTTP/1.1 408"), "{r}");

    // SOCKS5 with zero methods, and one that stalls mid-handshake: closed, no reply hangs.
    let mut s = connect(&proxy.path).await;
    s.write_all(&[5, 0]).await.expect("write");
    assert_eq!(read_all(&mut s).await, [5, 0xff]);
    let mut s = connect(&proxy.path).await;
    s.write_all(&[5, 1, 0, 5, 1]).await.expect("write");
    assert_eq!(
        read_all(&mut s).await,
        [5, 0],
        "method chosen, then closed on timeout"
    );

    // A wrong version byte in the request.
    let mut s = connect(&proxy.path).await;
    s.write_all(&[5, 1, 0, 4, 1, 0, 1, 127, 0, 0, 1, 0, 80])
        .await
        .expect("write");
    let r = read_all(&mut s).await;
    assert_eq!(r.get(..4), Some(&[5u8, 0, 5, 1][..]), "{r:?}");

    // Still serving.
    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, &format!("allowed.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_echo(&mut s, b"alive").await;
    assert!(!proxy.task.is_finished());
}

#[tokio::test]
async fn shutdown_closes_tunnels_and_removes_the_socket() {
    let echo = echo_server().await;
    let proxy = start_proxy(loopback_allowed());
    let mut s = connect(&proxy.path).await;
    let head = http_connect(&mut s, &format!("allowed.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(proxy.path.exists());

    proxy.cancel.cancel();
    tokio::time::timeout(IO_TIMEOUT, proxy.task)
        .await
        .expect("serve returns after cancel")
        .expect("serve task joins")
        .expect("serve ok");
    assert!(!proxy.path.exists(), "socket file removed");
    assert!(read_all(&mut s).await.is_empty(), "open tunnel closed");
    assert!(UnixStream::connect(&proxy.path).await.is_err());
}

#[tokio::test]
async fn dropping_an_unserved_proxy_removes_the_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.sock");
    // A stale socket file from an earlier run is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("stale socket"));
    assert!(path.exists());
    let guard = Guard::new(
        DomainPolicy::allow_all(),
        AddressPolicy::public_only(),
        Arc::new(StaticResolver::new()),
    );
    let proxy = Proxy::new(Arc::new(guard))
        .bind(&path)
        .expect("binds over stale socket");
    assert_eq!(proxy.path(), path);
    let mode = std::fs::metadata(&path).expect("meta");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    drop(proxy);
    assert!(!path.exists());

    // A regular file is not clobbered.
    std::fs::write(&path, b"data").expect("write file");
    let guard = Guard::new(
        DomainPolicy::allow_all(),
        AddressPolicy::public_only(),
        Arc::new(StaticResolver::new()),
    );
    assert!(Proxy::new(Arc::new(guard)).bind(&path).is_err());
    assert_eq!(std::fs::read(&path).expect("still there"), b"data");
}

#[tokio::test]
async fn bridge_relays_tcp_to_the_unix_proxy() {
    let echo = echo_server().await;
    let proxy = start_proxy(loopback_allowed());
    let bridge = Bridge::bind(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        proxy.path.clone(),
    )
    .await
    .expect("bridge binds");
    let addr = bridge.local_addr().expect("bridge addr");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bridge.run(cancel.clone()));

    // HTTP CONNECT through the bridge.
    let mut s = TcpStream::connect(addr).await.expect("connect bridge");
    let head = http_connect(&mut s, &format!("allowed.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_echo(&mut s, b"tcp -> bridge -> unix proxy -> echo").await;

    // SOCKS5 through the bridge, and a refusal that reaches the violation log.
    let mut s2 = TcpStream::connect(addr).await.expect("connect bridge");
    assert_eq!(socks_connect(&mut s2, 1, 3, b"allowed.test", echo).await, 0);
    assert_echo(&mut s2, b"socks via bridge").await;
    let mut s3 = TcpStream::connect(addr).await.expect("connect bridge");
    assert_eq!(socks_connect(&mut s3, 1, 3, b"evil.test", 443).await, 0x02);
    assert_eq!(proxy.violations.len(), 1);

    cancel.cancel();
    tokio::time::timeout(IO_TIMEOUT, task)
        .await
        .expect("bridge stops")
        .expect("bridge task joins")
        .expect("bridge ok");
    assert!(
        read_all(&mut s).await.is_empty(),
        "relayed connection closed"
    );
    assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
}

//! The HTTP/1.x side of the proxy: `CONNECT` tunnels, absolute-form forwarding, and the
//! request-head parsing and rewriting they rely on.

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

use super::{Proxy, linger_close};
use crate::guard::ConnectError;
use crate::hosts::Host;

impl Proxy {
    pub(super) async fn http<S>(&self, mut client: S, first: u8, deadline: Instant)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        if !is_tchar(first) {
            return respond(&mut client, Status::BadRequest, "not an HTTP request\n").await;
        }
        let max = self.config.max_header_bytes;
        let mut buf: Vec<u8> = Vec::with_capacity(1024);
        buf.push(first);
        let mut scanned: usize = 0;
        let head_end = loop {
            // Only the head is checked: body bytes that arrived with it may be anything.
            let end = find_head_end(&buf, scanned.saturating_sub(3));
            let check_to = end.unwrap_or(buf.len());
            if buf[scanned.min(check_to)..check_to]
                .iter()
                .any(|b| !is_head_byte(*b))
            {
                return respond(&mut client, Status::BadRequest, "malformed request head\n").await;
            }
            if let Some(end) = end {
                break end;
            }
            scanned = buf.len();
            if buf.len() >= max {
                return respond(
                    &mut client,
                    Status::HeadTooLarge,
                    "request head too large\n",
                )
                .await;
            }
            let mut chunk = [0u8; 4096];
            let want = chunk.len().min(max + 4 - buf.len());
            match timeout_at(deadline, client.read(&mut chunk[..want])).await {
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Err(_) => {
                    return respond(&mut client, Status::Timeout, "request head timed out\n").await;
                }
            }
        };
        if head_end > max {
            return respond(
                &mut client,
                Status::HeadTooLarge,
                "request head too large\n",
            )
            .await;
        }
        let head = match parse_head(&buf[..head_end]) {
            Ok(h) => h,
            Err(msg) => return respond(&mut client, Status::BadRequest, &format!("{msg}\n")).await,
        };
        let leftover = buf[head_end..].to_vec();
        if head.method == "CONNECT" {
            self.http_connect(client, &head, &leftover).await;
        } else {
            self.http_forward(client, head, &leftover).await;
        }
    }

    async fn http_connect<S>(&self, mut client: S, head: &RequestHead, leftover: &[u8])
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let (host, port) = match split_authority(&head.target, None) {
            Ok(hp) => hp,
            Err(msg) => return respond(&mut client, Status::BadRequest, &format!("{msg}\n")).await,
        };
        let mut upstream = match self.open(&host, port).await {
            Ok(s) => s,
            Err(e) => return respond_connect_error(&mut client, &e).await,
        };
        let established = format!("{} 200 Connection Established\r\n\r\n", head.version);
        if client.write_all(established.as_bytes()).await.is_err() {
            return;
        }
        if !leftover.is_empty() && upstream.write_all(leftover).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }

    async fn http_forward<S>(&self, mut client: S, head: RequestHead, leftover: &[u8])
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let (authority, path) = match split_absolute_url(&head.target) {
            Ok(x) => x,
            Err(msg) => return respond(&mut client, Status::BadRequest, &format!("{msg}\n")).await,
        };
        let (host, port) = match split_authority(authority, Some(80)) {
            Ok(hp) => hp,
            Err(msg) => return respond(&mut client, Status::BadRequest, &format!("{msg}\n")).await,
        };
        let host_header = match Host::parse(&host) {
            Ok(h) if port == 80 => match h {
                Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
                other => other.to_string(),
            },
            Ok(h) => h.with_port(port),
            // The guard refuses it below, with the reason.
            Err(_) => String::new(),
        };
        let (out_head, body) = match rewrite_head(&head, &path, &host_header) {
            Ok(x) => x,
            Err(msg) => return respond(&mut client, Status::BadRequest, &format!("{msg}\n")).await,
        };
        let upstream = match self.open(&host, port).await {
            Ok(s) => s,
            Err(e) => return respond_connect_error(&mut client, &e).await,
        };
        let (mut up_read, mut up_write) = upstream.into_split();
        if up_write.write_all(&out_head).await.is_err() {
            return respond(
                &mut client,
                Status::BadGateway,
                "could not send the request\n",
            )
            .await;
        }
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let request_body = async {
            match body {
                Body::None => {}
                Body::Length(n) => {
                    let have = leftover.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                    if up_write.write_all(&leftover[..have]).await.is_ok() {
                        let rest = n.saturating_sub(have as u64);
                        let _ = tokio::io::copy(&mut (&mut client_read).take(rest), &mut up_write)
                            .await;
                    }
                }
                Body::UntilClose => {
                    if up_write.write_all(leftover).await.is_ok() {
                        let _ = tokio::io::copy(&mut client_read, &mut up_write).await;
                    }
                }
            }
            // The response decides when the exchange ends.
            std::future::pending::<()>().await
        };
        let response = async {
            let _ = tokio::io::copy(&mut up_read, &mut client_write).await;
            let _ = client_write.shutdown().await;
        };
        tokio::select! {
            () = response => {}
            () = request_body => {}
        }
    }
}

// ----- HTTP helpers ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Status {
    BadRequest,
    Forbidden,
    Timeout,
    HeadTooLarge,
    BadGateway,
    GatewayTimeout,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::BadRequest => "400 Bad Request",
            Status::Forbidden => "403 Forbidden",
            Status::Timeout => "408 Request Timeout",
            Status::HeadTooLarge => "431 Request Header Fields Too Large",
            Status::BadGateway => "502 Bad Gateway",
            Status::GatewayTimeout => "504 Gateway Timeout",
        }
    }
}

async fn respond<S>(client: &mut S, status: Status, body: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let extra = match status {
        Status::Forbidden => "X-Proxy-Error: blocked-by-talon\r\n",
        _ => "",
    };
    let msg = format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n{extra}\r\n{body}",
        status.line(),
        body.len()
    );
    let _ = client.write_all(msg.as_bytes()).await;
    linger_close(client).await;
}

async fn respond_connect_error<S>(client: &mut S, e: &ConnectError)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let status = match e {
        ConnectError::Refused(r) if r.is_policy() => Status::Forbidden,
        ConnectError::Refused(_) | ConnectError::Io { .. } => Status::BadGateway,
        ConnectError::Timeout { .. } => Status::GatewayTimeout,
    };
    respond(client, status, &format!("{e}\n")).await;
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Bytes that may appear in a request head: visible ASCII, space, tab, CR, LF and obs-text.
fn is_head_byte(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e | 0x80..=0xff)
}

/// The end of the head (just past the blank line), accepting CRLF or bare LF line ends.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            match (buf.get(i + 1), buf.get(i + 2)) {
                (Some(b'\n'), _) => return Some(i + 2),
                (Some(b'\r'), Some(b'\n')) => return Some(i + 3),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

#[derive(Debug)]
struct RequestHead {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
}

fn parse_head(raw: &[u8]) -> Result<RequestHead, &'static str> {
    let text = std::str::from_utf8(raw).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().ok_or("empty request")?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line");
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err("malformed method");
    }
    if target.is_empty() || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("malformed request target");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("unsupported HTTP version");
    }
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            return Err("folded header lines are not accepted");
        }
        let (name, value) = line.split_once(':').ok_or("malformed header line")?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err("malformed header name");
        }
        if value.contains('\r') {
            return Err("malformed header value");
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    Ok(RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    })
}

/// Splits `host:port` / `[v6]:port`. `default` applies when the port is absent or empty.
fn split_authority(s: &str, default: Option<u16>) -> Result<(String, u16), &'static str> {
    if s.contains('@') {
        return Err("credentials (user@host) in the destination are not accepted");
    }
    let (host, port) = if s.starts_with('[') {
        let close = s.find(']').ok_or("malformed IPv6 address")?;
        let rest = &s[close + 1..];
        let port = match rest {
            "" => None,
            r => Some(r.strip_prefix(':').ok_or("malformed destination")?),
        };
        (&s[..=close], port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => return Err("IPv6 addresses must be in brackets"),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("missing host");
    }
    let port = match port {
        None | Some("") => default.ok_or("missing port")?,
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 5 => {
            p.parse().map_err(|_| "invalid port")?
        }
        Some(_) => return Err("invalid port"),
    };
    Ok((host.to_string(), port))
}

/// Splits an absolute `http://authority/path?query#fragment` URL into authority and origin-form
/// target (fragment dropped).
fn split_absolute_url(target: &str) -> Result<(&str, String), &'static str> {
    let Some(scheme_end) = target.find("://") else {
        return Err("this is a proxy: send an absolute URL (GET http://host/path) or use CONNECT");
    };
    let scheme = &target[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err("use CONNECT for https URLs");
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err("only http URLs can be forwarded; use CONNECT for anything else");
    }
    let rest = &target[scheme_end + 3..];
    let rest = rest.split('#').next().unwrap_or_default();
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Ok((authority, path))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    UntilClose,
}

const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// The origin-form request head to send upstream, and how much request body follows.
fn rewrite_head(
    head: &RequestHead,
    path: &str,
    host_header: &str,
) -> Result<(Vec<u8>, Body), &'static str> {
    let mut drop: Vec<String> = HOP_BY_HOP.iter().map(|s| (*s).to_string()).collect();
    for (name, value) in &head.headers {
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("proxy-connection")
        {
            drop.extend(
                value
                    .split(',')
                    .map(|v| v.trim().to_ascii_lowercase())
                    .filter(|v| !v.is_empty()),
            );
        }
    }
    let mut length: Option<u64> = None;
    let mut codings: Vec<String> = Vec::new();
    for (name, value) in &head.headers {
        if name.eq_ignore_ascii_case("content-length") {
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err("invalid Content-Length");
            }
            let n: u64 = value.parse().map_err(|_| "invalid Content-Length")?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting Content-Length headers");
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            codings.extend(
                value
                    .split(',')
                    .map(|v| v.trim().to_ascii_lowercase())
                    .filter(|v| !v.is_empty()),
            );
        }
    }
    let body = match (length, codings.last()) {
        (Some(_), Some(_)) => return Err("both Content-Length and Transfer-Encoding"),
        (None, Some(last)) if last == "chunked" => Body::UntilClose,
        (None, Some(_)) => return Err("unsupported Transfer-Encoding"),
        (Some(0), None) | (None, None) => Body::None,
        (Some(n), None) => Body::Length(n),
    };
    let mut out = format!(
        "{} {} {}\r\nHost: {}\r\n",
        head.method, path, head.version, host_header
    );
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        if drop.contains(&lower) {
            continue;
        }
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok((out.into_bytes(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> RequestHead {
        parse_head(raw.as_bytes()).expect("head parses")
    }

    #[test]
    fn authority_forms() {
        assert_eq!(
            split_authority("a.test:443", None),
            Ok(("a.test".into(), 443))
        );
        assert_eq!(
            split_authority("[::1]:8080", None),
            Ok(("[::1]".into(), 8080))
        );
        assert_eq!(split_authority("[::1]", Some(80)), Ok(("[::1]".into(), 80)));
        assert_eq!(
            split_authority("a.test", Some(80)),
            Ok(("a.test".into(), 80))
        );
        assert_eq!(
            split_authority("a.test:", Some(80)),
            Ok(("a.test".into(), 80))
        );
        assert!(split_authority("a.test", None).is_err());
        assert!(split_authority("::1:80", None).is_err());
        assert!(split_authority("u:p@a.test:80", None).is_err());
        assert!(split_authority("a.test:99999", None).is_err());
        assert!(split_authority("a.test:+80", None).is_err());
        assert!(split_authority(":80", None).is_err());
    }

    #[test]
    fn absolute_urls() {
        assert_eq!(
            split_absolute_url("http://a.test/x?y#z"),
            Ok(("a.test", "/x?y".to_string()))
        );
        assert_eq!(
            split_absolute_url("HTTP://a.test"),
            Ok(("a.test", "/".to_string()))
        );
        assert_eq!(
            split_absolute_url("http://a.test:81?q"),
            Ok(("a.test:81", "/?q".to_string()))
        );
        assert!(split_absolute_url("/relative").is_err());
        assert!(split_absolute_url("https://a.test/").is_err());
        assert!(split_absolute_url("ftp://a.test/").is_err());
    }

    #[test]
    fn head_rewrite_drops_hop_by_hop_and_frames_body() {
        let h = head(
            "POST http://a.test/p HTTP/1.1\r\nHost: wrong\r\nProxy-Authorization: x\r\n\
             Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nContent-Length: 5\r\nAccept: */*\r\n\r\n",
        );
        let (out, body) = rewrite_head(&h, "/p", "a.test").expect("rewrites");
        let out = String::from_utf8(out).expect("utf8");
        assert_eq!(
            out,
            "POST /p HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nAccept: */*\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(body, Body::Length(5));

        let chunked =
            head("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(
            rewrite_head(&chunked, "/", "a.test").expect("ok").1,
            Body::UntilClose
        );
        let both = head(
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        );
        assert!(rewrite_head(&both, "/", "a.test").is_err());
        let conflict =
            head("POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
        assert!(rewrite_head(&conflict, "/", "a.test").is_err());
    }

    #[test]
    fn malformed_heads_are_rejected() {
        for raw in [
            "GET\r\n\r\n",
            "GET http://a.test/ HTTP/2\r\n\r\n",
            "GET  http://a.test/ HTTP/1.1\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nNo colon\r\n\r\n",
            "G(T http://a.test/ HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse_head(raw.as_bytes()).is_err(), "{raw:?}");
        }
        assert_eq!(find_head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n", 0), None);
    }
}

//! The network proxy that sandboxed commands reach through a bind-mounted Unix socket.
//!
//! One socket speaks both protocols, told apart by the first byte: `0x05` starts a SOCKS5
//! handshake, anything else is read as an HTTP/1.x request head.
//!
//! * **HTTP**: `CONNECT host:port` is tunnelled after the guard allowed it; absolute-form requests
//!   (`GET http://host/path HTTP/1.1`) are forwarded to the origin in origin-form with
//!   `Connection: close`, hop-by-hop headers dropped and `Host` set from the URL. Refusals are
//!   answered `403` with `X-Proxy-Error: blocked-by-talon` and the reason in the body; names that
//!   do not resolve and unreachable origins get `502` / `504`; malformed requests `400`,
//!   oversized heads `431`, slow ones `408`.
//! * **SOCKS5**: no authentication; `CONNECT` with IPv4, IPv6 or domain addresses. Replies: `0x02`
//!   refused by the ruleset, `0x04` host unreachable (including names that do not resolve),
//!   `0x05` connection refused, `0x07` command not supported, `0x08` address type not supported.
//!
//! Every destination goes through the [`Guard`], and the proxy dials the exact addresses the guard
//! checked. Each policy refusal is recorded in [`Violations`] so the caller can tell the model,
//! after a command, why its connections failed.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::guard::{ConnectError, Guard, Refusal};
use crate::hosts::Host;

/// One refused destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The host as asked for (normalised, or escaped when it was not a valid host).
    pub host: String,
    /// The port as asked for.
    pub port: u16,
    /// `host:port`, IPv6 in brackets.
    pub target: String,
    /// Why it was refused, in model-facing words.
    pub reason: String,
    /// When.
    pub at: SystemTime,
}

impl Violation {
    /// The violation a refusal describes, stamped now.
    pub fn from_refusal(refusal: &Refusal) -> Self {
        Self {
            host: refusal.host.clone(),
            port: refusal.port,
            target: refusal.target.clone(),
            reason: refusal.reason.to_string(),
            at: SystemTime::now(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "network: connection to {} refused ({})",
            self.target, self.reason
        )
    }
}

/// How many violations are kept between drains; older ones are counted, not kept.
pub const MAX_VIOLATIONS: usize = 100;

#[derive(Debug, Default)]
struct ViolationLog {
    list: VecDeque<Violation>,
    dropped: usize,
}

/// A shared log of refused destinations. Cloning shares the log.
#[derive(Debug, Clone, Default)]
pub struct Violations {
    inner: Arc<Mutex<ViolationLog>>,
}

impl Violations {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, ViolationLog> {
        // A panic while holding the lock cannot leave the log inconsistent; keep using it.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a violation, dropping the oldest beyond [`MAX_VIOLATIONS`].
    pub fn record(&self, violation: Violation) {
        let mut log = self.lock();
        if log.list.len() >= MAX_VIOLATIONS {
            log.list.pop_front();
            log.dropped += 1;
        }
        log.list.push_back(violation);
    }

    /// Takes every recorded violation, oldest first, leaving the log empty.
    pub fn drain(&self) -> Vec<Violation> {
        let mut log = self.lock();
        log.dropped = 0;
        log.list.drain(..).collect()
    }

    /// How many violations are waiting to be drained.
    pub fn len(&self) -> usize {
        self.lock().list.len()
    }

    /// Whether nothing is waiting to be drained.
    pub fn is_empty(&self) -> bool {
        self.lock().list.is_empty()
    }

    /// Drains the log into lines for the model (`network: connection to … refused (…)`), or
    /// `None` when nothing was refused.
    pub fn report(&self) -> Option<String> {
        let (list, dropped) = {
            let mut log = self.lock();
            let dropped = std::mem::take(&mut log.dropped);
            (log.list.drain(..).collect::<Vec<_>>(), dropped)
        };
        if list.is_empty() {
            return None;
        }
        let mut lines: Vec<String> = Vec::with_capacity(list.len() + 1);
        if dropped > 0 {
            lines.push(format!(
                "network: {dropped} earlier refused connections not shown"
            ));
        }
        lines.extend(list.iter().map(Violation::to_string));
        Some(lines.join("\n"))
    }
}

/// Limits of the proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Time allowed from accepting a connection until the destination is known (HTTP head read,
    /// SOCKS5 greeting and request).
    pub handshake_timeout: Duration,
    /// Largest HTTP request head accepted.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_connections: 256,
        }
    }
}

/// The proxy's policy and state, independent of how connections arrive.
#[derive(Debug)]
pub struct Proxy {
    guard: Arc<Guard>,
    violations: Violations,
    config: ProxyConfig,
}

impl Proxy {
    /// A proxy that checks every destination with `guard`.
    pub fn new(guard: Arc<Guard>) -> Self {
        Self {
            guard,
            violations: Violations::new(),
            config: ProxyConfig::default(),
        }
    }

    /// Replaces the limits.
    pub fn with_config(mut self, config: ProxyConfig) -> Self {
        self.config = config;
        self
    }

    /// Records into an existing (shared) violation log.
    pub fn with_violations(mut self, violations: Violations) -> Self {
        self.violations = violations;
        self
    }

    /// The violation log (shared).
    pub fn violations(&self) -> Violations {
        self.violations.clone()
    }

    /// The guard.
    pub fn guard(&self) -> &Arc<Guard> {
        &self.guard
    }

    /// Binds the proxy to a Unix socket at `path` (mode 0600). A stale socket file at `path` is
    /// replaced; any other existing file is an error. The file is removed when the returned
    /// [`UnixProxy`] (or the future of [`UnixProxy::serve`]) is dropped. Must be called inside a
    /// Tokio runtime.
    pub fn bind(self, path: impl Into<PathBuf>) -> io::Result<UnixProxy> {
        let path = path.into();
        if let Ok(meta) = std::fs::symlink_metadata(&path)
            && meta.file_type().is_socket()
        {
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        let meta = std::fs::symlink_metadata(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(UnixProxy {
            proxy: Arc::new(self),
            listener,
            socket: SocketFile {
                path,
                dev: meta.dev(),
                ino: meta.ino(),
            },
        })
    }

    /// Serves one client connection (from any transport) until it ends. Never panics on hostile
    /// input: malformed requests get an error response and the connection is closed.
    pub async fn serve_connection<S>(&self, mut client: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let deadline = Instant::now() + self.config.handshake_timeout;
        let mut first = [0u8; 1];
        match timeout_at(deadline, client.read(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] == SOCKS_VERSION {
            self.socks5(client, deadline).await;
        } else {
            self.http(client, first[0], deadline).await;
        }
    }

    /// Asks the guard for a connection; records policy refusals.
    async fn open(&self, host: &str, port: u16) -> Result<TcpStream, ConnectError> {
        let result = self.guard.connect(host, port).await;
        if let Err(ConnectError::Refused(refusal)) = &result {
            if refusal.is_policy() {
                tracing::info!(target: "talon_net::proxy", %refusal, "network refusal");
                self.violations.record(Violation::from_refusal(refusal));
            } else {
                tracing::debug!(target: "talon_net::proxy", %refusal, "destination unresolvable");
            }
        }
        result
    }

    // ----- HTTP -----------------------------------------------------------------------------

    async fn http<S>(&self, mut client: S, first: u8, deadline: Instant)
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

    // ----- SOCKS5 ---------------------------------------------------------------------------

    async fn socks5<S>(&self, mut client: S, deadline: Instant)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let Ok(Ok(request)) = timeout_at(deadline, read_socks_request(&mut client)).await else {
            return;
        };
        let (host, port) = match request {
            SocksRequest::NoAcceptableMethod => {
                let _ = client.write_all(&[SOCKS_VERSION, 0xff]).await;
                return linger_close(&mut client).await;
            }
            SocksRequest::Fail(code) => return socks_reply_failure(&mut client, code).await,
            SocksRequest::Connect { host, port } => (host, port),
        };
        let mut upstream = match self.open(&host, port).await {
            Ok(s) => s,
            Err(e) => return socks_reply_failure(&mut client, socks_code(&e)).await,
        };
        let bound = upstream
            .local_addr()
            .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let mut reply = vec![SOCKS_VERSION, 0x00, 0x00];
        push_socks_addr(&mut reply, bound);
        if client.write_all(&reply).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// A [`Proxy`] bound to a Unix socket. See [`Proxy::bind`].
#[derive(Debug)]
pub struct UnixProxy {
    proxy: Arc<Proxy>,
    listener: UnixListener,
    socket: SocketFile,
}

impl UnixProxy {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.socket.path
    }

    /// The violation log (shared).
    pub fn violations(&self) -> Violations {
        self.proxy.violations()
    }

    /// Accepts and serves connections until `cancel` fires, then closes every open connection,
    /// waits for their tasks and removes the socket file.
    pub async fn serve(self, cancel: CancellationToken) -> io::Result<()> {
        let UnixProxy {
            proxy,
            listener,
            socket,
        } = self;
        let limit = Arc::new(Semaphore::new(proxy.config.max_connections.max(1)));
        let mut tasks = JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                () = cancel.cancelled() => break,
                p = limit.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let accepted = tokio::select! {
                () = cancel.cancelled() => break,
                r = listener.accept() => r,
            };
            match accepted {
                Ok((stream, _)) => {
                    let proxy = proxy.clone();
                    let cancel = cancel.child_token();
                    tasks.spawn(async move {
                        let _permit = permit;
                        tokio::select! {
                            () = cancel.cancelled() => {}
                            () = proxy.serve_connection(stream) => {}
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(target: "talon_net::proxy", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        drop(listener);
        drop(socket);
        while tasks.join_next().await.is_some() {}
        Ok(())
    }
}

/// The socket file; removed on drop if it is still the one we created.
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && meta.dev() == self.dev
            && meta.ino() == self.ino
        {
            let _ = std::fs::remove_file(&self.path);
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

/// How long, and for how many bytes, the proxy keeps reading after an error reply before it
/// closes. Closing a socket with unread input makes the kernel reset the connection, and the
/// client may then lose the reply that explains the refusal.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 64 * 1024;

/// Half-closes, then discards input until the client closes or the linger budget is spent.
async fn linger_close<S>(client: &mut S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _ = client.shutdown().await;
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut total = 0;
    while total < LINGER_BYTES {
        match timeout_at(deadline, client.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
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

// ----- SOCKS5 helpers -------------------------------------------------------------------------

const SOCKS_VERSION: u8 = 0x05;
const SOCKS_GENERAL_FAILURE: u8 = 0x01;
const SOCKS_NOT_ALLOWED: u8 = 0x02;
const SOCKS_NETWORK_UNREACHABLE: u8 = 0x03;
const SOCKS_HOST_UNREACHABLE: u8 = 0x04;
const SOCKS_CONNECTION_REFUSED: u8 = 0x05;
const SOCKS_COMMAND_NOT_SUPPORTED: u8 = 0x07;
const SOCKS_ADDRESS_NOT_SUPPORTED: u8 = 0x08;

enum SocksRequest {
    NoAcceptableMethod,
    Fail(u8),
    Connect { host: String, port: u16 },
}

/// Reads the greeting (after the version byte), answers it, and reads the request.
async fn read_socks_request<S>(client: &mut S) -> io::Result<SocksRequest>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let n = client.read_u8().await?;
    let mut methods = vec![0u8; usize::from(n)];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0x00) {
        return Ok(SocksRequest::NoAcceptableMethod);
    }
    client.write_all(&[SOCKS_VERSION, 0x00]).await?;
    let mut hdr = [0u8; 4];
    client.read_exact(&mut hdr).await?;
    let [version, command, _reserved, atyp] = hdr;
    if version != SOCKS_VERSION {
        return Ok(SocksRequest::Fail(SOCKS_GENERAL_FAILURE));
    }
    let host = match atyp {
        0x01 => {
            let mut b = [0u8; 4];
            client.read_exact(&mut b).await?;
            Ipv4Addr::from(b).to_string()
        }
        0x04 => {
            let mut b = [0u8; 16];
            client.read_exact(&mut b).await?;
            Ipv6Addr::from(b).to_string()
        }
        0x03 => {
            let len = client.read_u8().await?;
            let mut b = vec![0u8; usize::from(len)];
            client.read_exact(&mut b).await?;
            // Invalid bytes become U+FFFD, which the guard refuses as non-ASCII.
            String::from_utf8_lossy(&b).into_owned()
        }
        _ => return Ok(SocksRequest::Fail(SOCKS_ADDRESS_NOT_SUPPORTED)),
    };
    let port = client.read_u16().await?;
    if command != 0x01 {
        return Ok(SocksRequest::Fail(SOCKS_COMMAND_NOT_SUPPORTED));
    }
    Ok(SocksRequest::Connect { host, port })
}

fn push_socks_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(v4) => {
            out.push(0x01);
            out.extend_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            out.push(0x04);
            out.extend_from_slice(&v6.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

async fn socks_reply_failure<S>(client: &mut S, code: u8)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let reply = [SOCKS_VERSION, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0];
    let _ = client.write_all(&reply).await;
    linger_close(client).await;
}

fn socks_code(e: &ConnectError) -> u8 {
    match e {
        ConnectError::Refused(r) if r.is_policy() => SOCKS_NOT_ALLOWED,
        ConnectError::Refused(_) | ConnectError::Timeout { .. } => SOCKS_HOST_UNREACHABLE,
        ConnectError::Io { source, .. } => match source.kind() {
            io::ErrorKind::ConnectionRefused => SOCKS_CONNECTION_REFUSED,
            io::ErrorKind::NetworkUnreachable => SOCKS_NETWORK_UNREACHABLE,
            _ => SOCKS_HOST_UNREACHABLE,
        },
    }
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

    #[test]
    fn violations_keep_the_latest_and_report() {
        let v = Violations::new();
        assert_eq!(v.report(), None);
        for i in 0..(MAX_VIOLATIONS + 3) {
            v.record(Violation {
                host: format!("h{i}.test"),
                port: 443,
                target: format!("h{i}.test:443"),
                reason: "not in the allowed domains".into(),
                at: SystemTime::now(),
            });
        }
        assert_eq!(v.len(), MAX_VIOLATIONS);
        let report = v.report().expect("something to report");
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines[0], "network: 3 earlier refused connections not shown");
        assert_eq!(
            lines[1],
            "network: connection to h3.test:443 refused (not in the allowed domains)"
        );
        assert_eq!(lines.len(), MAX_VIOLATIONS + 1);
        assert!(v.is_empty());
    }
}

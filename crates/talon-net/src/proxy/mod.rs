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

mod http;
mod socks;
mod violations;

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::guard::{ConnectError, Guard};

use socks::SOCKS_VERSION;
pub use violations::{MAX_VIOLATIONS, Violation, Violations};

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

// ----- Shared helpers -------------------------------------------------------------------------

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

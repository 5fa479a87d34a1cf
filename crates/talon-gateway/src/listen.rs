//! The accept loop: connections served with a header-read timeout and a cap on connections that
//! have not authenticated yet.
//!
//! Why not `axum::serve`: it sets no timer, so hyper's header-read timeout never fires, and it
//! admits every connection the process can open. An outside review held 1,100 requests half
//! sent: the gateway ran out of descriptors and `/healthz` and authenticated callers waited for
//! over a minute. Here:
//!
//! * every HTTP/1 request's head must arrive within [`HEADER_READ_TIMEOUT`] (an idle keep-alive
//!   connection waiting for its next request is under the same clock);
//! * a connection is *pending* from its accept until one of its requests passes authentication
//!   (`auth::require_bearer` calls [`Conn::authenticated`]); at most [`MAX_PENDING`] are pending,
//!   and admitting one more closes the oldest pending one. A slow or silent client therefore
//!   never keeps a new caller out: the newcomer is served in milliseconds, the oldest idler goes;
//! * an accept that fails (descriptors exhausted) is retried after a short pause instead of
//!   ending the loop, and the binary raises its open-files limit at start (`raise_nofile_limit`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// How long a client has to send a request's head (line and headers).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections not yet authenticated, at most; one more closes the oldest of them.
pub const MAX_PENDING: usize = 256;

/// The connections that have not authenticated yet, oldest first.
#[derive(Default)]
pub(crate) struct Pending {
    open: Mutex<BTreeMap<u64, CancellationToken>>,
    next: AtomicU64,
}

impl Pending {
    /// Registers a new connection; closes the oldest pending ones beyond `cap`.
    fn admit(self: &Arc<Self>, cap: usize) -> Arc<Conn> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while open.len() >= cap.max(1) {
            let Some((_, oldest)) = open.pop_first() else {
                break;
            };
            oldest.cancel();
        }
        open.insert(id, close.clone());
        drop(open);
        Arc::new(Conn {
            id,
            pending: Arc::clone(self),
            close,
            authenticated: AtomicBool::new(false),
        })
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// How many connections are pending now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One accepted connection, in every request's extensions.
pub(crate) struct Conn {
    id: u64,
    pending: Arc<Pending>,
    close: CancellationToken,
    authenticated: AtomicBool,
}

impl Conn {
    /// A request on this connection passed authentication: it is no longer pending and is never
    /// closed to make room for another.
    pub(crate) fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::Relaxed) {
            self.pending.remove(self.id);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.pending.remove(self.id);
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets open requests finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
    max_pending: usize,
) {
    let pending = Arc::new(Pending::default());
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept: wait
                // a moment so the loop does not spin, and go on.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = pending.admit(max_pending);
        let close = conn.close.clone();
        let per_request = Arc::clone(&conn);
        let service = app
            .clone()
            .map_request(move |request: axum::http::Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(peer));
                request.extensions_mut().insert(Arc::clone(&per_request));
                request
            });
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            builder.http2().enable_connect_protocol();
            let served = builder.serve_connection_with_upgrades(
                TokioIo::new(stream),
                TowerToHyperService::new(service),
            );
            tokio::pin!(served);
            tokio::select! {
                _ = served.as_mut() => {}
                () = close.cancelled() => {
                    tracing::debug!(%peer, "closed an unauthenticated connection to make room");
                }
                () = shutdown.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    let _ = served.await;
                }
            }
            drop(conn);
        });
    }
    connections.close();
    connections.wait().await;
}

/// The peer a request came from, when it came through [`serve`].
pub(crate) fn peer(request: &axum::extract::Request) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}

/// Marks the connection a request came on as authenticated (see [`Conn::authenticated`]).
pub(crate) fn mark_authenticated(request: &axum::extract::Request) {
    if let Some(conn) = request.extensions().get::<Arc<Conn>>() {
        conn.authenticated();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_pending_connection_makes_room() {
        let pending = Arc::new(Pending::default());
        let first = pending.admit(2);
        let second = pending.admit(2);
        second.authenticated();
        let third = pending.admit(2);
        assert!(
            !first.close.is_cancelled(),
            "room was left: {}",
            pending.len()
        );
        let fourth = pending.admit(2);
        assert!(first.close.is_cancelled(), "the oldest pending one goes");
        assert!(!second.close.is_cancelled(), "an authenticated one stays");
        assert!(!third.close.is_cancelled() && !fourth.close.is_cancelled());
        drop((third, fourth));
        assert_eq!(pending.len(), 0);
    }
}

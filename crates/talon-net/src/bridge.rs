//! The relay that runs inside the sandbox's network namespace.
//!
//! A namespace made with `--unshare-net` has only a loopback interface. Programs in it are pointed
//! at `127.0.0.1:PORT` (through the `*_PROXY` variables of [`proxy_env`]); the bridge accepts
//! those TCP connections and splices each one to a fresh connection to the proxy's Unix socket,
//! bind-mounted into the sandbox. It decides nothing: every check happens in the proxy, outside.
//!
//! Bind first ([`Bridge::bind`]), start the command only once the listener exists, then
//! [`Bridge::run`] — so that no program starts while nothing listens.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::{TcpListener, UnixStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// A bound TCP → Unix-socket relay.
#[derive(Debug)]
pub struct Bridge {
    listener: TcpListener,
    unix: PathBuf,
}

impl Bridge {
    /// Listens on `listen` (port 0 picks a free port) and will relay to the Unix socket `unix`.
    pub async fn bind(listen: SocketAddr, unix: PathBuf) -> io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        Ok(Self { listener, unix })
    }

    /// The address actually listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Relays connections until `cancel` fires, then closes the open ones and returns.
    pub async fn run(self, cancel: CancellationToken) -> io::Result<()> {
        let Bridge { listener, unix } = self;
        let mut tasks = JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let accepted = tokio::select! {
                () = cancel.cancelled() => break,
                r = listener.accept() => r,
            };
            let mut tcp = match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let unix = unix.clone();
            let cancel = cancel.child_token();
            tasks.spawn(async move {
                let relay = async {
                    // If the proxy is gone the client sees the connection close.
                    if let Ok(mut upstream) = UnixStream::connect(&unix).await {
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut upstream).await;
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => {}
                    () = relay => {}
                }
            });
        }
        drop(listener);
        while tasks.join_next().await.is_some() {}
        Ok(())
    }
}

/// Binds `listen` and relays to `unix` until `cancel` fires. See [`Bridge`] to learn the port
/// before relaying.
pub async fn bridge(
    listen: SocketAddr,
    unix: PathBuf,
    cancel: CancellationToken,
) -> io::Result<()> {
    Bridge::bind(listen, unix).await?.run(cancel).await
}

/// The proxy variables that point programs at a bridge listening on `addr`: the same port serves
/// HTTP (`http_proxy`, `https_proxy`) and SOCKS5 (`all_proxy` as `socks5h://`, so names are
/// resolved by the proxy, never inside the sandbox). Both spellings are set, and `no_proxy` is
/// emptied so nothing bypasses the proxy.
pub fn proxy_env(addr: SocketAddr) -> Vec<(&'static str, String)> {
    let http = format!("http://{addr}");
    let socks = format!("socks5h://{addr}");
    vec![
        ("HTTP_PROXY", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("ALL_PROXY", socks.clone()),
        ("http_proxy", http.clone()),
        ("https_proxy", http),
        ("all_proxy", socks),
        ("NO_PROXY", String::new()),
        ("no_proxy", String::new()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_env_points_both_protocols_at_the_bridge() {
        let addr: SocketAddr = "127.0.0.1:3128".parse().expect("addr");
        let env = proxy_env(addr);
        let get = |k: &str| {
            env.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("all_proxy"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some(""));
    }
}

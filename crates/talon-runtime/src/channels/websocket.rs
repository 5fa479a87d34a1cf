//! The WebSocket client the inbound channels that have no long polling connect with (Slack's
//! Socket Mode, Discord's Gateway): `wss://` over TLS with the Mozilla roots and the crypto
//! provider the rest of the tree uses, `ws://` for a local test server. The URL comes from the
//! platform's API, asked at the operator's configured base URL with the channel's token.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

/// An open WebSocket.
pub type Socket = tokio_tungstenite::WebSocketStream<Box<dyn Io>>;

/// A byte stream a WebSocket runs over: TCP, or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why a WebSocket could not be opened (the readers log it and connect again later).
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The URL the platform gave is not a `ws://` or `wss://` URL with a host.
    #[error("{0}")]
    Url(String),
    #[error("connecting to {host}:{port} timed out")]
    TimedOut { host: String, port: u16 },
    #[error("cannot connect to {host}:{port}: {source}")]
    Connect {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// TLS could not be set up or negotiated (the message says with whom).
    #[error("{0}")]
    Tls(String),
    #[error("the WebSocket handshake with {host}: {source}")]
    Handshake {
        host: String,
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
}

/// Opens the WebSocket at `url` (`wss://` over TLS with the Mozilla roots, `ws://` for a
/// local test server).
pub async fn connect(url: &str) -> Result<Socket, SocketError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| SocketError::Url(format!("the socket URL {url:?}: {e}")))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| SocketError::Url(format!("the socket URL {url:?} names no host")))?
        .to_string();
    let tls = match parsed.scheme() {
        "wss" => true,
        "ws" => false,
        other => {
            return Err(SocketError::Url(format!(
                "the socket URL's scheme {other:?} is not ws or wss"
            )));
        }
    };
    let port = parsed
        .port_or_known_default()
        .unwrap_or(if tls { 443 } else { 80 });
    let tcp = tokio::time::timeout(
        Duration::from_secs(15),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    .map_err(|_| SocketError::TimedOut {
        host: host.clone(),
        port,
    })?
    .map_err(|source| SocketError::Connect {
        host: host.clone(),
        port,
        source,
    })?;
    let stream: Box<dyn Io> = if tls {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| SocketError::Tls(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| SocketError::Tls(format!("TLS: {host:?}: {e}")))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| SocketError::Tls(format!("TLS with {host}: {e}")))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (socket, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .map_err(|source| SocketError::Handshake {
            host,
            source: Box::new(source),
        })?;
    Ok(socket)
}

//! The SOCKS5 side of the proxy: no authentication, `CONNECT` only.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

use super::{Proxy, linger_close};
use crate::guard::ConnectError;

impl Proxy {
    pub(super) async fn socks5<S>(&self, mut client: S, deadline: Instant)
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

// ----- SOCKS5 helpers -------------------------------------------------------------------------

pub(super) const SOCKS_VERSION: u8 = 0x05;
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

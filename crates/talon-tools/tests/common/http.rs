//! A small HTTP/1.1 server for the web tools' tests: one request per connection, routes by path
//! (the query is ignored for routing), every request recorded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A canned response.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// 200 with `content_type`.
pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply {
        status: 200,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.into(),
    }
}

/// 302 to `to`.
pub fn redirect(to: &str) -> Reply {
    Reply {
        status: 302,
        headers: vec![("Location".into(), to.into())],
        body: Vec::new(),
    }
}

/// A status with a plain-text body.
pub fn status(code: u16, body: &str) -> Reply {
    Reply {
        status: code,
        headers: vec![("Content-Type".into(), "text/plain".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    /// Every request: its head (request line and headers) and body, in arrival order.
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// `http://addr`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Serves `routes` on `ip:port` (port 0: any).
pub async fn serve(ip: &str, port: u16, routes: Vec<(&str, Reply)>) -> Server {
    let listener = TcpListener::bind((ip, port)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let routes: Arc<Vec<(String, Reply)>> = Arc::new(
        routes
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect(),
    );
    let (count, log) = (Arc::clone(&connections), Arc::clone(&requests));
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let (routes, log) = (Arc::clone(&routes), Arc::clone(&log));
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let end = loop {
                    if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.trim()
                            .eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < end + length {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = String::from_utf8_lossy(&buf[end..]).to_string();
                log.lock().unwrap().push(format!("{head}{body}"));
                let target = head.split_whitespace().nth(1).unwrap_or("/");
                let path = target.split('?').next().unwrap_or("/").to_string();
                let reply = routes
                    .iter()
                    .find(|(p, _)| *p == path || *p == target)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_else(|| status(404, "not found"));
                let mut out = format!(
                    "HTTP/1.1 {} X\r\nConnection: close\r\nContent-Length: {}\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                let _ = stream.write_all(out.as_bytes()).await;
                let _ = stream.write_all(&reply.body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Server {
        addr,
        connections,
        requests,
    }
}

//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which rmcp does not provide.
//!
//! The client opens `GET <url>` as an event stream; the server's first `endpoint` event names
//! the URL to `POST` messages to, and every answer arrives on the stream as a `message` event.
//! The endpoint must be on the stream's own origin, so configured credentials never go to a
//! host the operator did not name. Events that are not valid JSON-RPC are logged and skipped,
//! never fatal; an event growing beyond [`MAX_EVENT_BYTES`] ends the connection before it is
//! buffered whole.

use std::time::Duration;

use futures::StreamExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::server::ServerError;
use crate::transport::{HttpConfig, header_map, http_client};

pub use talon_net::sse::MAX_EVENT_BYTES;
use talon_net::sse::bounded;

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("cannot reach the server: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the server refused the message: HTTP {status} {body}")]
    Status { status: u16, body: String },
    #[error("cannot encode the message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A connected legacy SSE session.
pub struct LegacySse {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: JoinHandle<()>,
}

impl LegacySse {
    /// Opens the event stream and waits (at most `timeout`) for the server's endpoint.
    pub async fn connect(
        server: &str,
        config: &HttpConfig,
        timeout: Duration,
    ) -> Result<Self, ServerError> {
        let fail = |message: String| ServerError::Protocol {
            server: server.to_string(),
            message,
        };
        let client = http_client(server, &config.url)?;
        let mut headers: HeaderMap = header_map(server, config)?.into_iter().collect();
        if let Some(token) = &config.bearer {
            let mut value = HeaderValue::try_from(format!("Bearer {token}"))
                .map_err(|_| fail("the bearer token contains characters HTTP forbids".into()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let url = reqwest::Url::parse(&config.url)
            .map_err(|e| fail(format!("invalid URL {:?}: {e}", config.url)))?;
        let open = async {
            let response = client
                .get(url.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
                .send()
                .await
                .map_err(|e| fail(format!("cannot open the event stream at {url}: {e}")))?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED {
                return Err(ServerError::NeedsAuth {
                    server: server.to_string(),
                    challenge: response
                        .headers()
                        .get(reqwest::header::WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string),
                });
            }
            if !status.is_success() {
                return Err(fail(format!("GET {url} answered HTTP {status}")));
            }
            let mut events =
                SseStream::from_bytes_stream(bounded(response.bytes_stream(), MAX_EVENT_BYTES));
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| fail(format!("the event stream broke: {e}")))?;
                if event.event.as_deref() != Some("endpoint") {
                    continue;
                }
                let data = event.data.unwrap_or_default();
                let endpoint = url.join(data.trim()).map_err(|e| {
                    fail(format!("the server sent an invalid endpoint {data:?}: {e}"))
                })?;
                if endpoint.origin() != url.origin() {
                    return Err(fail(format!(
                        "the server named an endpoint on another origin ({endpoint}); Talon posts only to {}",
                        url.origin().ascii_serialization()
                    )));
                }
                return Ok((endpoint, events));
            }
            Err(fail(
                "the event stream ended before the server sent its endpoint".into(),
            ))
        };
        let (endpoint, events) =
            tokio::time::timeout(timeout, open)
                .await
                .map_err(|_| ServerError::Timeout {
                    server: server.to_string(),
                    secs: timeout.as_secs(),
                })??;
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_events(server.to_string(), events, tx));
        Ok(Self {
            client,
            endpoint,
            headers,
            incoming,
            reader,
        })
    }
}

/// Passes the stream's messages on until it ends or the session is dropped.
async fn read_events<S>(server: String, mut events: S, tx: mpsc::Sender<ServerJsonRpcMessage>)
where
    S: futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "MCP event stream broke");
                return;
            }
        };
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let data = event.data.unwrap_or_default();
        match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
            Ok(message) => {
                if tx.send(message).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(server = %server, error = %e, "MCP server sent a message that is not JSON-RPC; skipped")
            }
        }
    }
}

impl rmcp::transport::Transport<RoleClient> for LegacySse {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body)
        });
        async move {
            let response = request?.send().await?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            let body = response.text().await.unwrap_or_default();
            Err(SseError::Status {
                status: status.as_u16(),
                body: body.chars().take(200).collect(),
            })
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

impl Drop for LegacySse {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

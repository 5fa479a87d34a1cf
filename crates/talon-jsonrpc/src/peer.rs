//! One side of a session: writes whole messages, numbers its own requests and matches answers
//! to them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::message::RpcError;

/// A request that did not get a result. The messages name no side: a client's peer is a
/// server and a server's a client, and callers say which.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The other side answered with a JSON-RPC error.
    #[error("answered with error {code}: {message}")]
    Rpc { code: i64, message: String },
    /// The session ended before the answer.
    #[error("the connection closed before the answer")]
    Closed,
    /// The request could not be written.
    #[error("cannot send the message: {0}")]
    Write(String),
}

/// What a request came back with.
pub type Answer = Result<Value, RequestError>;

/// A registered request: its id, known before it is sent (a caller may need it, say as a
/// progress token), and where its answer will arrive.
#[derive(Debug)]
pub struct Ticket {
    id: i64,
    receiver: oneshot::Receiver<Answer>,
}

impl Ticket {
    /// The id the request will be sent with.
    pub fn id(&self) -> i64 {
        self.id
    }
}

#[derive(Serialize)]
struct Request<'a, P> {
    jsonrpc: &'static str,
    id: i64,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct Notification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<P>,
}

#[derive(Serialize)]
struct Success<'a, R> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: R,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

/// One side of a JSON-RPC session over the writer `W`. The reader is the owner's: it hands each
/// answer to [`Peer::resolve`] and calls [`Peer::shut`] when the stream ends.
#[derive(Debug)]
pub struct Peer<W> {
    writer: tokio::sync::Mutex<Option<W>>,
    pending: Mutex<HashMap<i64, oneshot::Sender<Answer>>>,
    next_id: AtomicI64,
    closed: CancellationToken,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Peer<W> {
    /// A session writing to `writer`.
    pub fn new(writer: W) -> Arc<Self> {
        Arc::new(Self {
            writer: tokio::sync::Mutex::new(Some(writer)),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(0),
            closed: CancellationToken::new(),
        })
    }

    /// Cancelled once the session is over (see [`Peer::shut`]).
    pub fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Writes `message` as one line, whole, after any message being written.
    pub async fn send<T: Serialize>(&self, message: &T) -> Result<(), RequestError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| RequestError::Write(e.to_string()))?;
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        let Some(writer) = writer.as_mut() else {
            return Err(RequestError::Write("the session is closed".into()));
        };
        writer
            .write_all(&line)
            .await
            .map_err(|e| RequestError::Write(e.to_string()))?;
        writer
            .flush()
            .await
            .map_err(|e| RequestError::Write(e.to_string()))
    }

    /// Sends notification `method` (without `params` when `None`).
    pub async fn notify<P: Serialize>(
        &self,
        method: &str,
        params: Option<P>,
    ) -> Result<(), RequestError> {
        self.send(&Notification {
            jsonrpc: "2.0",
            method,
            params,
        })
        .await
    }

    /// Answers request `id` with `result`.
    pub async fn respond<R: Serialize>(&self, id: &Value, result: R) -> Result<(), RequestError> {
        self.send(&Success {
            jsonrpc: "2.0",
            id,
            result,
        })
        .await
    }

    /// Answers request `id` with `error`.
    pub async fn respond_error(&self, id: &Value, error: &RpcError) -> Result<(), RequestError> {
        self.send(&Failure {
            jsonrpc: "2.0",
            id,
            error,
        })
        .await
    }

    /// Registers a request, so that its answer finds it even if it comes at once.
    pub fn register(&self) -> Ticket {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, sender);
        Ticket { id, receiver }
    }

    /// Sends request `method` and waits for its answer or the session's end (no timeout: the
    /// caller has one). See [`Peer::exchange`] for `cancel_reason`.
    pub async fn request<P: Serialize>(
        self: &Arc<Self>,
        method: &str,
        params: P,
        cancel_reason: Option<&'static str>,
    ) -> Answer {
        let ticket = self.register();
        self.exchange(ticket, method, params, cancel_reason).await
    }

    /// Sends the registered request and waits for its answer or the session's end. Dropped
    /// before either, it withdraws the request and, given a `cancel_reason`, tells the other side
    /// `notifications/cancelled` with that reason so it can stop working on it.
    pub async fn exchange<P: Serialize>(
        self: &Arc<Self>,
        ticket: Ticket,
        method: &str,
        params: P,
        cancel_reason: Option<&'static str>,
    ) -> Answer {
        let mut waiting = Waiting {
            peer: self,
            id: ticket.id,
            cancel_reason,
            answered: false,
        };
        let sent = self
            .send(&Request {
                jsonrpc: "2.0",
                id: ticket.id,
                method,
                params,
            })
            .await;
        if let Err(e) = sent {
            // Never seen by the other side: nothing to cancel there.
            waiting.cancel_reason = None;
            return Err(e);
        }
        let answer = tokio::select! {
            answer = ticket.receiver => answer.unwrap_or(Err(RequestError::Closed)),
            () = self.closed.cancelled() => Err(RequestError::Closed),
        };
        waiting.answered = true;
        answer
    }

    /// Hands an answer to the request waiting for `id`; `false` when no request of this side's
    /// has that id (a stray answer, or one whose caller gave up).
    pub fn resolve(&self, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_i64() else {
            return false;
        };
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        let answer = outcome.map_err(|e| RequestError::Rpc {
            code: e.code,
            message: e.message,
        });
        waiter.is_some_and(|waiter| waiter.send(answer).is_ok())
    }

    /// Ends the session: every request still waiting gets [`RequestError::Closed`], and
    /// [`Peer::closed`] fires. The reader calls this when the stream ends.
    pub fn shut(&self) {
        self.closed.cancel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Takes the writer back (to hand the session to another implementation); later sends fail.
    pub async fn take_writer(&self) -> Option<W> {
        self.writer.lock().await.take()
    }

    /// Shuts the session and drops the writer, closing the stream (a child process reading its
    /// stdin sees the end).
    pub async fn close(&self) {
        self.shut();
        self.writer.lock().await.take();
    }
}

/// A request whose answer is awaited; see [`Peer::exchange`].
struct Waiting<'a, W: AsyncWrite + Unpin + Send + 'static> {
    peer: &'a Arc<Peer<W>>,
    id: i64,
    cancel_reason: Option<&'static str>,
    answered: bool,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Drop for Waiting<'_, W> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.peer
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        if let Some(reason) = self.cancel_reason
            && !self.peer.closed.is_cancelled()
        {
            let peer = Arc::clone(self.peer);
            let params = serde_json::json!({"requestId": self.id, "reason": reason});
            tokio::spawn(async move {
                let _ = peer.notify("notifications/cancelled", Some(params)).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LineReader, Message, parse};
    use serde_json::json;
    use tokio::io::{DuplexStream, ReadHalf};

    fn pair() -> (Arc<Peer<DuplexStream>>, LineReader<DuplexStream>) {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        (Peer::new(ours), LineReader::new(theirs))
    }

    async fn next(reader: &mut LineReader<impl tokio::io::AsyncRead + Unpin>) -> Message {
        let line = reader.next_line().await.expect("reads").expect("a line");
        parse(line).expect("a message")
    }

    #[tokio::test]
    async fn answers_reach_their_requests_in_any_order() {
        let (peer, mut other) = pair();
        let first = tokio::spawn({
            let peer = Arc::clone(&peer);
            async move { peer.request("a", json!({}), None).await }
        });
        let second = tokio::spawn({
            let peer = Arc::clone(&peer);
            async move { peer.request("b", json!({}), None).await }
        });
        let mut ids = HashMap::new();
        for _ in 0..2 {
            let Message::Request { id, method, .. } = next(&mut other).await else {
                panic!("expected a request");
            };
            ids.insert(method, id);
        }
        assert!(peer.resolve(&ids["b"], Ok(json!("B"))));
        assert!(peer.resolve(&ids["a"], Err(RpcError::new(-1, "no"))));
        assert_eq!(second.await.expect("joins"), Ok(json!("B")));
        assert_eq!(
            first.await.expect("joins"),
            Err(RequestError::Rpc {
                code: -1,
                message: "no".into()
            })
        );
        assert!(
            !peer.resolve(&ids["a"], Ok(json!(null))),
            "already answered"
        );
    }

    #[tokio::test]
    async fn a_dropped_request_is_cancelled_and_a_shut_session_fails_waiting_ones() {
        let (peer, mut other) = pair();
        let abandoned = tokio::spawn({
            let peer = Arc::clone(&peer);
            async move { peer.request("slow", json!({}), Some("gave up")).await }
        });
        let Message::Request { id, .. } = next(&mut other).await else {
            panic!("expected a request");
        };
        abandoned.abort();
        let Message::Notification { method, params } = next(&mut other).await else {
            panic!("expected the cancellation");
        };
        assert_eq!(method, "notifications/cancelled");
        assert_eq!(params["requestId"], id);
        assert_eq!(params["reason"], "gave up");

        let waiting = tokio::spawn({
            let peer = Arc::clone(&peer);
            async move { peer.request("never", json!({}), Some("gave up")).await }
        });
        let _ = next(&mut other).await;
        peer.shut();
        assert_eq!(waiting.await.expect("joins"), Err(RequestError::Closed));
    }

    #[tokio::test]
    async fn responses_carry_the_request_id_and_close_ends_the_stream() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let peer = Peer::new(ours);
        let (read, _write): (ReadHalf<DuplexStream>, _) = tokio::io::split(theirs);
        let mut other = LineReader::new(read);
        peer.respond(&json!("r1"), json!({"ok": true}))
            .await
            .expect("sends");
        peer.respond_error(&json!(2), &RpcError::new(-32601, "method not found: x"))
            .await
            .expect("sends");
        assert_eq!(
            next(&mut other).await,
            Message::Answer {
                id: json!("r1"),
                outcome: Ok(json!({"ok": true}))
            }
        );
        assert_eq!(
            next(&mut other).await,
            Message::Answer {
                id: json!(2),
                outcome: Err(RpcError::new(-32601, "method not found: x"))
            }
        );
        peer.close().await;
        assert!(other.next_line().await.expect("reads").is_none());
        assert_eq!(
            peer.notify("n", None::<Value>).await,
            Err(RequestError::Write("the session is closed".into()))
        );
    }
}

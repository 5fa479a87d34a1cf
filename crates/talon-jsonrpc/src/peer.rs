//! One side of a session: writes whole messages, numbers its own requests and matches answers
//! to them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::message::RpcError;
pub use crate::outbox::Backlog;
use crate::outbox::{Admitted, Outbox};

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
    /// The other side is not reading its input and too much already waits to be written to it
    /// ([`crate::limits`]); the message was dropped.
    #[error(
        "the other side is not reading its input: {messages} messages ({bytes} bytes) are still waiting to be written to it, so this one was dropped; it must read what it is sent before it is sent more"
    )]
    Backlog { messages: usize, bytes: usize },
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
    outbox: Outbox<W>,
    pending: Mutex<HashMap<i64, oneshot::Sender<Answer>>>,
    next_id: AtomicI64,
    closed: CancellationToken,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Peer<W> {
    /// A session writing to `writer`.
    pub fn new(writer: W) -> Arc<Self> {
        Arc::new(Self {
            outbox: Outbox::new(writer),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(0),
            closed: CancellationToken::new(),
        })
    }

    /// Cancelled once the session is over (see [`Peer::shut`]).
    pub fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Writes `message` as one line, whole, after any message being written. Refused at once
    /// with [`RequestError::Backlog`] when the other side has stopped reading and the backlog is
    /// full ([`crate::limits`]).
    pub async fn send<T: Serialize>(&self, message: &T) -> Result<(), RequestError> {
        let (line, admitted) = self.admit(message)?;
        self.write(line, admitted).await
    }

    /// Like [`Peer::send`], without waiting: the message is accepted (or refused, as there) now
    /// and written on a task of its own. For a reader that must answer without stopping to read.
    pub fn post<T: Serialize>(self: &Arc<Self>, message: &T) -> Result<(), RequestError> {
        let (line, admitted) = self.admit(message)?;
        let peer = Arc::clone(self);
        tokio::spawn(async move {
            // A stream that broke is the reader's to notice (it ends the session).
            let _ = peer.write(line, admitted).await;
        });
        Ok(())
    }

    /// Answers request `id` with `outcome` without waiting (see [`Peer::post`]).
    pub fn post_answer(
        self: &Arc<Self>,
        id: &Value,
        outcome: Result<Value, RpcError>,
    ) -> Result<(), RequestError> {
        match &outcome {
            Ok(result) => self.post(&Success {
                jsonrpc: "2.0",
                id,
                result,
            }),
            Err(error) => self.post(&Failure {
                jsonrpc: "2.0",
                id,
                error,
            }),
        }
    }

    /// What waits to be written to the other side now, and the most that ever did.
    pub fn backlog(&self) -> Backlog {
        self.outbox.backlog()
    }

    /// `message` as a line, with its place in the backlog.
    fn admit<T: Serialize>(&self, message: &T) -> Result<(Vec<u8>, Admitted), RequestError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| RequestError::Write(e.to_string()))?;
        line.push(b'\n');
        let admitted = self
            .outbox
            .admit(line.len())
            .map_err(|full| RequestError::Backlog {
                messages: full.messages,
                bytes: full.bytes,
            })?;
        Ok((line, admitted))
    }

    async fn write(&self, line: Vec<u8>, admitted: Admitted) -> Result<(), RequestError> {
        match self.outbox.write(line, admitted).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(RequestError::Write("the session is closed".into())),
            Err(e) => Err(RequestError::Write(e.to_string())),
        }
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
        self.outbox.take().await
    }

    /// Shuts the session and drops the writer, closing the stream (a child process reading its
    /// stdin sees the end).
    pub async fn close(&self) {
        self.shut();
        self.outbox.take().await;
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
            // Through the backlog like every message: a side that does not read is not told.
            let _ = self.peer.post(&Notification {
                jsonrpc: "2.0",
                method: "notifications/cancelled",
                params: Some(serde_json::json!({"requestId": self.id, "reason": reason})),
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

    /// Issue 22 item 9: a peer that sends requests without reading its input made this side
    /// queue every answer without end. Now the backlog stays within its bounds, what does not
    /// fit is refused with an error saying why, and the session works again once the other
    /// side reads.
    #[tokio::test]
    async fn h22_9_answers_to_a_peer_that_does_not_read_are_bounded() {
        use crate::limits::{MAX_UNWRITTEN_BYTES, MAX_UNWRITTEN_MESSAGES};
        let (ours, theirs) = tokio::io::duplex(4096);
        let peer = Peer::new(ours);
        let mut refused = 0;
        for n in 0..10_000 {
            match peer.post_answer(&json!(n), Ok(json!({"pong": "x".repeat(100)}))) {
                Ok(()) => {}
                Err(RequestError::Backlog { messages, bytes }) => {
                    assert!(messages <= MAX_UNWRITTEN_MESSAGES && bytes <= MAX_UNWRITTEN_BYTES);
                    refused += 1;
                }
                Err(e) => panic!("unexpected error: {e}"),
            }
            // Let the writing tasks run, so the backlog is what the stream really holds up.
            tokio::task::yield_now().await;
        }
        let backlog = peer.backlog();
        assert!(
            backlog.peak_messages <= MAX_UNWRITTEN_MESSAGES,
            "{backlog:?}"
        );
        assert!(backlog.peak_bytes <= MAX_UNWRITTEN_BYTES, "{backlog:?}");
        assert!(
            refused > 9_000,
            "only {refused} of 10000 answers were refused"
        );
        assert_eq!(backlog.refused, refused);
        let error = peer
            .notify("n", None::<Value>)
            .await
            .expect_err("still full");
        assert!(
            error.to_string().contains("not reading its input"),
            "{error}"
        );

        // The other side reads at last: whole answers only, and the session works again.
        let mut other = LineReader::new(theirs);
        let mut answers = 0;
        while peer.backlog().messages > 0 || answers == 0 {
            let Message::Answer { .. } = next(&mut other).await else {
                panic!("expected an answer");
            };
            answers += 1;
        }
        assert!(
            answers < 10_000 - 9_000 + 1,
            "{answers} answers got through"
        );
        peer.notify("later", None::<Value>).await.expect("sends");
        loop {
            if let Message::Notification { method, .. } = next(&mut other).await {
                assert_eq!(method, "later");
                break;
            }
        }
    }

    /// A write given up halfway (its caller timed out while the other side did not read) is
    /// finished by the next one, so the other side never sees a torn line.
    #[tokio::test]
    async fn h22_9_an_abandoned_write_does_not_tear_the_stream() {
        let (ours, theirs) = tokio::io::duplex(64);
        let peer = Peer::new(ours);
        let long = "y".repeat(1000);
        let abandoned = tokio::spawn({
            let peer = Arc::clone(&peer);
            let long = long.clone();
            async move { peer.notify("first", Some(json!({"long": long}))).await }
        });
        // The first 64 bytes fill the stream; the writer waits for room.
        while peer.backlog().messages == 0 {
            tokio::task::yield_now().await;
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        abandoned.abort();
        let _ = abandoned.await;
        let second = tokio::spawn({
            let peer = Arc::clone(&peer);
            async move { peer.notify("second", None::<Value>).await }
        });
        let mut other = LineReader::new(theirs);
        let Message::Notification { method, params } = next(&mut other).await else {
            panic!("expected the first notification");
        };
        assert_eq!(
            (method.as_str(), params["long"].as_str()),
            ("first", Some(long.as_str()))
        );
        let Message::Notification { method, .. } = next(&mut other).await else {
            panic!("expected the second notification");
        };
        assert_eq!(method, "second");
        second.await.expect("joins").expect("sends");
    }
}

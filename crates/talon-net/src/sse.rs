//! A bound on server-sent event streams read from servers Talon does not control (bridged MCP
//! servers, model providers): an event is only complete at a blank line, so a server that never
//! sends one could make a reader buffer without end. [`bounded`] cuts such a body with an error
//! once more than a limit has arrived since the last event boundary, before it is buffered whole.

use futures::{Stream, StreamExt};

/// The default largest event accepted (16 MiB).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Why a bounded body stopped.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError<E> {
    /// The underlying body failed.
    #[error("{0}")]
    Body(E),
    /// More than the limit arrived without an event boundary.
    #[error("an event is larger than {limit} bytes")]
    Oversized { limit: usize },
}

/// `body`, cut with [`BoundedError::Oversized`] once more than `limit` bytes arrive without an
/// event boundary (LF LF, CR CR or CR LF CR LF).
pub fn bounded<E>(
    body: impl Stream<Item = Result<bytes::Bytes, E>>,
    limit: usize,
) -> impl Stream<Item = Result<bytes::Bytes, BoundedError<E>>> {
    body.scan(0usize, move |pending, chunk| {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => return std::future::ready(Some(Err(BoundedError::Body(e)))),
        };
        let two = chunk
            .windows(2)
            .rposition(|w| w == b"\n\n" || w == b"\r\r")
            .map(|i| i + 2);
        let four = chunk
            .windows(4)
            .rposition(|w| w == b"\r\n\r\n")
            .map(|i| i + 4);
        *pending = match two.max(four) {
            Some(end) => chunk.len() - end,
            None => *pending + chunk.len(),
        };
        std::future::ready(Some(if *pending > limit {
            Err(BoundedError::Oversized { limit })
        } else {
            Ok(chunk)
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn outcome(chunks: Vec<Vec<u8>>) -> Vec<bool> {
        let body = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from(c))),
        );
        bounded(body, MAX_EVENT_BYTES)
            .map(|r| r.is_ok())
            .collect()
            .await
    }

    #[tokio::test]
    async fn an_event_without_end_is_cut_but_many_small_events_are_not() {
        let mib = 1024 * 1024;
        let endless: Vec<Vec<u8>> = (0..17).map(|_| vec![b'x'; mib]).collect();
        let seen = outcome(endless).await;
        assert!(
            seen[..16].iter().all(|ok| *ok) && !seen[16],
            "cut at 16 MiB"
        );
        for end in [&b"\n\n"[..], b"\r\n\r\n", b"\r\r"] {
            let events: Vec<Vec<u8>> = (0..20)
                .map(|_| {
                    let mut c = vec![b'x'; mib];
                    c.extend_from_slice(end);
                    c
                })
                .collect();
            assert!(outcome(events).await.iter().all(|ok| *ok));
        }
    }
}

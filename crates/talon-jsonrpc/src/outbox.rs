//! The writing side of a session: whole lines, a bounded backlog, and no torn lines.
//!
//! Every message is counted from the moment it is accepted until its last byte is written, and
//! a message that would take the count or the bytes past [`MAX_UNWRITTEN_MESSAGES`] or
//! [`MAX_UNWRITTEN_BYTES`] is refused at once. Without that bound, a peer that sends requests
//! without reading its input made this side keep every answer (and the task writing it) in
//! memory: 3.3 GB in the review of issue 22.
//!
//! A write abandoned halfway (its caller timed out while the other side was not reading) leaves
//! the rest of its line with the writer, and the next write finishes that line first: the other
//! side never sees half a message glued to the next.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::limits::{MAX_UNWRITTEN_BYTES, MAX_UNWRITTEN_MESSAGES};

/// What waits to be written to the other side, and the most it ever held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Messages accepted and not yet written.
    pub messages: usize,
    /// Their bytes.
    pub bytes: usize,
    /// The most messages that ever waited at once.
    pub peak_messages: usize,
    /// The most bytes that ever waited at once.
    pub peak_bytes: usize,
    /// Messages refused because the backlog was full.
    pub refused: u64,
}

/// The stream being written, and the rest of a line whose writer gave up halfway.
#[derive(Debug)]
struct Stream<W> {
    writer: Option<W>,
    unfinished: Vec<u8>,
    written: usize,
}

/// The writer of a session with its backlog accounting (see the module docs).
#[derive(Debug)]
pub(crate) struct Outbox<W> {
    stream: tokio::sync::Mutex<Stream<W>>,
    backlog: Arc<Mutex<Backlog>>,
}

/// A message's place in the backlog, given back when it is written or abandoned.
#[derive(Debug)]
pub(crate) struct Admitted {
    backlog: Arc<Mutex<Backlog>>,
    bytes: usize,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut backlog = self.backlog.lock().unwrap_or_else(PoisonError::into_inner);
        backlog.messages = backlog.messages.saturating_sub(1);
        backlog.bytes = backlog.bytes.saturating_sub(self.bytes);
    }
}

impl<W: AsyncWrite + Unpin> Outbox<W> {
    pub(crate) fn new(writer: W) -> Self {
        Self {
            stream: tokio::sync::Mutex::new(Stream {
                writer: Some(writer),
                unfinished: Vec::new(),
                written: 0,
            }),
            backlog: Arc::default(),
        }
    }

    /// What waits to be written now, and the most that ever did.
    pub(crate) fn backlog(&self) -> Backlog {
        *self.backlog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place in the backlog for a line of `bytes`, or says how full it is. A line always
    /// fits when nothing else waits.
    pub(crate) fn admit(&self, bytes: usize) -> Result<Admitted, Backlog> {
        let mut backlog = self.backlog.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = backlog.messages == 0
            || (backlog.messages < MAX_UNWRITTEN_MESSAGES
                && backlog.bytes.saturating_add(bytes) <= MAX_UNWRITTEN_BYTES);
        if !fits {
            backlog.refused += 1;
            return Err(*backlog);
        }
        backlog.messages += 1;
        backlog.bytes += bytes;
        backlog.peak_messages = backlog.peak_messages.max(backlog.messages);
        backlog.peak_bytes = backlog.peak_bytes.max(backlog.bytes);
        Ok(Admitted {
            backlog: Arc::clone(&self.backlog),
            bytes,
        })
    }

    /// Writes `line` whole, after any line being written; `Ok(false)` when the writer was taken.
    pub(crate) async fn write(&self, line: Vec<u8>, admitted: Admitted) -> std::io::Result<bool> {
        let mut stream = self.stream.lock().await;
        let Stream {
            writer,
            unfinished,
            written,
        } = &mut *stream;
        let Some(writer) = writer.as_mut() else {
            return Ok(false);
        };
        // The rest of a line given up on halfway goes first; then this one, kept with the
        // stream until its last byte is out, so that giving up on it cannot tear it either.
        finish(writer, unfinished, written).await?;
        *unfinished = line;
        finish(writer, unfinished, written).await?;
        drop(admitted);
        writer.flush().await?;
        Ok(true)
    }

    /// Takes the writer back; later writes find none.
    pub(crate) async fn take(&self) -> Option<W> {
        self.stream.lock().await.writer.take()
    }
}

/// Writes what is left of `line` from `written` on, keeping track as it goes.
async fn finish<W: AsyncWrite + Unpin>(
    writer: &mut W,
    line: &mut Vec<u8>,
    written: &mut usize,
) -> std::io::Result<()> {
    while *written < line.len() {
        let n = writer.write(&line[*written..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        *written += n;
    }
    line.clear();
    *written = 0;
    Ok(())
}

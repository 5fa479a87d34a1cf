//! Line framing: one JSON-RPC message per line, with a cap on a line's length.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::limits::MAX_MESSAGE_BYTES;

/// Why the stream of lines ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A line grew past [`MAX_MESSAGE_BYTES`] before its newline. The stream cannot be
    /// resynchronised without reading the rest of that line, so it ends here.
    #[error("a message is longer than {MAX_MESSAGE_BYTES} bytes")]
    TooLong,
    /// Reading failed.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one message per line from `R`, skipping blank lines.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Wraps `reader` with a 64 KiB buffer.
    pub fn new(reader: R) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
        }
    }

    /// The next non-blank line without its line ending or trailing blanks; `None` at the end of
    /// the stream (a last line without a newline still counts).
    pub async fn next_line(&mut self) -> Result<Option<&[u8]>, ReadError> {
        loop {
            self.line.clear();
            if !self.fill_line().await? {
                return Ok(None);
            }
            let end = trimmed_len(&self.line);
            if end > 0 {
                return Ok(Some(&self.line[..end]));
            }
        }
    }

    /// The bytes read ahead but not yet returned as lines, and the reader: for handing the rest
    /// of the stream to another reader.
    pub fn into_parts(self) -> (Vec<u8>, R) {
        let buffered = self.reader.buffer().to_vec();
        (buffered, self.reader.into_inner())
    }

    /// Reads up to and including the next newline into `self.line`; `false` when the stream
    /// ended with nothing read.
    async fn fill_line(&mut self) -> Result<bool, ReadError> {
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return Ok(!self.line.is_empty());
            }
            let (take, done) = match memchr::memchr(b'\n', buffer) {
                Some(at) => (at + 1, true),
                None => (buffer.len(), false),
            };
            if self.line.len() + take > MAX_MESSAGE_BYTES {
                return Err(ReadError::TooLong);
            }
            self.line.extend_from_slice(&buffer[..take]);
            self.reader.consume(take);
            if done {
                return Ok(true);
            }
        }
    }
}

fn trimmed_len(line: &[u8]) -> usize {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8]) -> Vec<String> {
        let mut reader = LineReader::new(input);
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().await.expect("reads") {
            out.push(String::from_utf8_lossy(line).into_owned());
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_skips_blank_ones_and_keeps_an_unterminated_last_line() {
        let got = lines_of(b"{\"a\":1}\r\n\n  \n{\"b\":2}  \n{\"c\":3}").await;
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[tokio::test]
    async fn the_rest_of_the_stream_can_be_handed_on() {
        let mut reader = LineReader::new(&b"first\nsecond\nthird"[..]);
        assert_eq!(
            reader.next_line().await.expect("reads"),
            Some(&b"first"[..])
        );
        let (buffered, rest) = reader.into_parts();
        assert_eq!(buffered, b"second\nthird");
        assert!(rest.is_empty(), "the inner reader was read to its end");
    }

    #[tokio::test]
    async fn a_line_longer_than_the_cap_ends_the_stream_with_an_error() {
        let long = vec![b'x'; MAX_MESSAGE_BYTES + 1];
        let mut reader = LineReader::new(&long[..]);
        let error = reader.next_line().await.expect_err("too long");
        assert!(matches!(error, ReadError::TooLong), "{error}");
    }
}

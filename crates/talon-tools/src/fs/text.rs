//! Text handling shared by the file tools: decoding, line endings, numbered line rendering,
//! streaming reads of line ranges, and binary detection.

use std::io::{BufRead, BufReader, Read};

/// Longest line shown before it is cut (Claude Code's limit).
pub const MAX_LINE_CHARS: usize = 2000;
/// Lines shown when no limit is given (Claude Code's default).
pub const DEFAULT_LINE_LIMIT: usize = 2000;
/// Bytes scanned to count a file's lines before giving up on an exact total.
const COUNT_SCAN_LIMIT: u64 = 64 << 20;

/// The line ending a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    Lf,
    CrLf,
}

impl LineEnding {
    /// CRLF if most line breaks are CRLF.
    pub fn detect(text: &str) -> Self {
        let lf = text.matches('\n').count();
        let crlf = text.matches("\r\n").count();
        if crlf > 0 && crlf * 2 >= lf {
            LineEnding::CrLf
        } else {
            LineEnding::Lf
        }
    }

    /// Converts LF text to this ending.
    pub fn apply(self, lf_text: &str) -> String {
        match self {
            LineEnding::Lf => lf_text.to_string(),
            LineEnding::CrLf => lf_text.replace("\r\n", "\n").replace('\n', "\r\n"),
        }
    }
}

/// Bytes decoded as UTF-8; invalid sequences become U+FFFD and `lossy` says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub lossy: bool,
}

pub fn decode(bytes: &[u8]) -> Decoded {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Decoded {
            text: s.to_string(),
            lossy: false,
        },
        Err(_) => Decoded {
            text: String::from_utf8_lossy(bytes).into_owned(),
            lossy: true,
        },
    }
}

/// True if the head of a file looks binary (a NUL byte in the first 8 KiB).
pub fn is_binary(head: &[u8]) -> bool {
    talon_fs::looks_binary(head)
}

/// `%6d\t<line>`, with overlong lines cut.
pub fn numbered(line_no: usize, line: &str, out: &mut String) {
    numbered_line(line_no, line, false, out);
}

/// Like [`numbered`]; `cut` says the line was already shortened while reading.
fn numbered_line(line_no: usize, line: &str, cut: bool, out: &mut String) {
    use std::fmt::Write;
    let line = line.strip_suffix('\r').unwrap_or(line);
    if cut || line.chars().count() > MAX_LINE_CHARS {
        let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
        let _ = writeln!(
            out,
            "{line_no:>6}\t{cut}… [line truncated at {MAX_LINE_CHARS} characters]"
        );
    } else {
        let _ = writeln!(out, "{line_no:>6}\t{line}");
    }
}

/// A range of a file's lines, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRange {
    /// `%6d\t` numbered lines.
    pub body: String,
    /// 1-based number of the first line shown (0 when none).
    pub first: usize,
    /// 1-based number of the last line shown.
    pub last: usize,
    /// Lines in the file, if counted to the end.
    pub total: Option<usize>,
    /// The output stopped early because it reached `max_bytes`.
    pub capped: bool,
    /// Invalid UTF-8 was replaced.
    pub lossy: bool,
}

/// Bytes of one line kept for display (enough for [`MAX_LINE_CHARS`] characters of any UTF-8).
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// Reads one line, keeping at most `keep` bytes of it (the rest is consumed, not stored), and
/// consuming little more than `budget` bytes. Returns `None` at end of input; `Some(consumed)`
/// otherwise, where `consumed > budget` means the budget ran out inside the line.
fn next_line<R: BufRead>(
    reader: &mut R,
    keep: usize,
    line: &mut Vec<u8>,
    budget: u64,
) -> std::io::Result<Option<u64>> {
    line.clear();
    let mut consumed: u64 = 0;
    loop {
        if consumed > budget {
            return Ok(Some(consumed));
        }
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((consumed > 0).then_some(consumed));
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        consumed += take as u64;
        if done {
            return Ok(Some(consumed));
        }
    }
}

/// Streams `reader` and renders lines `start..start+limit` (0-based start), stopping the
/// rendering at `max_bytes`, and counts the file's lines (up to a scan limit) so the caller can say
/// how much remains. Memory stays bounded whatever the file: lines outside the range are skipped,
/// not stored, and a line without a newline is never held beyond what is shown — so a 2 GB file,
/// or a 2 GB single line, is fine.
pub fn read_range<R: Read>(
    reader: R,
    start: usize,
    limit: usize,
    max_bytes: usize,
) -> std::io::Result<LineRange> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut out = LineRange {
        body: String::new(),
        first: 0,
        last: 0,
        total: None,
        capped: false,
        lossy: false,
    };
    let end = start.saturating_add(limit);
    let mut line_no = 0usize;
    let mut scanned: u64 = 0;
    loop {
        let index = line_no;
        let keep = if index >= start && index < end && !out.capped {
            MAX_LINE_BYTES
        } else {
            0
        };
        let budget = if index >= end {
            COUNT_SCAN_LIMIT.saturating_sub(scanned)
        } else {
            u64::MAX
        };
        let Some(consumed) = next_line(&mut reader, keep, &mut line, budget)? else {
            out.total = Some(line_no);
            return Ok(out);
        };
        scanned += consumed;
        if index >= end && consumed > budget {
            // Counting the rest would read too much: leave the total unknown.
            return Ok(out);
        }
        line_no += 1;
        if keep > 0 {
            let text = match std::str::from_utf8(&line) {
                Ok(s) => std::borrow::Cow::Borrowed(s),
                Err(e) if e.error_len().is_none() && line.len() >= MAX_LINE_BYTES => {
                    // Cut in the middle of a character by the keep limit: not an encoding error.
                    String::from_utf8_lossy(&line[..e.valid_up_to()])
                }
                Err(_) => {
                    out.lossy = true;
                    String::from_utf8_lossy(&line)
                }
            };
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let before = out.body.len();
            numbered_line(line_no, text, consumed as usize > line.len(), &mut out.body);
            if out.body.len() > max_bytes && out.first != 0 {
                out.body.truncate(before);
                out.capped = true;
            } else {
                if out.first == 0 {
                    out.first = line_no;
                }
                out.last = line_no;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings() {
        assert_eq!(LineEnding::detect("a\r\nb\r\n"), LineEnding::CrLf);
        assert_eq!(LineEnding::detect("a\nb\n"), LineEnding::Lf);
        assert_eq!(LineEnding::CrLf.apply("a\nb\n"), "a\r\nb\r\n");
        assert_eq!(LineEnding::CrLf.apply("a\r\nb\n"), "a\r\nb\r\n");
    }

    #[test]
    fn ranges_numbering_and_totals() {
        let text = "one\ntwo\r\nthree\nfour";
        let r = read_range(text.as_bytes(), 1, 2, 1 << 20).expect("read");
        assert_eq!(r.body, "     2\ttwo\n     3\tthree\n");
        assert_eq!((r.first, r.last, r.total, r.capped), (2, 3, Some(4), false));
        let r = read_range(text.as_bytes(), 10, 2, 1 << 20).expect("read");
        assert_eq!((r.first, r.total), (0, Some(4)));
        let r = read_range("".as_bytes(), 0, 10, 1 << 20).expect("read");
        assert_eq!(r.total, Some(0));
    }

    #[test]
    fn long_lines_and_caps() {
        let long = "x".repeat(10_000);
        let r = read_range(long.as_bytes(), 0, 10, 1 << 20).expect("read");
        assert!(r.body.contains("[line truncated at 2000 characters]"));
        let many: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let r = read_range(many.as_bytes(), 0, 1000, 200).expect("read");
        assert!(r.capped && r.last < 20 && r.total == Some(1000));
    }

    #[test]
    fn a_huge_single_line_is_not_held_in_memory() {
        // 64 MiB without a newline: only the shown prefix is kept.
        let reader = std::io::repeat(b'a').take(64 << 20);
        let r = read_range(reader, 0, 10, 1 << 20).expect("read");
        assert_eq!(r.total, Some(1));
        assert!(r.body.len() < 3000, "{}", r.body.len());
        assert!(r.body.contains("[line truncated at 2000 characters]"));
    }

    #[test]
    fn invalid_utf8_is_marked() {
        let r = read_range(&b"ok\n\xff\xfe bad\n"[..], 0, 10, 1 << 20).expect("read");
        assert!(r.lossy && r.body.contains('\u{fffd}'));
        assert!(decode(b"\xffx").lossy);
        assert_eq!(decode(b"\xEF\xBB\xBFhi").text, "hi");
    }
}

//! Bounding what a command prints: per-stream byte caps while capturing, then a character cap on
//! the text the model sees.
//!
//! Both dialects' caps apply to success **and** error output (GoClaw's error path skips its cap,
//! so up to 2 MiB of a failing build could reach the model).

/// Bytes kept per stream while a command runs (GoClaw's `limitedBuffer`).
pub const STREAM_CAP: usize = 1 << 20;

/// One stream's output: the first [`STREAM_CAP`] bytes and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// Bytes the command wrote, kept or not.
    pub total: u64,
}

impl Captured {
    /// Appends `chunk`, keeping at most `cap` bytes in all.
    pub fn push(&mut self, chunk: &[u8], cap: usize) {
        self.total += chunk.len() as u64;
        let room = cap.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }

    /// The text (invalid UTF-8 replaced), with a marker when bytes were dropped.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.truncated() {
            text.push_str(&format!(
                "\n[output truncated at {} MiB: {} bytes in all]",
                self.bytes.len() >> 20,
                self.total
            ));
        }
        text
    }
}

/// GoClaw's `capExecOutput`: at most `max_chars` characters. When the end of the output looks
/// like a result (an error, a summary, a closing brace), keep 70 % head and 30 % tail (tail at
/// most 4,000) so the model sees both how it started and how it ended; otherwise keep the head.
/// Cuts snap to a newline near the cut.
pub fn cap_head_tail(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let suffix = format!(
        "\n[Output truncated: {total} chars total. Redirect to file for full output: command > output.txt]"
    );
    let chars: Vec<char> = text.chars().collect();
    let last: String = chars[total.saturating_sub(2000)..].iter().collect();
    if max_chars > 4000 && ends_like_a_result(&last) {
        let tail_len = (max_chars * 3 / 10).min(4000);
        let head_len = max_chars - tail_len;
        let head: String = chars[..head_len].iter().collect();
        let tail: String = chars[total - tail_len..].iter().collect();
        let head = snap_end(&head);
        let tail = snap_start(&tail);
        return format!("{head}\n⚠️ [... middle content omitted ...]\n{tail}{suffix}");
    }
    let head: String = chars[..max_chars].iter().collect();
    format!("{}{suffix}", snap_end(&head))
}

/// Claude Code's Bash cap: the first `max_chars` characters, then `... [K lines truncated] ...`.
pub fn cap_head_lines(text: &str, max_chars: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text.to_string();
    };
    let lines = text[cut..].lines().count();
    format!("{}\n\n... [{lines} lines truncated] ...", &text[..cut])
}

fn ends_like_a_result(tail: &str) -> bool {
    const MARKERS: &[&str] = &[
        "error",
        "exception",
        "failed",
        "fatal",
        "traceback",
        "panic",
        "stack trace",
        "exit code",
        "total",
        "summary",
        "result",
        "complete",
        "finished",
        "done",
    ];
    let lower = tail.to_lowercase();
    MARKERS.iter().any(|m| lower.contains(m)) || lower.trim_end().ends_with('}')
}

/// `text` cut back to its last newline if that is within its last 20 %.
fn snap_end(text: &str) -> &str {
    match text.rfind('\n') {
        Some(i) if i >= text.len() * 4 / 5 => &text[..i],
        _ => text,
    }
}

/// `text` starting after its first newline if that is within its first 20 %.
fn snap_start(text: &str) -> &str {
    match text.find('\n') {
        Some(i) if i <= text.len() / 5 => &text[i + 1..],
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_keep_their_cap_and_count_the_rest() {
        let mut c = Captured::default();
        c.push(b"hello ", 8);
        c.push(b"world", 8);
        assert_eq!(c.bytes, b"hello wo");
        assert_eq!(c.total, 11);
        assert!(c.text().contains("11 bytes in all"));
    }

    #[test]
    fn head_and_tail_when_the_end_is_a_result() {
        let body: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        let text = format!("{body}error: build failed\n");
        let capped = cap_head_tail(&text, 10_000);
        assert!(capped.starts_with("line 0\n"));
        assert!(capped.contains("middle content omitted"));
        assert!(capped.contains("error: build failed"));
        assert!(capped.contains(&format!("{} chars total", text.chars().count())));
        assert!(capped.chars().count() < 10_300);
        let plain: String = (0..3000).map(|i| format!("row {i}\n")).collect();
        let capped = cap_head_tail(&plain, 10_000);
        assert!(!capped.contains("middle content omitted"));
        assert!(capped.starts_with("row 0\n"));
        assert_eq!(cap_head_tail("short", 10), "short");
    }

    #[test]
    fn claude_code_cap_counts_the_dropped_lines() {
        let text = "ab\ncd\nef\n";
        assert_eq!(
            cap_head_lines(text, 4),
            "ab\nc\n\n... [2 lines truncated] ..."
        );
        assert_eq!(cap_head_lines("é".repeat(3).as_str(), 5), "ééé");
    }
}

//! The output size cap (pipeline step 7): no tool output reaches the model unbounded.

/// Cuts `text` to at most `max` bytes (plus the marker), keeping the first three quarters and the
/// last quarter — the head has the context, the tail has the outcome (exit status, final error) —
/// at line boundaries where one is near, and says exactly what was cut.
pub(crate) fn cap(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let total = text.len();
    let head_budget = max / 4 * 3;
    let tail_budget = max - head_budget;
    let head_end = snap_back(text, head_budget);
    let tail_start = snap_forward(text, total - tail_budget).max(head_end);
    let cut = tail_start - head_end;
    let marker = format!(
        "\n\n[... output truncated by Talon: {cut} of {total} bytes cut from the middle; the first {head_end} \
         and last {} bytes are shown. Narrow the request (a range, a filter, a more specific pattern) to see the rest. ...]\n\n",
        total - tail_start
    );
    let tail = text[tail_start..].to_string();
    text.truncate(head_end);
    text.push_str(&marker);
    text.push_str(&tail);
}

/// The largest char boundary ≤ `at`, moved back to just after a newline if one is within 1 KiB.
fn snap_back(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let floor = at.saturating_sub(1024);
    match text.as_bytes()[floor..at].iter().rposition(|&b| b == b'\n') {
        Some(p) => floor + p + 1,
        None => at,
    }
}

/// The smallest char boundary ≥ `at`, moved forward to just after a newline if one is within 1 KiB.
fn snap_forward(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    let ceil = text.len().min(at + 1024);
    match text.as_bytes()[at..ceil].iter().position(|&b| b == b'\n') {
        Some(p) => at + p + 1,
        None => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        let mut s = "hello".to_string();
        cap(&mut s, 10);
        assert_eq!(s, "hello");
    }

    #[test]
    fn long_text_keeps_head_and_tail_and_says_what_was_cut() {
        let mut s: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let total = s.len();
        cap(&mut s, 4096);
        assert!(s.starts_with("line 0\n"));
        assert!(s.ends_with("line 9999\n"));
        assert!(
            s.contains(&format!("of {total} bytes cut")),
            "{}",
            &s[..200]
        );
        assert!(s.len() < 4096 + 400);
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let mut s = "é".repeat(5000);
        cap(&mut s, 1001);
        assert!(s.contains("truncated by Talon"));
        // Would have panicked on a bad boundary; check the content is still valid é runs.
        assert!(s.starts_with("éé"));
        assert!(s.ends_with("éé"));
    }
}

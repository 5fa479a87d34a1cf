//! The string replacement both dialects' edit tools share.

/// Why a replacement could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// `old_string == new_string`.
    Identical,
    /// `old_string` does not occur.
    NotFound,
    /// `old_string` occurs this many times and `replace_all` is false.
    Ambiguous(usize),
}

/// Straight quotes for curly ones (models often type straight quotes for a file's curly ones).
fn straighten(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' => '\'',
        '\u{201C}' | '\u{201D}' => '"',
        other => other,
    }
}

/// Finds `old` in `content`, exactly or, failing that, with curly quotes in the file matched by
/// straight quotes in `old`. Returns byte ranges in `content`.
fn find_all(content: &str, old: &str) -> Vec<(usize, usize)> {
    let exact: Vec<(usize, usize)> = content
        .match_indices(old)
        .map(|(i, m)| (i, i + m.len()))
        .collect();
    if !exact.is_empty() || old.is_empty() {
        return exact;
    }
    // Quote-insensitive search over chars; each char maps to itself, so char positions line up.
    let content_chars: Vec<(usize, char)> = content.char_indices().collect();
    let old_chars: Vec<char> = old.chars().map(straighten).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + old_chars.len() <= content_chars.len() {
        let hit = old_chars
            .iter()
            .enumerate()
            .all(|(k, c)| straighten(content_chars[i + k].1) == *c);
        if hit {
            let start = content_chars[i].0;
            let end = content_chars
                .get(i + old_chars.len())
                .map_or(content.len(), |(b, _)| *b);
            out.push((start, end));
            i += old_chars.len();
        } else {
            i += 1;
        }
    }
    out
}

/// Replaces `old` by `new` (every occurrence with `all`), returning the new text and the count.
pub fn replace(
    content: &str,
    old: &str,
    new: &str,
    all: bool,
) -> Result<(String, usize), EditError> {
    if old == new {
        return Err(EditError::Identical);
    }
    let hits = find_all(content, old);
    match hits.len() {
        0 => Err(EditError::NotFound),
        n if n > 1 && !all => Err(EditError::Ambiguous(n)),
        n => {
            let mut out = String::with_capacity(content.len() + n * new.len());
            let mut last = 0;
            for (start, end) in &hits {
                out.push_str(&content[last..*start]);
                out.push_str(new);
                last = *end;
            }
            out.push_str(&content[last..]);
            Ok((out, n))
        }
    }
}

/// The 1-based line of byte offset `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Byte offset of the first difference between two texts.
pub fn first_difference(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacements() {
        assert_eq!(replace("a b a", "b", "c", false), Ok(("a c a".into(), 1)));
        assert_eq!(
            replace("a b a", "a", "c", false),
            Err(EditError::Ambiguous(2))
        );
        assert_eq!(replace("a b a", "a", "c", true), Ok(("c b c".into(), 2)));
        assert_eq!(replace("a", "x", "y", false), Err(EditError::NotFound));
        assert_eq!(replace("a", "a", "a", false), Err(EditError::Identical));
    }

    #[test]
    fn curly_quotes_match_straight_ones() {
        let content = "say “hello” and ‘bye’";
        assert_eq!(
            replace(content, "\"hello\"", "\"hi\"", false),
            Ok(("say \"hi\" and ‘bye’".into(), 1))
        );
    }

    #[test]
    fn positions() {
        assert_eq!(line_of("a\nb\nc", 4), 3);
        assert_eq!(first_difference("abcd", "abXd"), 2);
    }
}

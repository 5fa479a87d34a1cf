//! Shell words: what a word of the parse tree means once quotes and escapes are removed, and how
//! to write a value back as a canonical shell word.
//!
//! A word is *literal* when its value is fully known before the shell runs (quotes removed,
//! escapes applied, ANSI-C strings decoded). Anything that expands at run time (parameters,
//! command substitutions, globs, brace expansion) makes the word dynamic; its text is then the
//! source text, so nothing downstream mistakes it for a value.

use tree_sitter::Node;

/// The value of one word of the parse tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WordValue {
    /// The value when `literal`, else the source text.
    pub text: String,
    /// Fully known before the shell runs.
    pub literal: bool,
}

impl WordValue {
    fn dynamic(node: Node<'_>, src: &str) -> Self {
        Self {
            text: node_text(node, src).to_owned(),
            literal: false,
        }
    }
}

/// The source text of `node` (empty if the range is not on character boundaries).
pub(crate) fn node_text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// Resolves a word-like node (word, strings, concatenation, expansions…) to its value.
pub(crate) fn resolve(node: Node<'_>, src: &str) -> WordValue {
    match node.kind() {
        "command_name" => match node.named_child(0) {
            Some(child) => resolve(child, src),
            None => WordValue::dynamic(node, src),
        },
        "word" => unquoted(node_text(node, src)).map_or_else(
            || WordValue::dynamic(node, src),
            |text| WordValue {
                text,
                literal: true,
            },
        ),
        "raw_string" => {
            let text = node_text(node, src);
            let inner = text
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .unwrap_or(text);
            WordValue {
                text: inner.to_owned(),
                literal: true,
            }
        }
        "string" => double_quoted(node, src),
        "translated_string" => match node.named_child(0) {
            Some(child) => resolve(child, src),
            None => WordValue::dynamic(node, src),
        },
        "ansi_c_string" => ansi_c(node_text(node, src)).map_or_else(
            || WordValue::dynamic(node, src),
            |text| WordValue {
                text,
                literal: true,
            },
        ),
        "number" if node.named_child_count() == 0 => WordValue {
            text: node_text(node, src).to_owned(),
            literal: true,
        },
        "variable_name" => WordValue {
            text: node_text(node, src).to_owned(),
            literal: true,
        },
        "concatenation" => {
            let mut text = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                let part = resolve(child, src);
                if !part.literal {
                    return WordValue::dynamic(node, src);
                }
                text.push_str(&part.text);
            }
            WordValue {
                text,
                literal: true,
            }
        }
        _ => WordValue::dynamic(node, src),
    }
}

/// An unquoted word: backslash escapes applied. `None` when it holds anything that expands at
/// run time: an unescaped `$` or backquote, a glob character, brace expansion, or a tilde
/// prefix (`~user` depends on the password database).
fn unquoted(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    let mut braces = 0usize;
    let mut brace_list = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => out.push(next),
                None => out.push('\\'),
            },
            '$' | '`' | '*' | '?' | '[' => return None,
            '{' => {
                braces += 1;
                out.push(c);
            }
            ',' if braces > 0 => {
                brace_list = true;
                out.push(c);
            }
            '.' if braces > 0 && chars.peek() == Some(&'.') => {
                brace_list = true;
                out.push(c);
            }
            '}' => {
                if braces > 0 && brace_list {
                    return None;
                }
                braces = braces.saturating_sub(1);
                out.push(c);
            }
            '~' if out.is_empty() && !matches!(chars.peek(), None | Some('/')) => return None,
            _ => out.push(c),
        }
    }
    Some(out)
}

/// A double-quoted string: literal when it holds no expansion.
fn double_quoted(node: Node<'_>, src: &str) -> WordValue {
    let text = node_text(node, src);
    let mut out = String::new();
    let mut cursor = node.walk();
    let mut pos = node.start_byte();
    for child in node.children(&mut cursor) {
        let gap = src.get(pos..child.start_byte()).unwrap_or("");
        out.push_str(&unescape_double(gap));
        pos = child.end_byte();
        match child.kind() {
            "\"" => {}
            "string_content" => out.push_str(&unescape_double(node_text(child, src))),
            _ => return WordValue::dynamic(node, src),
        }
    }
    let tail = src.get(pos..node.end_byte()).unwrap_or("");
    out.push_str(&unescape_double(tail));
    if out.contains('$') || out.contains('`') {
        // An expansion the grammar left as plain content: do not guess.
        if text.contains("$(") || text.contains('`') || text.contains("${") {
            return WordValue::dynamic(node, src);
        }
    }
    WordValue {
        text: out,
        literal: true,
    }
}

/// Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and newline.
fn unescape_double(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes `$'…'`. `None` for escapes it does not know (the caller treats the word as dynamic).
pub(crate) fn ansi_c(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix("$'")?.strip_suffix('\'')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        match e {
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' => {
                let value = take_radix(&mut chars, 16, 2)?;
                out.push(char::from_u32(value)?);
            }
            'u' => {
                let value = take_radix(&mut chars, 16, 4)?;
                out.push(char::from_u32(value)?);
            }
            'U' => {
                let value = take_radix(&mut chars, 16, 8)?;
                out.push(char::from_u32(value)?);
            }
            '0'..='7' => {
                let mut value = e.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value & 0xff)?);
            }
            'c' => {
                let ctl = chars.next()?;
                out.push(char::from_u32(u32::from(ctl) & 0x1f)?);
            }
            _ => return None,
        }
    }
    if out.contains('\0') {
        return None;
    }
    Some(out)
}

fn take_radix(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: usize,
) -> Option<u32> {
    let mut value = 0u32;
    let mut n = 0;
    while n < max {
        match chars.peek().and_then(|d| d.to_digit(radix)) {
            Some(d) => {
                value = value.checked_mul(radix)?.checked_add(d)?;
                chars.next();
                n += 1;
            }
            None => break,
        }
    }
    (n > 0).then_some(value)
}

/// Writes `value` as one canonical shell word: bare when it needs no quoting, else in single
/// quotes (`'` written as `'\''`).
pub fn shell_quote(value: &str) -> String {
    let bare = !value.is_empty()
        && value.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | '+' | ',' | '@' | '%')
        })
        && !value.starts_with('=');
    if bare {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// The last path component: how a program is named whatever its directory.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Splits a string the way `env -S` does, for the cases it can do exactly: whitespace, single
/// and double quotes, backslash escapes. `None` for anything else (`${VAR}`, `\c`, unusual
/// escapes), which the caller reports as unknown.
pub(crate) fn split_env_string(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '$' => return None,
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => current.push(other),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' => return None,
                        '\\' => current.push(env_escape(chars.next()?)?),
                        other => current.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                current.push(env_escape(chars.next()?)?);
            }
            other => {
                in_word = true;
                current.push(other);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Some(words)
}

fn env_escape(c: char) -> Option<char> {
    Some(match c {
        '\\' | '\'' | '"' | '#' | '$' | ' ' => c,
        '_' => ' ',
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        'f' => '\x0c',
        'v' => '\x0b',
        _ => return None,
    })
}

/// A valid shell variable name.
pub(crate) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquoted_words_apply_escapes_and_refuse_expansions() {
        assert_eq!(unquoted(r"\rm").as_deref(), Some("rm"));
        assert_eq!(unquoted(r"a\ b").as_deref(), Some("a b"));
        assert_eq!(unquoted("a\\\nb").as_deref(), Some("ab"));
        assert_eq!(unquoted("~/x").as_deref(), Some("~/x"));
        for dynamic in ["*.rs", "/???/?m", "[ab]", "{a,b}", "{1..3}", "~root", "$x"] {
            assert_eq!(unquoted(dynamic), None, "{dynamic} must be dynamic");
        }
        assert_eq!(unquoted("{}").as_deref(), Some("{}"));
        assert_eq!(unquoted(r"\*").as_deref(), Some("*"));
    }

    #[test]
    fn ansi_c_strings_decode() {
        assert_eq!(ansi_c(r"$'\x72\x6d'").as_deref(), Some("rm"));
        assert_eq!(ansi_c(r"$'\162\155'").as_deref(), Some("rm"));
        assert_eq!(ansi_c(r"$'a\nb'").as_deref(), Some("a\nb"));
        assert_eq!(ansi_c(r"$'\u0072m'").as_deref(), Some("rm"));
        assert_eq!(ansi_c(r"$'\q'"), None);
        assert_eq!(ansi_c(r"$'\x00'"), None);
    }

    #[test]
    fn quoting_is_canonical() {
        assert_eq!(shell_quote("status"), "status");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn env_split_string() {
        assert_eq!(
            split_env_string(r#"-i "a b" c\ d"#),
            Some(vec!["-i".into(), "a b".into(), "c d".into()])
        );
        assert_eq!(split_env_string("x ${HOME}"), None);
        assert_eq!(split_env_string("'unterminated"), None);
    }

    #[test]
    fn names_and_basenames() {
        assert!(is_name("LD_PRELOAD"));
        assert!(!is_name("1A"));
        assert!(!is_name("A-B"));
        assert_eq!(basename("/usr/bin/env"), "env");
        assert_eq!(basename("env"), "env");
    }
}

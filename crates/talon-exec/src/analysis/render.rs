//! The canonical text of a whole script: what "allow always" stores and compares.
//!
//! Two scripts with the same canonical text run the same commands with the same arguments in
//! the same structure: only whitespace, comments, quoting of literal words, line breaks
//! (written as `;`) and trailing separators differ. Dynamic words keep their source text.

use tree_sitter::Node;

use super::parse::WORD_KINDS;
use super::words::{node_text, resolve, shell_quote};

const MAX_DEPTH: usize = 200;

/// Nodes whose named children are statements in sequence.
const STATEMENT_LISTS: &[&str] = &[
    "program",
    "compound_statement",
    "subshell",
    "do_group",
    "command_substitution",
    "process_substitution",
    "else_clause",
    "elif_clause",
    "if_statement",
    "while_statement",
    "case_item",
];

/// Renders the tree under `root` canonically.
pub(crate) fn render(root: Node<'_>, src: &str) -> String {
    let mut out = Vec::new();
    tokens(root, src, &mut out, 0);
    while out.last().is_some_and(|t| t == ";") {
        out.pop();
    }
    out.join(" ")
}

fn word_token(node: Node<'_>, src: &str) -> String {
    let value = resolve(node, src);
    if value.literal {
        shell_quote(&value.text)
    } else {
        value.text
    }
}

fn tokens(node: Node<'_>, src: &str, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        out.push(node_text(node, src).to_owned());
        return;
    }
    let kind = node.kind();
    match kind {
        "comment" => return,
        "heredoc_body" | "heredoc_start" | "heredoc_end" => {
            out.push(node_text(node, src).to_owned());
            return;
        }
        "variable_assignment" => {
            let mut token = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                if child.is_named()
                    && WORD_KINDS.contains(&child.kind())
                    && child.kind() != "variable_name"
                {
                    token.push_str(&word_token(child, src));
                } else {
                    token.push_str(node_text(child, src));
                }
            }
            out.push(token);
            return;
        }
        "file_redirect" | "herestring_redirect" => {
            let mut op = String::new();
            let mut cursor = node.walk();
            let children: Vec<_> = node.children(&mut cursor).collect();
            let mut rest = Vec::new();
            for child in children {
                if child.kind() == "file_descriptor" || !child.is_named() {
                    op.push_str(node_text(child, src));
                } else {
                    rest.push(child);
                }
            }
            out.push(op);
            for child in rest {
                tokens(child, src, out, depth + 1);
            }
            return;
        }
        "command_substitution" | "process_substitution" => {}
        _ if WORD_KINDS.contains(&kind) => {
            out.push(word_token(node, src));
            return;
        }
        _ => {}
    }
    if node.child_count() == 0 {
        out.push(node_text(node, src).to_owned());
        return;
    }
    let list = STATEMENT_LISTS.contains(&kind);
    let mut previous_statement = false;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if child.kind() == "comment" {
            continue;
        }
        let statement = list && child.is_named() && !WORD_KINDS.contains(&child.kind());
        if statement && previous_statement {
            out.push(";".to_owned());
        }
        tokens(child, src, out, depth + 1);
        previous_statement = statement;
    }
}

/// Leaves whose text is covered whole.
const COVERED: &[&str] = &[
    "word",
    "raw_string",
    "ansi_c_string",
    "number",
    "regex",
    "extglob_pattern",
    "variable_name",
    "special_variable_name",
    "string_content",
    "heredoc_content",
    "heredoc_start",
    "heredoc_end",
    "test_operator",
    "file_descriptor",
    "comment",
];

/// Text the parser skipped without reporting an error (tree-sitter-bash drops the `-` of
/// `python3 - <<'EOF'`): source outside every token, other than whitespace and line
/// continuations, outside strings and here-document bodies.
pub(crate) fn skipped_text(root: Node<'_>, src: &str) -> Option<String> {
    let mut pos = 0;
    match covered(root, src, &mut pos, false, 0) {
        Err(gap) => Some(gap),
        Ok(()) => nonblank(src, pos, src.len()),
    }
}

fn covered(
    node: Node<'_>,
    src: &str,
    pos: &mut usize,
    text_ok: bool,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        *pos = (*pos).max(node.end_byte());
        return Ok(());
    }
    check_gap(src, *pos, node.start_byte(), text_ok)?;
    *pos = (*pos).max(node.start_byte());
    let kind = node.kind();
    if node.child_count() == 0 || COVERED.contains(&kind) {
        *pos = (*pos).max(node.end_byte());
        return Ok(());
    }
    let inner = match kind {
        "string" | "translated_string" | "heredoc_body" => true,
        "command_substitution" | "process_substitution" | "arithmetic_expansion" | "expansion" => {
            false
        }
        _ => text_ok,
    };
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        covered(child, src, pos, inner, depth + 1)?;
    }
    check_gap(src, *pos, node.end_byte(), inner)?;
    *pos = (*pos).max(node.end_byte());
    Ok(())
}

fn check_gap(src: &str, from: usize, to: usize, text_ok: bool) -> Result<(), String> {
    if text_ok {
        return Ok(());
    }
    nonblank(src, from, to).map_or(Ok(()), Err)
}

/// The text between `from` and `to` if it is more than whitespace and line continuations.
fn nonblank(src: &str, from: usize, to: usize) -> Option<String> {
    if from >= to {
        return None;
    }
    let Some(gap) = src.get(from..to) else {
        return Some("(text between characters)".to_owned());
    };
    if gap.bytes().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    let stripped = gap.replace("\\\n", "");
    (!stripped.trim().is_empty()).then(|| gap.trim().chars().take(40).collect())
}

#[cfg(test)]
mod tests {
    use super::super::analyze;

    fn norm(s: &str) -> String {
        analyze(s).normalized
    }

    #[test]
    fn whitespace_quotes_comments_and_newlines_normalise() {
        assert_eq!(norm("git   status"), "git status");
        assert_eq!(norm("'git' \"status\""), "git status");
        assert_eq!(norm("git status;"), "git status");
        assert_eq!(norm("git status # look"), "git status");
        assert_eq!(norm("git status\nnpm test"), "git status ; npm test");
        assert_eq!(norm("git status && npm test"), "git status && npm test");
        assert_eq!(norm("echo 'a b'"), "echo 'a b'");
        assert_eq!(norm("echo \"$HOME\""), "echo \"$HOME\"");
    }

    #[test]
    fn different_commands_stay_different() {
        let pairs = [
            ("git status", "git push --force"),
            ("git status", "git status; rm -rf ~"),
            ("./canary-bin", "canary-bin"),
            ("sh -lc 'echo a'", "sh -lc 'rm -rf /'"),
            ("echo 2>/dev/null", "echo 2 >/dev/null"),
            ("a && b", "a || b"),
        ];
        for (a, b) in pairs {
            assert_ne!(norm(a), norm(b), "{a} vs {b}");
        }
    }
}

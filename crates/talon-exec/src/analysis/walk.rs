//! The parts of the walk that build one command: its words, assignments, redirections and
//! here-documents, and the commands nested in them (substitutions, arithmetic).

use tree_sitter::Node;

use super::parse::{Ctx, MAX_NODE_DEPTH, Pending, WORD_KINDS, Walker, Word};
use super::words::{self, node_text};
use super::{Assignment, Redirect, RedirectKind, SegmentKind, wrappers};

/// What a redirection node holds besides redirections.
#[derive(Default)]
pub(crate) struct RedirOut<'t> {
    pub redirects: Vec<Redirect>,
    pub args: Vec<Word>,
    pub after: Vec<Node<'t>>,
    pub pipe: Option<Node<'t>>,
}

impl Walker {
    pub(crate) fn command(
        &mut self,
        node: Node<'_>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
        redirects: Vec<Redirect>,
    ) {
        self.command_with(node, src, ctx, nd, redirects, Vec::new());
    }

    pub(crate) fn command_with(
        &mut self,
        node: Node<'_>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
        mut redirects: Vec<Redirect>,
        extra_args: Vec<Word>,
    ) {
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        let mut after = Vec::new();
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            match child.kind() {
                "variable_assignment" => assignments.push(self.assignment(child, src, ctx, nd)),
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                    let out = self.redirect(child, src, ctx, nd);
                    redirects.extend(out.redirects);
                    words.extend(out.args);
                    after.extend(out.after);
                    after.extend(out.pipe);
                }
                "comment" => {}
                "subshell" => self.stmt(child, src, ctx, nd),
                _ if !child.is_named() => {}
                kind => match node.field_name_for_child(i as u32) {
                    Some("name" | "argument") => words.push(self.word(child, src, ctx, nd)),
                    _ => {
                        self.unknown(format!("unsupported part of a command `{kind}`"));
                        self.nested(child, src, ctx, nd);
                    }
                },
            }
        }
        words.extend(extra_args);
        let kind = if words.is_empty() {
            SegmentKind::Assignment
        } else {
            SegmentKind::Command
        };
        let p = Pending {
            words,
            assignments,
            redirects,
            text: node_text(node, src).to_owned(),
            chain: ctx.chain.clone(),
            kind,
        };
        wrappers::resolve(self, p, ctx);
        for node in after {
            self.stmt(node, src, ctx, nd);
        }
    }

    /// Resolves a word and walks the commands inside it.
    pub(crate) fn word(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) -> Word {
        let start = self.segments.len();
        self.nested(node, src, ctx, nd);
        let value = words::resolve(node, src);
        Word {
            split: !value.literal && may_split(node, src),
            placeholder: false,
            text: value.text,
            literal: value.literal,
            subs: start..self.segments.len(),
        }
    }

    /// Walks substitutions inside `node`, and notes arithmetic and parameter transformations.
    pub(crate) fn nested(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        if self.full {
            return;
        }
        if nd > MAX_NODE_DEPTH {
            self.unknown("the script is nested too deeply");
            return;
        }
        let nd = nd + 1;
        match node.kind() {
            "command_substitution" | "process_substitution" => {
                let mut inner = ctx.clone();
                inner.pipe = None;
                inner.redirects.clear();
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    match child.kind() {
                        "comment" => {}
                        "file_redirect" => {
                            self.redirect(child, src, ctx, nd);
                        }
                        _ => self.stmt(child, src, &inner, nd),
                    }
                }
                return;
            }
            "arithmetic_expansion" => {
                self.arith = true;
                self.arith_quoted(node);
            }
            "subscript" => {
                self.arith = true;
                self.quoted_subst(node, src, "an array subscript");
            }
            "expansion" => {
                let text = node_text(node, src);
                // `${!x}` evaluates x's value as a name, `${x:offset:length}` as arithmetic.
                let mut tokens = node.walk();
                let reevaluates = text.starts_with("${!")
                    || node
                        .children(&mut tokens)
                        .any(|c| !c.is_named() && c.kind() == ":");
                self.arith |= reevaluates;
                if reevaluates {
                    self.quoted_subst(node, src, "an indirect expansion or a substring offset");
                }
                let bytes = text.as_bytes();
                let n = bytes.len();
                if n >= 4 && bytes.get(n - 3) == Some(&b'@') && bytes.get(n - 1) == Some(&b'}') {
                    if bytes.get(n - 2).is_some_and(|b| b"PpEeAaKk".contains(b)) {
                        self.transforms.push(text.to_owned());
                    }
                    if bytes.get(n - 2) == Some(&b'P') {
                        self.unknown("`${…@P}` expands a value as a prompt, running substitutions");
                    }
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.nested(child, src, ctx, nd);
        }
    }

    pub(crate) fn assignment(
        &mut self,
        node: Node<'_>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
    ) -> Assignment {
        let name = node.child_by_field_name("name");
        if let Some(n) = name {
            self.nested(n, src, ctx, nd);
        }
        let name = name.map_or_else(
            || {
                node_text(node, src)
                    .split('=')
                    .next()
                    .unwrap_or("")
                    .to_owned()
            },
            |n| node_text(n, src).to_owned(),
        );
        match node.child_by_field_name("value") {
            Some(value) => {
                let w = self.word(value, src, ctx, nd);
                // A literal value holding `$(…)` is what arithmetic injection stores.
                let mut payload = w.literal && has_subst_syntax(&w.text);
                if value.kind() == "array" {
                    // `([key]=value)`: an indexed array's key is arithmetic.
                    let mut cursor = value.walk();
                    let keyed: Vec<Node<'_>> = value
                        .named_children(&mut cursor)
                        .filter(|e| node_text(*e, src).starts_with('['))
                        .collect();
                    for element in keyed {
                        self.quoted_subst(element, src, "an array key");
                    }
                    let mut cursor = value.walk();
                    payload |= value.named_children(&mut cursor).any(|e| {
                        let e = words::resolve(e, src);
                        e.literal && has_subst_syntax(&e.text)
                    });
                }
                self.subst_text |= payload;
                Assignment {
                    name,
                    value: w.text,
                    dynamic: !w.literal,
                }
            }
            None => Assignment {
                name,
                value: String::new(),
                dynamic: false,
            },
        }
    }

    pub(crate) fn declaration(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut nameref = false;
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            match child.kind() {
                "comment" => {}
                "variable_assignment" => {
                    let a = self.assignment(child, src, ctx, nd);
                    if nameref && a.dynamic {
                        self.unknown(format!(
                            "the nameref `{}` refers to a name only known at run time",
                            a.name
                        ));
                    }
                    let word = format!("{}={}", a.name, a.value);
                    words.push(if a.dynamic {
                        Word::dynamic(word)
                    } else {
                        Word::literal(word)
                    });
                    assignments.push(a);
                }
                _ if !child.is_named() => words.push(Word::literal(node_text(child, src))),
                _ => {
                    let w = self.word(child, src, ctx, nd);
                    if !w.literal {
                        self.unknown(format!(
                            "`{}` with a name computed at run time",
                            node_text(node, src).split_whitespace().next().unwrap_or("")
                        ));
                    } else if w.text.starts_with('-') && w.text.contains(['i', 'n']) {
                        // Integer variables evaluate what is assigned to them; a nameref's
                        // value is a name evaluated wherever the reference is used.
                        self.arith = true;
                        // (`export -n` un-exports instead.)
                        let builtin = node_text(node, src).split_whitespace().next();
                        nameref |= w.text.contains('n') && builtin != Some("export");
                    }
                    words.push(w);
                }
            }
        }
        let p = Pending {
            words,
            assignments,
            redirects: Vec::new(),
            text: node_text(node, src).to_owned(),
            chain: ctx.chain.clone(),
            kind: SegmentKind::Command,
        };
        self.push_pending(p, ctx);
    }

    pub(crate) fn unset(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut words = Vec::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.kind() == "comment" {
                continue;
            }
            if child.is_named() {
                words.push(self.word(child, src, ctx, nd));
            } else {
                words.push(Word::literal(node_text(child, src)));
            }
        }
        let p = Pending {
            words,
            assignments: Vec::new(),
            redirects: Vec::new(),
            text: node_text(node, src).to_owned(),
            chain: ctx.chain.clone(),
            kind: SegmentKind::Command,
        };
        wrappers::resolve(self, p, ctx);
    }

    pub(crate) fn test(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut words = Vec::new();
        self.test_words(node, src, ctx, nd, &mut words);
        let p = Pending {
            words,
            assignments: Vec::new(),
            redirects: Vec::new(),
            text: node_text(node, src).to_owned(),
            chain: ctx.chain.clone(),
            kind: SegmentKind::Test,
        };
        self.push_pending(p, ctx);
    }

    pub(crate) fn test_words(
        &mut self,
        node: Node<'_>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
        out: &mut Vec<Word>,
    ) {
        if nd > MAX_NODE_DEPTH {
            self.unknown("the script is nested too deeply");
            return;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            let kind = child.kind();
            if kind == "comment" {
                continue;
            }
            if WORD_KINDS.contains(&kind) {
                out.push(self.word(child, src, ctx, nd + 1));
            } else if kind == "test_operator" {
                let op = node_text(child, src);
                if matches!(op, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge") {
                    self.arith = true;
                }
                out.push(Word::literal(op));
            } else if child.child_count() == 0 {
                out.push(Word::literal(node_text(child, src)));
            } else {
                self.test_words(child, src, ctx, nd + 1, out);
            }
        }
    }

    pub(crate) fn redirect<'t>(
        &mut self,
        node: Node<'t>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
    ) -> RedirOut<'t> {
        let mut out = RedirOut::default();
        let fd = node
            .child_by_field_name("descriptor")
            .and_then(|d| node_text(d, src).parse::<u32>().ok());
        match node.kind() {
            "file_redirect" => {
                let mut op = String::new();
                let mut target: Option<Word> = None;
                let mut cursor = node.walk();
                for (i, child) in node.children(&mut cursor).enumerate() {
                    if !child.is_named() {
                        if op.is_empty() {
                            op = child.kind().to_owned();
                        }
                        continue;
                    }
                    if node.field_name_for_child(i as u32) == Some("descriptor") {
                        continue;
                    }
                    let w = self.word(child, src, ctx, nd);
                    if target.is_none() {
                        target = Some(w);
                    } else {
                        out.args.push(w);
                    }
                }
                let target = target.unwrap_or_else(|| Word::literal(""));
                let kind = redirect_kind(&op, &target);
                out.redirects.push(Redirect {
                    fd,
                    op,
                    target: target.text,
                    dynamic: !target.literal,
                    kind,
                });
            }
            "herestring_redirect" => {
                let mut cursor = node.walk();
                let mut target = None;
                for (i, child) in node.children(&mut cursor).enumerate() {
                    if child.is_named() && node.field_name_for_child(i as u32) != Some("descriptor")
                    {
                        target = Some(self.word(child, src, ctx, nd));
                    }
                }
                let target = target.unwrap_or_else(|| Word::literal(""));
                out.redirects.push(Redirect {
                    fd,
                    op: "<<<".to_owned(),
                    target: target.text,
                    dynamic: !target.literal,
                    kind: RedirectKind::HereString,
                });
            }
            "heredoc_redirect" => self.heredoc(node, src, ctx, nd, fd, &mut out),
            kind => {
                self.unknown(format!("unsupported redirection `{kind}`"));
                self.nested(node, src, ctx, nd);
            }
        }
        out
    }

    pub(crate) fn heredoc<'t>(
        &mut self,
        node: Node<'t>,
        src: &str,
        ctx: &Ctx,
        nd: usize,
        fd: Option<u32>,
        out: &mut RedirOut<'t>,
    ) {
        let mut op = "<<".to_owned();
        let mut quoted = false;
        let mut body: Option<Node<'t>> = None;
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            let field = node.field_name_for_child(i as u32);
            match child.kind() {
                "<<" | "<<-" => op = child.kind().to_owned(),
                "heredoc_start" => {
                    quoted = node_text(child, src).contains(['\'', '"', '\\']);
                }
                "heredoc_body" => body = Some(child),
                "heredoc_end" | "comment" => {}
                "file_redirect" | "herestring_redirect" => {
                    let more = self.redirect(child, src, ctx, nd);
                    out.redirects.extend(more.redirects);
                    out.args.extend(more.args);
                }
                "pipeline" => out.pipe = Some(child),
                _ if !child.is_named() => {}
                _ if field == Some("argument") => out.args.push(self.word(child, src, ctx, nd)),
                _ => out.after.push(child),
            }
        }
        let (target, dynamic) = match body {
            Some(b) => {
                let mut dynamic = false;
                if !quoted {
                    let mut cursor = b.walk();
                    dynamic = b.named_children(&mut cursor).any(|c| {
                        matches!(
                            c.kind(),
                            "simple_expansion" | "expansion" | "command_substitution"
                        )
                    });
                    self.nested(b, src, ctx, nd);
                }
                let mut text = node_text(b, src).to_owned();
                if op == "<<-" {
                    text = text
                        .split('\n')
                        .map(|l| l.trim_start_matches('\t'))
                        .collect::<Vec<_>>()
                        .join("\n");
                }
                (text, dynamic)
            }
            None => (String::new(), false),
        };
        out.redirects.push(Redirect {
            fd,
            op,
            target,
            dynamic,
            kind: RedirectKind::HereDoc,
        });
    }
}

/// Text that would run a command if bash evaluated it again (in arithmetic or as a prompt).
pub(crate) fn has_subst_syntax(text: &str) -> bool {
    text.contains("$(") || text.contains('`')
}

/// Whether a dynamic word may become several words (unquoted expansion or glob).
fn may_split(node: Node<'_>, src: &str) -> bool {
    match node.kind() {
        "string" | "raw_string" | "ansi_c_string" | "translated_string" | "number" => false,
        "word" => !words::resolve(node, src).literal,
        "command_name" | "concatenation" => {
            let mut cursor = node.walk();
            node.named_children(&mut cursor).any(|c| may_split(c, src))
        }
        _ => true,
    }
}

fn redirect_kind(op: &str, target: &Word) -> RedirectKind {
    let fd_target = target.literal
        && (target.text == "-"
            || (!target.text.is_empty() && target.text.bytes().all(|b| b.is_ascii_digit())));
    match op {
        "<" => RedirectKind::Read,
        ">>" | "&>>" => RedirectKind::Append,
        "<>" => RedirectKind::ReadWrite,
        ">&" if !fd_target => RedirectKind::Write,
        ">&" | "<&" | ">&-" | "<&-" => RedirectKind::Duplicate,
        _ => RedirectKind::Write,
    }
}

/// The first error node's text, shortened.
pub(crate) fn error_snippet(root: Node<'_>, src: &str) -> String {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.is_error() || n.is_missing() {
            let text: String = node_text(n, src).chars().take(60).collect();
            return if text.is_empty() {
                node_text(root, src).chars().take(60).collect()
            } else {
                text
            };
        }
        let mut cursor = n.walk();
        let children: Vec<_> = n.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    node_text(root, src).chars().take(60).collect()
}

/// Tree-sitter treats backslash-newline as whitespace, but bash removes it, joining the words
/// around it (`r\<newline>m` is `rm`). Such a join outside quotes makes the analysis unknown.
pub(crate) fn continuation_splits_word(root: Node<'_>, src: &str) -> bool {
    let bytes = src.as_bytes();
    for (i, _) in src.match_indices("\\\n") {
        let mut start = i;
        while start > 0 && bytes.get(start - 1) == Some(&b'\\') {
            start -= 1;
        }
        if (i - start) % 2 == 1 {
            continue;
        }
        let before = start.checked_sub(1).and_then(|k| bytes.get(k));
        let after = bytes.get(i + 2);
        let blank = |b: Option<&u8>| b.is_none_or(|b| b.is_ascii_whitespace());
        if blank(before) || blank(after) {
            continue;
        }
        let mut node = root.descendant_for_byte_range(i, i + 1);
        let mut quoted = false;
        while let Some(n) = node {
            if matches!(
                n.kind(),
                "raw_string" | "string" | "heredoc_body" | "comment" | "ansi_c_string"
            ) {
                quoted = true;
                break;
            }
            node = n.parent();
        }
        if !quoted {
            return true;
        }
    }
    false
}

/// zsh expansions that bash's grammar reads differently: glob qualifiers (`*(e:…:)`, which run
/// code), `=(…)`, `${(…)…}`.
pub(crate) fn zsh_only(src: &str) -> bool {
    if src.contains("=(") || src.contains("${(") {
        return true;
    }
    let mut prev = ' ';
    for c in src.chars() {
        if c == '(' && (prev.is_ascii_alphanumeric() || "*?]/_.-~)".contains(prev)) {
            return true;
        }
        prev = c;
    }
    false
}

#[cfg(test)]
mod tests;

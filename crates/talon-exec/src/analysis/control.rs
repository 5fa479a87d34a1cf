//! Compound commands: redirected groups and here-document continuations, functions, loops and
//! `case`.

use tree_sitter::Node;

use super::parse::{Ctx, Pending, Walker};
use super::walk::RedirOut;
use super::words::{self, node_text};
use super::{PipePosition, SegmentKind};

impl Walker {
    pub(crate) fn redirected(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let body = node.child_by_field_name("body");
        let mut out = RedirOut::default();
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if Some(child) == body || child.kind() == "comment" {
                continue;
            }
            match child.kind() {
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                    let more = self.redirect(child, src, ctx, nd);
                    out.redirects.extend(more.redirects);
                    out.args.extend(more.args);
                    out.after.extend(more.after);
                    if more.pipe.is_some() {
                        out.pipe = more.pipe;
                    }
                }
                kind => {
                    self.unknown(format!("unsupported redirection `{kind}`"));
                    self.nested(child, src, ctx, nd);
                }
            }
        }
        let mut inner = ctx.clone();
        let pipe_id = out.pipe.map(|_| self.new_pipe());
        if let Some(id) = pipe_id {
            inner.pipe = Some(PipePosition { id, index: 0 });
        }
        match body {
            Some(b) if b.kind() == "command" => {
                self.command_with(b, src, &inner, nd, out.redirects, out.args);
            }
            Some(b) => {
                if !out.args.is_empty() {
                    self.unknown("words after a here-document of a compound command");
                }
                inner.redirects.extend(out.redirects);
                self.stmt(b, src, &inner, nd);
            }
            None => {
                let p = Pending {
                    words: Vec::new(),
                    assignments: Vec::new(),
                    redirects: out.redirects,
                    text: node_text(node, src).to_owned(),
                    chain: ctx.chain.clone(),
                    kind: SegmentKind::Assignment,
                };
                self.push_pending(p, &inner);
            }
        }
        if let (Some(pipe), Some(id)) = (out.pipe, pipe_id) {
            let mut cursor = pipe.walk();
            for (index, child) in (1..).zip(pipe.named_children(&mut cursor)) {
                let mut next = ctx.clone();
                next.pipe = Some(PipePosition { id, index });
                self.stmt(child, src, &next, nd);
            }
        }
        for after in out.after {
            self.stmt(after, src, ctx, nd);
        }
    }

    /// A function definition: its body is walked with the function's name, so a call to itself
    /// (a fork bomb) can be recognised.
    pub(crate) fn function_definition(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let name = node
            .child_by_field_name("name")
            .map(|n| words::resolve(n, src).text);
        let mut inner = ctx.clone();
        inner.function = name;
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            match node.field_name_for_child(i as u32) {
                Some("body") => self.stmt(child, src, &inner, nd),
                Some("redirect") => {
                    let out = self.redirect(child, src, ctx, nd);
                    inner.redirects.extend(out.redirects);
                }
                _ => {}
            }
        }
    }

    /// `for`/`select`: the words are walked for substitutions, the body as statements.
    pub(crate) fn for_statement(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            match node.field_name_for_child(i as u32) {
                Some("value") => {
                    self.word(child, src, ctx, nd);
                }
                Some("body") => self.stmt(child, src, ctx, nd),
                _ => {}
            }
        }
    }

    /// `for ((…))`: arithmetic, then the body.
    pub(crate) fn c_style_for(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        self.arith = true;
        let mut cursor = node.walk();
        for (i, child) in node.children(&mut cursor).enumerate() {
            if !child.is_named() {
                continue;
            }
            let body = node.field_name_for_child(i as u32) == Some("body")
                || matches!(child.kind(), "do_group" | "compound_statement");
            if body {
                self.stmt(child, src, ctx, nd);
            } else {
                self.arith_quoted(child);
                self.nested(child, src, ctx, nd);
            }
        }
    }

    /// `case`: the subject and patterns are words, the items statements.
    pub(crate) fn case_statement(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if child.kind() == "case_item" {
                let mut items = child.walk();
                for (i, part) in child.children(&mut items).enumerate() {
                    if !part.is_named() || part.kind() == "comment" {
                        continue;
                    }
                    if child.field_name_for_child(i as u32) == Some("value") {
                        self.word(part, src, ctx, nd);
                    } else {
                        self.stmt(part, src, ctx, nd);
                    }
                }
            } else if child.kind() != "comment" {
                self.word(child, src, ctx, nd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::analyze;

    #[test]
    fn functions_know_their_name() {
        let a = analyze("deploy() { rsync -a . host:; deploy; }");
        assert!(
            a.segments
                .iter()
                .all(|s| s.function.as_deref() == Some("deploy"))
        );
        assert_eq!(a.segments.len(), 2);
    }

    #[test]
    fn group_redirections_reach_every_command() {
        let a = analyze("{ echo a; echo b; } > out.txt");
        assert_eq!(a.segments.len(), 2);
        assert!(a.segments.iter().all(|s| s.writes_files()));
    }

    #[test]
    fn here_document_continuations_are_walked() {
        let a = analyze("cat <<EOF | sh\nls\nEOF");
        let sh = a
            .segments
            .iter()
            .find(|s| s.program() == Some("sh"))
            .expect("sh segment");
        assert_eq!(sh.pipeline.map(|p| p.index), Some(1));
        assert!(a.unknown.is_some(), "sh reads the pipe");
    }

    #[test]
    fn loops_and_case_walk_words_and_bodies() {
        let a = analyze(
            "for f in $(ls); do cat \"$f\"; done; for ((i=0; i<$(nproc); i++)); do :; done; \
             case $(uname) in Linux) echo l;; *) echo o;; esac",
        );
        let programs: Vec<_> = a.segments.iter().filter_map(|s| s.program()).collect();
        for p in ["ls", "cat", "nproc", ":", "uname", "echo"] {
            assert!(programs.contains(&p), "{p} missing from {programs:?}");
        }
    }
}

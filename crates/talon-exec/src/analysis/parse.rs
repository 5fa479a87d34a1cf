//! The walk over tree-sitter-bash's tree that collects [`Segment`]s.
//!
//! Every construct the walker does not know makes the analysis unknown rather than being
//! skipped: a construct it cannot see into is one it cannot vouch for.

use std::cell::RefCell;
use std::ops::Range;

use tree_sitter::{Node, Parser, Tree};

use super::walk::{continuation_splits_word, error_snippet, has_subst_syntax, zsh_only};
use super::words::node_text;
use super::{
    Analysis, Assignment, MAX_SCRIPT_BYTES, MAX_SCRIPT_DEPTH, MAX_SEGMENTS, PipePosition, Redirect,
    RedirectKind, Segment, SegmentKind, Wrapper, render,
};

/// Deeper syntax trees than this are unknown (and the walk does not recurse further).
pub(crate) const MAX_NODE_DEPTH: usize = 200;

/// Node kinds that are words (arguments, names, values).
pub(crate) const WORD_KINDS: &[&str] = &[
    "word",
    "string",
    "raw_string",
    "ansi_c_string",
    "translated_string",
    "concatenation",
    "number",
    "simple_expansion",
    "expansion",
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
    "brace_expression",
    "extglob_pattern",
    "regex",
    "variable_name",
    "command_name",
    "array",
];

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// A word of a command being built.
#[derive(Debug, Clone)]
pub(crate) struct Word {
    pub text: String,
    pub literal: bool,
    /// Dynamic and unquoted: word splitting or globbing may turn it into several words.
    pub split: bool,
    /// Dynamic only because `xargs -I`/`find -exec` substitute text into it: `text` is its
    /// literal value with the placeholders.
    pub placeholder: bool,
    /// The segments its substitutions produced.
    pub subs: Range<usize>,
}

impl Word {
    pub(crate) fn literal(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            literal: true,
            split: false,
            placeholder: false,
            subs: 0..0,
        }
    }

    pub(crate) fn dynamic(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            literal: false,
            split: true,
            placeholder: false,
            subs: 0..0,
        }
    }
}

/// A simple command before its wrappers are resolved.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub words: Vec<Word>,
    pub assignments: Vec<Assignment>,
    pub redirects: Vec<Redirect>,
    pub text: String,
    pub chain: Vec<Wrapper>,
    pub kind: SegmentKind,
}

/// What surrounds the node being walked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ctx {
    /// Nested scripts entered (`sh -c`, `eval`, here-documents fed to a shell).
    pub depth: usize,
    pub pipe: Option<PipePosition>,
    pub function: Option<String>,
    pub chain: Vec<Wrapper>,
    /// Redirections of enclosing groups and wrappers.
    pub redirects: Vec<Redirect>,
    /// Assignments of enclosing wrappers.
    pub assignments: Vec<Assignment>,
    /// The script is for zsh, whose expansions bash's grammar does not know.
    pub zsh: bool,
}

/// Collects segments and reasons for unknown.
pub(crate) struct Walker {
    pub(crate) parser: Option<Parser>,
    pub(crate) segments: Vec<Segment>,
    pub(crate) reasons: Vec<String>,
    pub(crate) transforms: Vec<String>,
    /// Something evaluates values again: arithmetic (which expands array subscripts in
    /// variable values), indirection (`${!x}`), a substring offset, a nameref.
    pub(crate) arith: bool,
    /// Some literal text holds command-substitution syntax.
    pub(crate) subst_text: bool,
    pub(crate) next_pipe: usize,
    pub(crate) full: bool,
}

pub(crate) fn analyze(script: &str) -> Analysis {
    let parser = PARSER.with(|cell| cell.borrow_mut().take());
    let mut walker = Walker {
        parser: parser.or_else(new_parser),
        segments: Vec::new(),
        reasons: Vec::new(),
        transforms: Vec::new(),
        arith: false,
        subst_text: false,
        next_pipe: 0,
        full: false,
    };
    let normalized = walker.top(script);
    if let Some(why) = super::patterns_runtime::runs_written_script(&walker.segments) {
        walker.unknown(why);
    }
    if walker.arith && walker.subst_text {
        walker.unknown(
            "arithmetic evaluation together with text that holds command-substitution syntax \
             (bash expands array subscripts in arithmetic, which can run commands)",
        );
    }
    let Walker {
        parser,
        segments,
        reasons,
        transforms,
        ..
    } = walker;
    if let Some(parser) = parser {
        PARSER.with(|cell| *cell.borrow_mut() = Some(parser));
    }
    let unknown = (!reasons.is_empty()).then(|| {
        let mut shown: Vec<&str> = reasons.iter().take(3).map(String::as_str).collect();
        if reasons.len() > 3 {
            shown.push("…");
        }
        shown.join("; ")
    });
    Analysis {
        segments,
        unknown,
        normalized,
        transforms,
    }
}

fn new_parser() -> Option<Parser> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    Some(parser)
}

impl Walker {
    pub(crate) fn unknown(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    pub(crate) fn parse(&mut self, src: &str) -> Option<Tree> {
        if src.len() > MAX_SCRIPT_BYTES {
            self.unknown(format!(
                "the script is longer than {MAX_SCRIPT_BYTES} bytes"
            ));
            return None;
        }
        if src.contains('\0') {
            self.unknown("the script contains a NUL byte");
            return None;
        }
        let Some(parser) = self.parser.as_mut() else {
            self.unknown("the shell parser is unavailable");
            return None;
        };
        let tree = parser.parse(src, None);
        if tree.is_none() {
            self.unknown("the shell parser gave no result");
        }
        tree
    }

    /// The top-level script: walks it and returns its normalised text.
    pub(crate) fn top(&mut self, src: &str) -> String {
        let Some(tree) = self.parse(src) else {
            return src.split_whitespace().collect::<Vec<_>>().join(" ");
        };
        let root = tree.root_node();
        let normalized = render::render(root, src);
        self.walk_root(root, src, &Ctx::default());
        normalized
    }

    /// A nested script (`sh -c`, `eval`, a here-document fed to a shell).
    pub(crate) fn script(&mut self, src: &str, ctx: &Ctx) {
        if ctx.depth > MAX_SCRIPT_DEPTH {
            self.unknown(format!(
                "scripts are nested more than {MAX_SCRIPT_DEPTH} deep"
            ));
            return;
        }
        if ctx.zsh && zsh_only(src) {
            self.unknown("the zsh script uses zsh-only expansions");
        }
        if let Some(tree) = self.parse(src) {
            self.walk_root(tree.root_node(), src, ctx);
        }
    }

    pub(crate) fn walk_root(&mut self, root: Node<'_>, src: &str, ctx: &Ctx) {
        if root.has_error() {
            self.unknown(format!(
                "the shell parser could not parse `{}`",
                error_snippet(root, src)
            ));
        }
        if let Some(gap) = render::skipped_text(root, src) {
            self.unknown(format!("the shell parser skipped `{gap}`"));
        }
        if continuation_splits_word(root, src) {
            self.unknown("a backslash-newline joins two words into one");
        }
        self.stmt(root, src, ctx, 0);
    }

    /// Adds a segment, unless the limit is reached.
    pub(crate) fn push(&mut self, segment: Segment) {
        if self.segments.len() >= MAX_SEGMENTS {
            self.full = true;
            self.unknown(format!("the script has more than {MAX_SEGMENTS} commands"));
            return;
        }
        self.segments.push(segment);
    }

    /// Turns a resolved command into a segment.
    pub(crate) fn push_pending(&mut self, p: Pending, ctx: &Ctx) {
        self.note_stored_text(&p);
        self.note_evaluated_words(&p);
        let mut assignments = ctx.assignments.clone();
        assignments.extend(p.assignments);
        let mut redirects = p.redirects;
        redirects.extend(ctx.redirects.iter().cloned());
        let segment = Segment {
            dynamic: p.words.iter().map(|w| !w.literal).collect(),
            argv: p.words.into_iter().map(|w| w.text).collect(),
            assignments,
            wrappers: p.chain,
            redirects,
            text: p.text,
            kind: p.kind,
            pipeline: ctx.pipe,
            function: ctx.function.clone(),
            feeds_shell: false,
        };
        self.push(segment);
    }

    /// Builtins that store literal text in variables (`read x <<< '…'`, `printf -v x '…'`,
    /// `declare x='…'`): text with `$(…)` stored this way is an arithmetic-injection payload.
    fn note_stored_text(&mut self, p: &Pending) {
        let Some(program) = p.words.first().map(|w| w.text.as_str()) else {
            return;
        };
        let stores = matches!(
            program,
            "read"
                | "mapfile"
                | "readarray"
                | "printf"
                | "let"
                | "declare"
                | "typeset"
                | "local"
                | "export"
                | "readonly"
        );
        if !stores {
            return;
        }
        let in_args = p
            .words
            .iter()
            .skip(1)
            .any(|w| w.literal && has_subst_syntax(&w.text));
        let on_stdin = p.redirects.iter().any(|r| {
            matches!(r.kind, RedirectKind::HereDoc | RedirectKind::HereString)
                && !r.dynamic
                && has_subst_syntax(&r.target)
        });
        self.subst_text |= in_args || on_stdin;
    }

    /// Marks the segments whose output becomes a script.
    pub(crate) fn mark_feeds_shell(&mut self, range: Range<usize>) {
        for segment in self.segments.get_mut(range).into_iter().flatten() {
            segment.feeds_shell = true;
        }
    }

    pub(crate) fn stmt(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        if self.full {
            return;
        }
        if nd > MAX_NODE_DEPTH {
            self.unknown("the script is nested too deeply");
            return;
        }
        let nd = nd + 1;
        match node.kind() {
            "comment" => {}
            "program" | "list" | "do_group" | "else_clause" | "elif_clause" | "subshell"
            | "negated_command" | "if_statement" | "while_statement" | "ERROR" => {
                self.children(node, src, ctx, nd);
            }
            "compound_statement" => {
                if node.child(0).is_some_and(|c| c.kind() == "((") {
                    self.arithmetic(node, src, ctx, nd);
                } else {
                    self.children(node, src, ctx, nd);
                }
            }
            "pipeline" => {
                let id = self.new_pipe();
                let mut index = 0;
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    if child.kind() == "comment" {
                        continue;
                    }
                    let mut inner = ctx.clone();
                    inner.pipe = Some(PipePosition { id, index });
                    self.stmt(child, src, &inner, nd);
                    index += 1;
                }
            }
            "redirected_statement" => self.redirected(node, src, ctx, nd),
            "command" => self.command(node, src, ctx, nd, Vec::new()),
            "declaration_command" => self.declaration(node, src, ctx, nd),
            "unset_command" => self.unset(node, src, ctx, nd),
            "test_command" => self.test(node, src, ctx, nd),
            "variable_assignment" | "variable_assignments" => {
                let mut assignments = Vec::new();
                if node.kind() == "variable_assignment" {
                    assignments.push(self.assignment(node, src, ctx, nd));
                } else {
                    let mut cursor = node.walk();
                    for child in node.named_children(&mut cursor) {
                        assignments.push(self.assignment(child, src, ctx, nd));
                    }
                }
                let p = Pending {
                    words: Vec::new(),
                    assignments,
                    redirects: Vec::new(),
                    text: node_text(node, src).to_owned(),
                    chain: ctx.chain.clone(),
                    kind: SegmentKind::Assignment,
                };
                self.push_pending(p, ctx);
            }
            "function_definition" => self.function_definition(node, src, ctx, nd),
            "for_statement" => self.for_statement(node, src, ctx, nd),
            "c_style_for_statement" => self.c_style_for(node, src, ctx, nd),
            "case_statement" => self.case_statement(node, src, ctx, nd),
            kind => {
                self.unknown(format!("unsupported shell construct `{kind}`"));
                self.nested(node, src, ctx, nd);
            }
        }
    }

    pub(crate) fn new_pipe(&mut self) -> usize {
        let id = self.next_pipe;
        self.next_pipe += 1;
        id
    }

    pub(crate) fn children(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.stmt(child, src, ctx, nd);
        }
    }

    pub(crate) fn arithmetic(&mut self, node: Node<'_>, src: &str, ctx: &Ctx, nd: usize) {
        self.arith = true;
        self.arith_quoted(node);
        self.nested(node, src, ctx, nd);
    }

    /// Quoted text inside arithmetic can smuggle `a[$(cmd)]` past the parser.
    pub(crate) fn arith_quoted(&mut self, node: Node<'_>) {
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if matches!(n.kind(), "raw_string" | "string" | "ansi_c_string") {
                self.unknown("quoted text inside an arithmetic expression");
                return;
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
    }
}

#[cfg(test)]
mod tests;

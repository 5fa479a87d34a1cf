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
mod tests {
    use super::super::analyze;

    fn argvs(script: &str) -> Vec<Vec<String>> {
        analyze(script)
            .segments
            .into_iter()
            .map(|s| s.argv)
            .collect()
    }

    #[test]
    fn splits_lists_pipelines_and_groups() {
        let a = analyze("git status && npm test | tee out; (cd x; ls) & { pwd; }\necho done");
        assert!(a.unknown.is_none(), "{:?}", a.unknown);
        let programs: Vec<_> = a.segments.iter().filter_map(|s| s.program()).collect();
        assert_eq!(programs, ["git", "npm", "tee", "cd", "ls", "pwd", "echo"]);
        let npm = &a.segments[1];
        let tee = &a.segments[2];
        assert_eq!(npm.pipeline.map(|p| p.index), Some(0));
        assert_eq!(tee.pipeline.map(|p| p.index), Some(1));
    }

    #[test]
    fn substitutions_and_control_flow_are_segments() {
        let got = argvs(
            "echo $(id -u) `whoami` <(ls) ; for f in $(ls); do rm \"$f\"; done; \
             if test -f x; then cat x; else true; fi; case $1 in a) pwd;; esac; \
             while read l; do echo \"$l\"; done < in; f() { date; }; x=$(hostname)",
        );
        let programs: Vec<&str> = got
            .iter()
            .filter_map(|a| a.first().map(String::as_str))
            .collect();
        for p in [
            "id", "whoami", "ls", "echo", "rm", "test", "cat", "true", "pwd", "read", "date",
            "hostname",
        ] {
            assert!(programs.contains(&p), "{p} missing from {programs:?}");
        }
    }

    #[test]
    fn literal_words_are_resolved() {
        let a = analyze(r#"r''m -rf '/' "a b" \rm $'\x72m'"#);
        assert!(a.unknown.is_none());
        assert_eq!(a.segments[0].argv, ["rm", "-rf", "/", "a b", "rm", "rm"]);
        assert!(a.segments[0].dynamic.iter().all(|d| !d));
    }

    #[test]
    fn dynamic_command_names_are_unknown() {
        for script in [
            "$CMD -rf /",
            "cat$IFS/etc/passwd",
            "$(echo rm) -rf /",
            "`echo rm` x",
            "/???/?m -rf /",
            "{rm,-rf,/}",
            "\"$X\"",
            "r\\\nm -rf /",
        ] {
            let a = analyze(script);
            assert!(a.unknown.is_some(), "{script:?} should be unknown");
        }
    }

    #[test]
    fn redirects_are_recorded() {
        let a = analyze("echo hi > out.txt 2>&1; cat < in; sort >> log; echo x >&file");
        let r = &a.segments[0].redirects;
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].target, "out.txt");
        assert!(r[0].writes_file());
        assert!(!r[1].writes_file());
        assert!(!a.segments[1].writes_files());
        assert!(a.segments[2].writes_files());
        assert!(a.segments[3].writes_files());
    }

    #[test]
    fn heredocs_and_continuations() {
        let a = analyze("cat <<'EOF' && rm x\nhello $(id)\nEOF\necho done");
        assert!(a.unknown.is_none(), "{:?}", a.unknown);
        let programs: Vec<_> = a.segments.iter().filter_map(|s| s.program()).collect();
        assert_eq!(programs, ["cat", "rm", "echo"]);
        let body = &a.segments[0].redirects[0];
        assert_eq!(body.target, "hello $(id)\n");
        let b = analyze("cat <<EOF\n$(id)\nEOF");
        assert_eq!(b.segments[0].program(), Some("id"));
    }

    #[test]
    fn arithmetic_injection_is_unknown() {
        assert!(analyze("echo $[ x='a[$(touch F)]', x ]").unknown.is_some());
        assert!(analyze("x='a[$(touch F)]'; echo $((x))").unknown.is_some());
        assert!(analyze("x='a[$(id)]'; [[ $x -eq 1 ]]").unknown.is_some());
        assert!(
            analyze("for ((i=0;i<3;i++)); do echo $i; done")
                .unknown
                .is_none()
        );
        assert!(analyze("echo ${x@P}").unknown.is_some());
        assert!(
            analyze("read x <<< 'a[$(id)]'; echo $((x))")
                .unknown
                .is_some()
        );
        assert!(analyze("arr=('a[$(id)]'); echo $((arr))").unknown.is_some());
        // Data that is only written to a file, or substitutions that run anyway, are fine.
        let notes = "cat > notes <<'EOF'\n$(not run)\nEOF\nn=$(wc -l < notes); echo $((n + 1))";
        assert!(
            analyze(notes).unknown.is_none(),
            "{:?}",
            analyze(notes).unknown
        );
    }

    #[test]
    fn too_many_segments_is_unknown() {
        let script = "true;".repeat(super::MAX_SEGMENTS + 1);
        let a = analyze(&script);
        assert!(a.unknown.is_some());
        assert_eq!(a.segments.len(), super::MAX_SEGMENTS);
    }

    #[test]
    fn assignments_and_declarations() {
        let a = analyze("A=1 B=$(id) make; export LD_PRELOAD=/x.so; X=2; local y");
        assert!(a.unknown.is_none(), "{:?}", a.unknown);
        let make = a
            .segments
            .iter()
            .find(|s| s.program() == Some("make"))
            .expect("make");
        assert_eq!(make.assignments.len(), 2);
        assert!(make.assignments[1].dynamic);
        let export = a
            .segments
            .iter()
            .find(|s| s.program() == Some("export"))
            .expect("export");
        assert_eq!(export.assignments[0].name, "LD_PRELOAD");
        assert!(
            a.segments
                .iter()
                .any(|s| s.kind == super::SegmentKind::Assignment)
        );
        assert!(analyze("export $X").unknown.is_some());
    }

    #[test]
    fn deep_nesting_is_unknown_without_overflowing() {
        for script in [
            format!("{}x{}", "$(".repeat(3000), ")".repeat(3000)),
            format!("{}x{}", "(".repeat(3000), ")".repeat(3000)),
            format!("{}x{}", "{ ".repeat(3000), "; }".repeat(3000)),
            format!("echo {}x{}", "\"$(echo ".repeat(500), ")\"".repeat(500)),
        ] {
            assert!(analyze(&script).unknown.is_some());
        }
    }

    #[test]
    fn text_the_parser_skips_is_unknown() {
        assert!(
            analyze("python3 - <<'EOF'\nprint(1)\nEOF")
                .unknown
                .is_some()
        );
        for fine in [
            "cat <<EOF > out && rm x\nhello $x `id`\nEOF\necho done",
            "echo \"a $b c\" 'd' $'e' ${f:-g} $((1 + 2)) # note",
            "ls \\\n  -la",
            "if true; then :; fi; for i in a b; do echo \"$i\"; done",
        ] {
            let a = analyze(fine);
            assert!(a.unknown.is_none(), "{fine:?}: {:?}", a.unknown);
        }
    }

    #[test]
    fn parse_errors_are_unknown() {
        assert!(analyze("echo 'unterminated").unknown.is_some());
        assert!(analyze("if then fi (").unknown.is_some());
        assert!(analyze("a\0b").unknown.is_some());
    }
}

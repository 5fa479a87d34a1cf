//! Shell command analysis for the `exec` and `Bash` tools.
//!
//! The OS sandbox is the security boundary. Analysis only decides when a person must be asked,
//! and it fails closed: whatever it cannot resolve fully (a parse error, `eval`, a variable in
//! command position, too many commands, nesting too deep) makes the whole command
//! [`Analysis::unknown`], and an unknown command is never allowed without a person.
//!
//! * [`analyze`] parses a script with tree-sitter-bash into [`Segment`]s: one per simple command,
//!   across `; && || | &` and newlines, subshells, groups, substitutions, here-documents and
//!   control structures, seeing through wrappers (`env`, `sh -c`, `timeout`, `xargs`,
//!   `find -exec`, `sudo`, …).
//! * [`deny`] holds GoClaw's deny groups, matched on the analysed segments, not the raw string.
//! * [`rules`] holds Claude Code's `Bash(…)` permission rules and the normalised command that
//!   "allow always" stores.
//! * [`approval`] combines them with GoClaw's approval modes into a [`approval::Decision`].

pub mod approval;
mod control;
pub mod deny;
mod evaluated;
mod longopts;
mod options;
mod parse;
mod patterns;
mod patterns_misc;
mod patterns_runtime;
mod render;
pub mod rules;
mod special;
pub mod template;
mod walk;
mod words;
mod wrappers;

pub use approval::{ApprovalContext, Ask, Decision, ExecApprovalConfig, Security, decide};
pub use deny::{DenyConfigError, DenyGroups, DenyHit};
pub use rules::{Rule, RuleError, RuleSet, RuleVerdict, always_allow_key, normalise};
pub use words::{basename, shell_quote};

/// At most this many segments; a longer script is unknown, so a flood of commands can never
/// turn a refusal into an approval or hide a command past the limit (deny hits before the limit
/// still refuse). A realistic 10 KiB script has about 300.
pub const MAX_SEGMENTS: usize = 512;
/// At most this many nested scripts (`sh -c "sh -c '…'"`, `eval`, here-documents fed to a shell).
pub const MAX_SCRIPT_DEPTH: usize = 8;
/// At most this many wrappers around one command (`env nice timeout sudo …`).
pub const MAX_WRAPPERS: usize = 8;
/// Scripts longer than this are not parsed.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;

/// What a script does, as far as it can be known before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Every simple command found, in the order the shell would meet them (a command
    /// substitution's commands come before the command using its output).
    pub segments: Vec<Segment>,
    /// Why the script cannot be fully resolved; `None` when it can. Segments found before or
    /// besides the unresolved part are still listed, so deny groups can refuse them.
    pub unknown: Option<String>,
    /// The whole script written canonically (quoting, whitespace, separators and comments
    /// normalised): what "allow always" stores and compares.
    pub normalized: String,
    /// Parameter transformations (`${x@P}` …) seen anywhere: they evaluate text as a prompt or
    /// as code and are refused by the `filter_bypass` group.
    pub transforms: Vec<String>,
}

impl Analysis {
    /// True when some part could not be resolved.
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }
}

/// One simple command, after wrappers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segment {
    /// The effective command and its arguments after unwrapping. Literal words hold their
    /// value (quotes removed); dynamic words hold their source text.
    pub argv: Vec<String>,
    /// Per word of `argv`: true when it expands at run time (a variable, a substitution, a
    /// glob), so its value is not known.
    pub dynamic: Vec<bool>,
    /// Variable assignments that reach the command: prefix assignments (`A=1 cmd`), `env`
    /// assignments, assignments of an enclosing wrapper, or the assignments of a bare
    /// assignment or declaration.
    pub assignments: Vec<Assignment>,
    /// The wrappers seen through, outermost first.
    pub wrappers: Vec<Wrapper>,
    /// Redirections that apply to the command (its own and those of enclosing groups).
    pub redirects: Vec<Redirect>,
    /// The source text of the command as written (for nested scripts, the nested source).
    pub text: String,
    /// What kind of command it is.
    pub kind: SegmentKind,
    /// Where it sits in a pipeline.
    pub pipeline: Option<PipePosition>,
    /// The function whose body holds it.
    pub function: Option<String>,
    /// Its output becomes the script of a shell or `eval` (`sh -c "$(curl …)"`).
    pub feeds_shell: bool,
}

impl Segment {
    /// The program's base name (`/usr/bin/rm` → `rm`), if the segment runs one.
    pub fn program(&self) -> Option<&str> {
        self.argv.first().map(|p| basename(p))
    }

    /// The arguments after the program.
    pub fn args(&self) -> &[String] {
        self.argv.get(1..).unwrap_or(&[])
    }

    /// True when the word at `index` is dynamic.
    pub fn is_dynamic(&self, index: usize) -> bool {
        self.dynamic.get(index).copied().unwrap_or(false)
    }

    /// True when a privileged wrapper (`sudo`, `doas`, `su`, …) runs it.
    pub fn is_privileged(&self) -> bool {
        self.wrappers.iter().any(|w| w.privileged)
    }

    /// True when a redirection writes to a file (not `/dev/null` or a standard stream).
    pub fn writes_files(&self) -> bool {
        self.redirects.iter().any(Redirect::writes_file)
    }

    /// The effective argv as canonical shell words (dynamic words keep their source text).
    pub fn command_line(&self) -> String {
        join_words(&self.argv, &self.dynamic)
    }
}

/// Writes words as a command line: literal words quoted canonically, dynamic ones as written.
pub(crate) fn join_words(argv: &[String], dynamic: &[bool]) -> String {
    let mut out = String::new();
    for (i, word) in argv.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if dynamic.get(i).copied().unwrap_or(false) {
            out.push_str(word);
        } else {
            out.push_str(&shell_quote(word));
        }
    }
    out
}

/// What kind of command a segment is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SegmentKind {
    /// A program, builtin or function call.
    #[default]
    Command,
    /// Only variable assignments (`A=1`); `argv` is empty.
    Assignment,
    /// A test (`[[ … ]]`, `[ … ]`): evaluates, runs nothing.
    Test,
}

/// `NAME=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The variable (with its subscript, if any).
    pub name: String,
    /// The value when literal, else its source text.
    pub value: String,
    /// The value expands at run time.
    pub dynamic: bool,
}

/// A wrapper seen through (`timeout 10`, `env -i`, `sh -c`, `sudo -u root`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapper {
    /// The wrapper's base name.
    pub name: String,
    /// The wrapper's own words (its name and options), as written after quote removal.
    pub argv: Vec<String>,
    /// It changes who runs the command (`sudo`, `doas`, `su`, `pkexec`, `runuser`).
    pub privileged: bool,
}

/// A redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The file descriptor written before the operator, if any.
    pub fd: Option<u32>,
    /// The operator (`>`, `>>`, `<`, `&>`, `2>&1`'s `>&`, `<<`, `<<<` …).
    pub op: String,
    /// The file, descriptor or here-document text (literal value, or source text when dynamic).
    pub target: String,
    /// The target expands at run time.
    pub dynamic: bool,
    /// What the redirection does.
    pub kind: RedirectKind,
}

impl Redirect {
    /// True when it writes to a file other than `/dev/null` or a standard stream.
    pub fn writes_file(&self) -> bool {
        matches!(
            self.kind,
            RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
        ) && (self.dynamic
            || !matches!(
                self.target.as_str(),
                "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/fd/1" | "/dev/fd/2"
            ))
    }
}

/// What a redirection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`
    Read,
    /// `>`, `>|`, `&>`, `>&file`
    Write,
    /// `>>`, `&>>`
    Append,
    /// `<>`
    ReadWrite,
    /// `2>&1`, `<&3`, `>&-`
    Duplicate,
    /// `<<` and `<<-`: `target` is the body.
    HereDoc,
    /// `<<<`: `target` is the string.
    HereString,
}

/// A segment's place in a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipePosition {
    /// Which pipeline (unique within one analysis).
    pub id: usize,
    /// 0 for the first command; a command with index > 0 reads the previous one's output.
    pub index: usize,
}

/// Analyses `script`. Never fails: what cannot be resolved is reported in
/// [`Analysis::unknown`].
pub fn analyze(script: &str) -> Analysis {
    parse::analyze(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_writes_ignore_null_and_streams() {
        let mut r = Redirect {
            fd: Some(2),
            op: ">".into(),
            target: "/dev/null".into(),
            dynamic: false,
            kind: RedirectKind::Write,
        };
        assert!(!r.writes_file());
        r.target = "out.txt".into();
        assert!(r.writes_file());
        r.kind = RedirectKind::Duplicate;
        assert!(!r.writes_file());
    }

    #[test]
    fn command_line_quotes_literals_only() {
        let seg = Segment {
            argv: vec!["echo".into(), "a b".into(), "$HOME".into()],
            dynamic: vec![false, false, true],
            ..Segment::default()
        };
        assert_eq!(seg.command_line(), "echo 'a b' $HOME");
        assert_eq!(seg.program(), Some("echo"));
        assert_eq!(seg.args().len(), 2);
    }
}

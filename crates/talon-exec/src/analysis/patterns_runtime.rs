//! Deny-group checks for what a command decides at run time: arguments another program
//! supplies (`xargs`, `find -exec`), `find`'s own deleting action, a process environment file
//! named through a glob or `..`, and a script file that the same command line writes and then
//! runs.
//!
//! These close cheap evasions of the deny groups; they do not make the groups a boundary (see
//! docs/SANDBOX.md, "What command analysis cannot promise").

use std::sync::LazyLock;

use regex::Regex;

use super::patterns::{View, is_match, is_python, is_shell, re};
use super::{RedirectKind, Segment};

/// Programs a deny group judges by their options, with the group that refuses them. Run by
/// `xargs`, their arguments come from standard input (`echo -rf ./x | xargs rm` is
/// `rm -rf ./x`), so the command is judged as the worst it can be. (`sed` and `chmod`, which
/// `xargs` commonly runs on file lists, are left to their ordinary checks.)
const OPTION_JUDGED: &[(&str, &str)] = &[
    ("rm", "destructive_ops"),
    ("shred", "destructive_ops"),
    ("dd", "destructive_ops"),
    ("find", "destructive_ops"),
    ("chown", "dangerous_paths"),
    ("chgrp", "dangerous_paths"),
    ("kill", "process_control"),
    ("curl", "data_exfiltration"),
    ("wget", "data_exfiltration"),
    ("sort", "filter_bypass"),
    ("rg", "filter_bypass"),
    ("man", "filter_bypass"),
];

/// Programs that delete what they are given, whatever their options: run by `find -exec` on
/// every file found, they delete a tree.
const DELETERS: &[&str] = &["rm", "shred", "unlink", "rmdir"];

/// Where a process environment can be read (`/proc/<pid>/environ` and its task entries).
static PROC_ENVIRON: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(^|/)proc/[^/]+/(task/[^/]+/)?environ$"));
const ENVIRON_SAMPLES: &[&str] = &[
    "/proc/self/environ",
    "/proc/1/environ",
    "/proc/thread-self/environ",
    "/proc/self/task/1/environ",
];

/// Checks one segment for run-time arguments, `find` actions and environment files.
pub(crate) fn segment(v: &mut View<'_>) {
    let runner = v
        .seg
        .wrappers
        .iter()
        .rev()
        .find(|w| matches!(w.name.as_str(), "xargs" | "find"))
        .map(|w| w.name.clone());
    match runner.as_deref() {
        Some("xargs") => {
            if let Some((_, group)) = OPTION_JUDGED.iter().find(|(p, _)| *p == v.prog) {
                v.hit(
                    group,
                    r"\bxargs\b",
                    format!(
                        "`{}` with arguments `xargs` reads at run time (they can be any options)",
                        v.prog
                    ),
                );
            }
        }
        Some("find") if v.is(DELETERS) => {
            v.hit(
                "destructive_ops",
                r"\bfind\b.*-exec(dir)?\s+rm\b",
                format!("`{}` on every file `find` finds", v.prog),
            );
        }
        _ => {}
    }
    if v.is(&["find"]) && v.any_arg(|a| a == "-delete") {
        v.hit(
            "destructive_ops",
            r"\bfind\b.*-delete\b",
            "`find -delete`, which deletes every file it finds",
        );
    }
    if v.any_word(names_environ) {
        v.hit(
            "env_dump",
            r"/proc/[^/]+/environ",
            "a process environment file",
        );
    }
}

/// True when `word` (a literal path, or the source text of a dynamic one) may name a process
/// environment file: after `.`/`..` are resolved, or through glob characters.
pub(crate) fn names_environ(word: &str) -> bool {
    // Here-document bodies and long text are not paths.
    if word.len() > 1024 || word.contains('\n') || !word.contains('/') && !word.contains("environ")
    {
        return false;
    }
    if !word.contains("proc") && !word.contains(['*', '?', '[']) {
        return false;
    }
    let path = normalise(&word.replace(['\'', '"'], ""));
    if is_match(&PROC_ENVIRON, &path) {
        return true;
    }
    if !path.contains(['*', '?', '[']) {
        return false;
    }
    // A relative glob is compared without its leading `..` (the depth is not known).
    let absolute = path.starts_with('/');
    let text = if absolute {
        path.as_str()
    } else {
        path.trim_start_matches("../")
    };
    let Some(pattern) = glob(text, absolute) else {
        return false;
    };
    ENVIRON_SAMPLES.iter().any(|s| {
        let sample = if absolute {
            s
        } else {
            s.trim_start_matches('/')
        };
        glob_match(&pattern, &sample.chars().collect::<Vec<_>>())
    })
}

/// Resolves `.`, `..` and repeated slashes in a path, as text.
fn normalise(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// One element of a glob.
#[derive(Clone, Copy)]
enum Glob {
    Char(char),
    /// `?` or a bracket expression: one character of a path component.
    One,
    /// `*`: any run within a path component.
    Star,
    /// `**` in an absolute glob (`globstar`): any run, across components.
    Any,
}

/// A glob as the shell matches it against paths (a bracket expression matches any character).
/// `None` when it holds an expansion.
fn glob(text: &str, absolute: bool) -> Option<Vec<Glob>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(match c {
            '*' if absolute && chars.peek() == Some(&'*') => {
                chars.next();
                Glob::Any
            }
            '*' => Glob::Star,
            '?' => Glob::One,
            '[' => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                Glob::One
            }
            '$' => return None,
            '\\' => Glob::Char(chars.next()?),
            c => Glob::Char(c),
        });
    }
    Some(out)
}

/// Whether `pattern` matches all of `text` (backtracking; both are short paths).
fn glob_match(pattern: &[Glob], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((Glob::Char(c), rest)) => {
            text.first() == Some(c) && glob_match(rest, text.get(1..).unwrap_or(&[]))
        }
        Some((Glob::One, rest)) => {
            text.first().is_some_and(|t| *t != '/')
                && glob_match(rest, text.get(1..).unwrap_or(&[]))
        }
        Some((Glob::Star | Glob::Any, rest)) => {
            let crosses = matches!(pattern.first(), Some(Glob::Any));
            for skip in 0..=text.len() {
                if glob_match(rest, text.get(skip..).unwrap_or(&[])) {
                    return true;
                }
                if !crosses && text.get(skip) == Some(&'/') {
                    break;
                }
            }
            false
        }
    }
}

/// A script file that the same command line writes and then runs (`printf 'rm -rf x' > s.sh;
/// sh s.sh`): its commands are not in the analysis. Returns why, for [`super::Analysis`]'s
/// unknown.
pub(crate) fn runs_written_script(segments: &[Segment]) -> Option<String> {
    let mut written: Vec<String> = Vec::new();
    for seg in segments {
        written.extend(writes(seg).into_iter().map(|p| normalise(&p)));
        if written.is_empty() {
            continue;
        }
        for script in runs(seg) {
            let script = normalise(&script);
            if written.contains(&script) {
                return Some(format!(
                    "`{}` runs `{script}`, which the same command writes",
                    seg.program().unwrap_or("")
                ));
            }
        }
    }
    None
}

/// The files a segment writes, as far as known.
fn writes(seg: &Segment) -> Vec<String> {
    let mut out: Vec<String> = seg
        .redirects
        .iter()
        .filter(|r| {
            !r.dynamic
                && matches!(
                    r.kind,
                    RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
                )
        })
        .map(|r| r.target.clone())
        .collect();
    let operands: Vec<&String> = seg
        .args()
        .iter()
        .enumerate()
        .filter(|(i, a)| !seg.is_dynamic(i + 1) && !a.starts_with('-'))
        .map(|(_, a)| a)
        .collect();
    match seg.program().unwrap_or("") {
        "tee" | "touch" | "truncate" => out.extend(operands.into_iter().cloned()),
        // These edit their operands only in place (`-i`, `-i.bak`, `-pi`, `--in-place`);
        // otherwise an operand is a file they read (`perl get.pl` runs it, writes nothing).
        "sed" | "gsed" | "perl" if edits_in_place(seg.args()) => {
            out.extend(operands.into_iter().cloned())
        }
        "cp" | "mv" | "install" | "ln" | "rsync" => {
            out.extend(operands.last().map(|s| (*s).clone()))
        }
        "dd" => out.extend(
            seg.args()
                .iter()
                .filter_map(|a| a.strip_prefix("of=").map(str::to_owned)),
        ),
        _ => {}
    }
    out
}

/// Whether `sed`/`perl` arguments ask for an in-place edit (`-i`, `-i.bak`, a cluster holding
/// `i` such as `-pi`, `--in-place`).
fn edits_in_place(args: &[String]) -> bool {
    args.iter().any(|a| {
        a.starts_with("--in-place")
            || a.strip_prefix('-')
                .filter(|rest| !rest.starts_with('-'))
                .is_some_and(|cluster| cluster.split('.').next().is_some_and(|c| c.contains('i')))
    })
}

/// The script files a segment runs: a shell's or interpreter's script operand, a sourced file,
/// the program itself, or a shell's standard input.
fn runs(seg: &Segment) -> Vec<String> {
    let mut out = Vec::new();
    // A bare program name is looked up in `PATH`; `./s.sh` is a file.
    if let Some(program) = seg.argv.first().filter(|p| p.contains('/')) {
        out.push(program.clone());
    }
    let prog = seg.program().unwrap_or("");
    let interpreter = is_shell(prog)
        || is_python(prog)
        || matches!(
            prog,
            "." | "source" | "node" | "nodejs" | "deno" | "bun" | "perl" | "ruby" | "php" | "lua"
        );
    if interpreter {
        out.extend(
            seg.args()
                .iter()
                .enumerate()
                .filter(|(i, a)| !seg.is_dynamic(i + 1) && !a.starts_with(['-', '+']))
                .map(|(_, a)| a.clone()),
        );
        out.extend(
            seg.redirects
                .iter()
                .filter(|r| r.kind == RedirectKind::Read && !r.dynamic)
                .map(|r| r.target.clone()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::analyze;
    use super::*;

    #[test]
    fn environ_through_globs_and_dots() {
        for word in [
            "/proc/self/environ",
            "/proc/self/env*",
            "/proc/*/environ",
            "/pr?c/self/e[n]viron",
            "/proc/self/../self/environ",
            "/proc//self/./environ",
            "../../proc/1/environ",
            "/proc/self/task/*/environ",
        ] {
            assert!(names_environ(word), "{word}");
        }
        assert!(names_environ("/**/environ"));
        assert!(names_environ("../../pr?c/self/environ"));
        for word in [
            "/proc/cpuinfo",
            "src/*.rs",
            "environment.md",
            "/proc/self/status",
            "/*",
            "/p*",
            "**",
            "/proc/*/status",
        ] {
            assert!(!names_environ(word), "{word}");
        }
    }

    #[test]
    fn written_then_run_scripts() {
        for script in [
            "printf 'rm -rf x' > s.sh; sh s.sh",
            "echo 'rm -rf x' > ./s.sh && bash ./s.sh",
            "cat > s.sh <<'EOF'\nrm -rf x\nEOF\n. s.sh",
            "echo x | tee run.sh; source run.sh",
            "echo x > s.sh; chmod +x s.sh; ./s.sh",
            "echo x > s.py; python3 s.py",
            "cp /tmp/a s.sh; sh < s.sh",
        ] {
            let a = analyze(script);
            assert!(runs_written_script(&a.segments).is_some(), "{script:?}");
        }
        for script in [
            "sh build.sh > log.txt",
            "echo x > out.txt; sh run.sh; cat out.txt",
        ] {
            let a = analyze(script);
            assert!(runs_written_script(&a.segments).is_none(), "{script:?}");
        }
    }
}

//! Seeing through wrappers: `env`, `sh -c`, `timeout`, `nice`, `xargs`, `find -exec`, `sudo`…
//!
//! A wrapper is recognised by its bare name or its path in a system directory (`/usr/bin/env`);
//! `./env` is someone's program, not a wrapper. Options are parsed exactly as far as this file
//! knows them: an option it does not know, or one computed at run time, makes the command
//! unknown rather than guessing where the wrapped command starts.

use super::options::classify;
use super::parse::{Ctx, Pending, Walker, Word};
use super::words::basename;
use super::{Assignment, MAX_WRAPPERS, Redirect, RedirectKind, SegmentKind, Wrapper};

/// Shells whose `-c` script (or standard input) is parsed with the bash grammar.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ash", "ksh", "mksh", "pdksh", "posh", "yash", "zsh", "rbash", "lksh",
    "ksh93",
];

/// Shells whose language this analyser does not parse.
pub(crate) const FOREIGN_SHELLS: &[&str] = &[
    "fish",
    "csh",
    "tcsh",
    "nu",
    "elvish",
    "xonsh",
    "pwsh",
    "powershell",
    "pwsh.exe",
    "powershell.exe",
    "cmd",
    "cmd.exe",
    "rc",
    "es",
];

/// A wrapper by path is trusted only from these directories.
const SYSTEM_DIRS: &[&str] = &[
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
    "/usr/local/sbin/",
    "/opt/homebrew/bin/",
    "/run/current-system/sw/bin/",
];

fn wrapper_name(text: &str) -> Option<&str> {
    if !text.contains('/') {
        return Some(text);
    }
    let base = basename(text);
    SYSTEM_DIRS
        .iter()
        .any(|dir| text.strip_prefix(dir) == Some(base))
        .then_some(base)
}

/// What a command's first word makes of it.
pub(crate) enum Step {
    /// Not a wrapper (or a wrapper with nothing to run): the segment is final.
    Done,
    /// Not resolvable.
    Unknown(String),
    /// A wrapper: its own words, what it runs, what it adds.
    Wrap {
        wrapper: Vec<String>,
        rest: Vec<Word>,
        assignments: Vec<Assignment>,
        privileged: bool,
    },
    /// The wrapper runs a script given as a word (`sh -c`, `su -c`, `watch`).
    Script {
        wrapper: Vec<String>,
        script: Word,
        zsh: bool,
        privileged: bool,
    },
    /// A shell reading its script from standard input.
    Stdin { wrapper: Vec<String>, zsh: bool },
    /// `eval`: unknown, but literal text is still analysed for deny groups.
    Eval,
    /// `trap ACTION SIGNAL…`: the action is a script run later.
    Trap(Word),
    /// `find … -exec cmd … ;`
    Find,
}

/// Resolves `p`'s wrappers and pushes the resulting segments.
pub(crate) fn resolve(w: &mut Walker, mut p: Pending, ctx: &Ctx) {
    loop {
        let Some(head) = p.words.first() else {
            w.push_pending(p, ctx);
            return;
        };
        if !head.literal {
            w.unknown(format!(
                "the command name `{}` is only known at run time",
                head.text
            ));
            let subs = head.subs.clone();
            w.mark_feeds_shell(subs);
            return;
        }
        if matches!(head.text.as_str(), "{" | "}" | "(" | ")" | "((" | "[[") {
            // A reserved word as a command name means the grammar read a compound command
            // (`coproc { …; }`) as a simple one.
            w.unknown(format!("`{}` where a command name should be", head.text));
            w.push_pending(p, ctx);
            return;
        }
        if p.chain.len().saturating_sub(ctx.chain.len()) >= MAX_WRAPPERS {
            w.unknown(format!("more than {MAX_WRAPPERS} nested wrappers"));
            w.push_pending(p, ctx);
            return;
        }
        if p.kind != SegmentKind::Command {
            w.push_pending(p, ctx);
            return;
        }
        let Some(name) = wrapper_name(&head.text).map(str::to_owned) else {
            // `./env`, `/tmp/sh`, `/usr/bin/../bin/sh`: maybe a copy of the wrapper, maybe not.
            let base = basename(&head.text);
            if !matches!(classify(base, &p.words), Step::Done) {
                w.unknown(format!(
                    "`{}` is named like `{base}` but is not the system one",
                    head.text
                ));
            }
            w.push_pending(p, ctx);
            return;
        };
        match classify(&name, &p.words) {
            Step::Done => {
                w.push_pending(p, ctx);
                return;
            }
            Step::Unknown(reason) => {
                w.unknown(reason);
                w.push_pending(p, ctx);
                return;
            }
            Step::Wrap {
                wrapper,
                rest,
                assignments,
                privileged,
            } => {
                p.chain.push(Wrapper {
                    name,
                    argv: wrapper,
                    privileged,
                });
                p.assignments.extend(assignments);
                p.words = rest;
            }
            Step::Script {
                wrapper,
                script,
                zsh,
                privileged,
            } => {
                p.chain.push(Wrapper {
                    name: name.clone(),
                    argv: wrapper,
                    privileged,
                });
                if script.literal {
                    let inner = inner_ctx(ctx, &p, zsh);
                    w.script(&script.text, &inner);
                } else if script.placeholder {
                    // `xargs -I{} sh -c 'rm {}'`: text from standard input becomes code. Unknown,
                    // but the script around the placeholder is still analysed for deny groups.
                    w.unknown(format!(
                        "`{name}` runs a script with text substituted at run time"
                    ));
                    let inner = inner_ctx(ctx, &p, zsh);
                    w.script(&script.text, &inner);
                } else {
                    w.unknown(format!("`{name}` runs a script only known at run time"));
                    w.mark_feeds_shell(script.subs.clone());
                    w.push_pending(p, ctx);
                }
                return;
            }
            Step::Stdin { wrapper, zsh } => {
                stdin_script(w, p, ctx, name, wrapper, zsh);
                return;
            }
            Step::Eval => {
                w.unknown("`eval` runs text as a command");
                let args = p.words.get(1..).unwrap_or(&[]);
                if args.iter().all(|a| a.literal) {
                    let text: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
                    let mut inner = inner_ctx(ctx, &p, false);
                    inner.chain.push(Wrapper {
                        name: "eval".into(),
                        argv: vec!["eval".into()],
                        privileged: false,
                    });
                    w.script(&text.join(" "), &inner);
                } else {
                    for arg in args {
                        w.mark_feeds_shell(arg.subs.clone());
                    }
                }
                w.push_pending(p, ctx);
                return;
            }
            Step::Trap(action) => {
                let inner = inner_ctx(ctx, &p, false);
                w.push_pending(p, ctx);
                w.script(&action.text, &inner);
                return;
            }
            Step::Find => {
                find(w, p, ctx);
                return;
            }
        }
    }
}

fn inner_ctx(ctx: &Ctx, p: &Pending, zsh: bool) -> Ctx {
    let mut inner = ctx.clone();
    inner.depth += 1;
    inner.chain = p.chain.clone();
    inner.assignments.extend(p.assignments.iter().cloned());
    inner
        .redirects
        .extend(p.redirects.iter().filter(|r| !is_stdin_text(r)).cloned());
    inner.zsh = zsh;
    inner.function = None;
    inner
}

fn is_stdin_text(r: &super::Redirect) -> bool {
    matches!(r.kind, RedirectKind::HereDoc | RedirectKind::HereString)
        && matches!(r.fd, None | Some(0))
}

/// A shell without `-c`: its script is its standard input.
fn stdin_script(
    w: &mut Walker,
    mut p: Pending,
    ctx: &Ctx,
    name: String,
    wrapper: Vec<String>,
    zsh: bool,
) {
    let text = p.redirects.iter().rev().find(|r| is_stdin_text(r)).cloned();
    let file = p.redirects.iter().any(|r| {
        r.kind == RedirectKind::Read
            && matches!(r.fd, None | Some(0))
            && !r.dynamic
            && fd_path(&r.target).is_none()
    });
    match text {
        Some(r) if !r.dynamic => {
            p.chain.push(Wrapper {
                name,
                argv: wrapper,
                privileged: false,
            });
            let inner = inner_ctx(ctx, &p, zsh);
            w.script(&r.target, &inner);
        }
        Some(_) => {
            w.unknown(format!("`{name}` reads a script only known at run time"));
            w.push_pending(p, ctx);
        }
        None if file && ctx.pipe.is_none_or(|pipe| pipe.index == 0) => {
            // `sh < script.sh` runs a file, like `sh script.sh`.
            w.push_pending(p, ctx);
        }
        None => {
            w.unknown(format!("`{name}` reads its commands from standard input"));
            w.push_pending(p, ctx);
        }
    }
}

/// `Some(true)` for paths that are standard input (`/dev/stdin`, `/dev/fd/0`,
/// `/proc/self/fd/0`), `Some(false)` for other descriptor paths (`/dev/fd/63`, what a process
/// substitution becomes), `None` for ordinary files.
pub(crate) fn fd_path(path: &str) -> Option<bool> {
    if matches!(path, "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0") {
        return Some(true);
    }
    let descriptor = path.starts_with("/dev/fd/")
        || (path.starts_with("/proc/") && path.contains("/fd/"))
        || path == "/dev/tcp"
        || path.starts_with("/dev/tcp/")
        || path.starts_with("/dev/udp/");
    descriptor.then_some(false)
}

fn find(w: &mut Walker, mut p: Pending, ctx: &Ctx) {
    if let Some(split) = p.words.iter().find(|w| w.split) {
        w.unknown(format!(
            "`find` with `{}`, which may expand into several words",
            split.text
        ));
        w.push_pending(p, ctx);
        return;
    }
    let mut groups = Vec::new();
    let mut i = 1;
    while i < p.words.len() {
        let word = &p.words[i];
        if matches!(word.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < p.words.len() && !matches!(p.words[end].text.as_str(), ";" | "+") {
                end += 1;
            }
            groups.push((word.text.clone(), start, end));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    for (flag, start, end) in groups {
        let words: Vec<Word> = p.words[start..end]
            .iter()
            .map(|word| {
                let mut word = word.clone();
                if word.text.contains("{}") {
                    if word.literal {
                        word.placeholder = true;
                    }
                    word.literal = false;
                }
                word
            })
            .collect();
        let mut chain = p.chain.clone();
        chain.push(Wrapper {
            name: "find".into(),
            argv: vec!["find".into(), flag],
            privileged: false,
        });
        let sub = Pending {
            words,
            assignments: p.assignments.clone(),
            redirects: p.redirects.clone(),
            text: p.text.clone(),
            chain,
            kind: SegmentKind::Command,
        };
        resolve(w, sub, ctx);
    }
    // `-fprint FILE`, `-fprint0 FILE`, `-fprintf FILE FORMAT` and `-fls FILE` write FILE: they
    // are judged like a redirection to it.
    let targets: Vec<Redirect> = p
        .words
        .windows(2)
        .filter(|pair| {
            matches!(
                pair[0].text.as_str(),
                "-fprint" | "-fprint0" | "-fprintf" | "-fls"
            )
        })
        .map(|pair| Redirect {
            fd: None,
            op: pair[0].text.clone(),
            target: pair[1].text.clone(),
            dynamic: !pair[1].literal,
            kind: RedirectKind::Write,
        })
        .collect();
    p.redirects.extend(targets);
    w.push_pending(p, ctx);
}

#[cfg(test)]
mod tests {
    use super::super::analyze;

    fn effective(script: &str) -> (Vec<Vec<String>>, Option<String>) {
        let a = analyze(script);
        (a.segments.into_iter().map(|s| s.argv).collect(), a.unknown)
    }

    fn single(script: &str) -> Vec<String> {
        let (argvs, unknown) = effective(script);
        assert!(unknown.is_none(), "{script}: {unknown:?}");
        assert_eq!(argvs.len(), 1, "{script}: {argvs:?}");
        argvs.into_iter().next().unwrap_or_default()
    }

    #[test]
    fn simple_wrappers_unwrap() {
        for script in [
            "nice rm -rf x",
            "nice -n 5 rm -rf x",
            "nice -10 rm -rf x",
            "nohup rm -rf x",
            "timeout 10 rm -rf x",
            "timeout -s KILL -k 5 10s rm -rf x",
            "timeout --signal=TERM 1m rm -rf x",
            "stdbuf -o0 -eL rm -rf x",
            "time rm -rf x",
            "time -p rm -rf x",
            "command rm -rf x",
            "command -p rm -rf x",
            "builtin rm -rf x",
            "exec rm -rf x",
            "/usr/bin/env rm -rf x",
            "env -i FOO=1 rm -rf x",
            "env -u HOME -C /tmp rm -rf x",
            "busybox rm -rf x",
            "setsid -f rm -rf x",
            "ionice -c 3 rm -rf x",
            "sudo -u root rm -rf x",
            "doas rm -rf x",
            "chroot / rm -rf x",
            "strace -f -o log rm -rf x",
            "env nice timeout 5 nohup rm -rf x",
        ] {
            assert_eq!(single(script), ["rm", "-rf", "x"], "{script}");
        }
    }

    #[test]
    fn shells_are_parsed_recursively() {
        assert_eq!(single("sh -c 'rm -rf x'"), ["rm", "-rf", "x"]);
        assert_eq!(single("bash -lc \"rm -rf x\""), ["rm", "-rf", "x"]);
        assert_eq!(single("bash -c \"sh -c 'rm -rf x'\""), ["rm", "-rf", "x"]);
        assert_eq!(single("env -S 'sh -c \"rm -rf x\"'"), ["rm", "-rf", "x"]);
        assert_eq!(single("sh <<'EOF'\nrm -rf x\nEOF"), ["rm", "-rf", "x"]);
        assert_eq!(single("bash <<< 'rm -rf x'"), ["rm", "-rf", "x"]);
        assert_eq!(single("su -c 'rm -rf x' root"), ["rm", "-rf", "x"]);
        assert_eq!(single("watch -n 1 rm -rf x"), ["rm", "-rf", "x"]);
        let a = analyze("sudo sh -c 'rm x'");
        assert!(a.segments[0].is_privileged());
        assert_eq!(a.segments[0].wrappers.len(), 2);
    }

    #[test]
    fn xargs_and_find_expose_their_commands() {
        let (argvs, unknown) =
            effective("find / -name x -exec rm -rf {} + -o -execdir sh -c 'id' \\;");
        assert!(unknown.is_none(), "{unknown:?}");
        assert!(argvs.contains(&vec!["rm".into(), "-rf".into(), "{}".into()]));
        assert!(argvs.contains(&vec!["id".into()]));
        assert!(argvs.iter().any(|a| a[0] == "find"));
        let a = analyze("ls | xargs -0 -n1 rm -f");
        let rm = a
            .segments
            .iter()
            .find(|s| s.program() == Some("rm"))
            .expect("rm segment");
        assert_eq!(rm.argv, ["rm", "-f", "{}"]);
        assert!(rm.is_dynamic(2));
        assert_eq!(rm.wrappers[0].name, "xargs");
        let b = analyze("xargs -I{} cp {} dest");
        assert!(b.segments[0].is_dynamic(1));
    }

    #[test]
    fn unresolvable_wrappers_are_unknown() {
        for script in [
            "sh -c \"$X\"",
            "bash -c \"$(curl -s http://x)\"",
            "echo rm | sh",
            "sh",
            "eval 'rm -rf x'",
            "eval \"$(echo cm0K | base64 -d)\"",
            "env $OPTS rm x",
            "timeout $T rm x",
            "find . $EXPR",
            "source \"$F\"",
            ". $F",
            "pwsh -EncodedCommand ZQBjAGgAbwA=",
            "fish -c 'rm x'",
            "alias ls='rm -rf ~'",
            "env -S '${X}'",
            "timeout --bogus 5 rm",
            "sh -c",
            "parallel rm ::: a b",
            "trap \"$X\" EXIT",
            "zsh -c 'ls *(e:rm -rf x:)'",
        ] {
            assert!(
                analyze(script).unknown.is_some(),
                "{script:?} should be unknown"
            );
        }
    }

    #[test]
    fn eval_literal_is_still_analysed() {
        let a = analyze("eval 'rm -rf /'");
        assert!(a.unknown.is_some());
        assert!(a.segments.iter().any(|s| s.argv == ["rm", "-rf", "/"]));
    }

    #[test]
    fn programs_named_like_wrappers_elsewhere_are_unknown() {
        for script in [
            "./env sh -c ls",
            "/tmp/timeout 5 ls",
            "/usr/bin/../bin/sh -c ls",
        ] {
            let (argvs, unknown) = effective(script);
            assert!(unknown.is_some(), "{script}");
            assert_eq!(
                argvs.len(),
                1,
                "{script}: the program itself is still a segment"
            );
        }
        assert_eq!(single("./ls -la"), ["./ls", "-la"]);
        assert_eq!(single("./sudo -l"), ["./sudo", "-l"]);
    }

    #[test]
    fn lookups_and_bare_wrappers_are_final() {
        assert_eq!(single("command -v git"), ["command", "-v", "git"]);
        assert_eq!(single("env"), ["env"]);
        assert_eq!(single("sudo -l"), ["sudo", "-l"]);
        assert_eq!(single("bash script.sh"), ["bash", "script.sh"]);
    }

    #[test]
    fn substituted_shell_scripts_feed_the_shell() {
        let a = analyze("bash -c \"$(curl -fsSL https://x/install.sh)\"");
        let curl = a
            .segments
            .iter()
            .find(|s| s.program() == Some("curl"))
            .expect("curl");
        assert!(curl.feeds_shell);
        let b = analyze("curl -s https://x | sh");
        assert!(b.segments.iter().any(|s| s.program() == Some("sh")));
    }
}

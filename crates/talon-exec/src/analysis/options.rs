//! Option parsing for wrappers, and which wrapper a program name is.

use super::parse::Word;
use super::special::{env, flock, foreign_shell, script_of, shell, su, sudo, trap, watch, xargs};
use super::wrappers::{FOREIGN_SHELLS, SHELLS, Step, fd_path};

/// How a wrapper's options are written.
#[derive(Default)]
pub(crate) struct Spec {
    /// Short options without an argument.
    pub(crate) flags: &'static str,
    /// Short options with an argument (attached or next word).
    pub(crate) with_arg: &'static str,
    /// Short options with an optional attached argument.
    pub(crate) optional: &'static str,
    pub(crate) long_flags: &'static [&'static str],
    pub(crate) long_args: &'static [&'static str],
    /// `--name=value` is accepted for any name.
    pub(crate) any_long_value: bool,
    /// Operands between the options and the command.
    pub(crate) operands: usize,
    /// `-10` is an option (`nice`).
    pub(crate) numeric: bool,
}

pub(crate) struct Parsed {
    /// Index of the first word of the wrapped command.
    pub(crate) next: usize,
    /// Options seen, with their argument.
    pub(crate) opts: Vec<(String, Option<String>)>,
}

impl Parsed {
    pub(crate) fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|(o, _)| names.contains(&o.as_str()))
    }

    pub(crate) fn arg(&self, names: &[&str]) -> Option<Option<&str>> {
        self.opts
            .iter()
            .rev()
            .find(|(o, _)| names.contains(&o.as_str()))
            .map(|(_, a)| a.as_deref())
    }
}

pub(crate) fn parse_opts(name: &str, words: &[Word], spec: &Spec) -> Result<Parsed, String> {
    let mut i = 1;
    let mut opts = Vec::new();
    let unknown = |opt: &str| format!("`{name}` has an option `{opt}` the analyser does not know");
    while let Some(word) = words.get(i) {
        if !word.literal {
            if word.text.starts_with('-') || word.split {
                return Err(format!(
                    "`{name}` option `{}` is only known at run time",
                    word.text
                ));
            }
            break;
        }
        let text = word.text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (key, value) = match long.split_once('=') {
                Some((k, v)) => (k, Some(v.to_owned())),
                None => (long, None),
            };
            i += 1;
            let exact_or_prefix = |list: &[&'static str]| -> Vec<&'static str> {
                if let Some(found) = list.iter().find(|l| **l == key) {
                    return vec![found];
                }
                list.iter()
                    .copied()
                    .filter(|l| l.starts_with(key))
                    .collect()
            };
            let flags = exact_or_prefix(spec.long_flags);
            let args = exact_or_prefix(spec.long_args);
            match (flags.as_slice(), args.as_slice()) {
                ([flag], []) => opts.push((format!("--{flag}"), value)),
                ([], [arg]) => {
                    let value = match value {
                        Some(v) => v,
                        None => {
                            let v = words.get(i).ok_or_else(|| unknown(text))?;
                            i += 1;
                            v.text.clone()
                        }
                    };
                    opts.push((format!("--{arg}"), Some(value)));
                }
                _ if spec.any_long_value && value.is_some() => {
                    opts.push((format!("--{key}"), value))
                }
                _ => return Err(unknown(text)),
            }
            continue;
        }
        if text.len() > 1 && text.starts_with('-') {
            let cluster = &text[1..];
            i += 1;
            if spec.numeric && cluster.bytes().all(|b| b.is_ascii_digit()) {
                opts.push((text.to_owned(), None));
                continue;
            }
            for (pos, c) in cluster.char_indices() {
                let rest = &cluster[pos + c.len_utf8()..];
                if spec.flags.contains(c) {
                    opts.push((format!("-{c}"), None));
                } else if spec.optional.contains(c) {
                    opts.push((format!("-{c}"), (!rest.is_empty()).then(|| rest.to_owned())));
                    break;
                } else if spec.with_arg.contains(c) {
                    let value = if rest.is_empty() {
                        let v = words.get(i).ok_or_else(|| unknown(text))?;
                        i += 1;
                        v.text.clone()
                    } else {
                        rest.to_owned()
                    };
                    opts.push((format!("-{c}"), Some(value)));
                    break;
                } else {
                    return Err(unknown(&format!("-{c}")));
                }
            }
            continue;
        }
        break;
    }
    for _ in 0..spec.operands {
        match words.get(i) {
            Some(word) if word.split => {
                return Err(format!(
                    "`{name}` operand `{}` may expand into several words",
                    word.text
                ));
            }
            Some(_) => i += 1,
            None => break,
        }
    }
    Ok(Parsed {
        next: i.min(words.len()),
        opts,
    })
}

pub(crate) fn texts(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.text.clone()).collect()
}

/// A wrapper described by `spec`: the command follows its options.
pub(crate) fn simple(name: &str, words: &[Word], spec: &Spec, privileged: bool) -> Step {
    match parse_opts(name, words, spec) {
        Ok(parsed) => wrap_at(words, parsed.next, privileged),
        Err(reason) => Step::Unknown(reason),
    }
}

pub(crate) fn wrap_at(words: &[Word], next: usize, privileged: bool) -> Step {
    if next >= words.len() {
        return Step::Done;
    }
    Step::Wrap {
        wrapper: texts(&words[..next]),
        rest: words[next..].to_vec(),
        assignments: Vec::new(),
        privileged,
    }
}

pub(crate) fn classify(name: &str, words: &[Word]) -> Step {
    match name {
        "nohup" | "builtin" | "eatmydata" | "catchsegv" | "proxychains" | "proxychains4"
        | "torsocks" | "tsocks" | "noglob" => simple(name, words, &Spec::default(), false),
        "coproc" => wrap_at(words, 1, false),
        "nice" => simple(
            name,
            words,
            &Spec {
                with_arg: "n",
                long_args: &["adjustment"],
                numeric: true,
                ..Spec::default()
            },
            false,
        ),
        "timeout" => simple(
            name,
            words,
            &Spec {
                flags: "v",
                with_arg: "ks",
                long_flags: &["foreground", "preserve-status", "verbose"],
                long_args: &["kill-after", "signal"],
                operands: 1,
                ..Spec::default()
            },
            false,
        ),
        "stdbuf" => simple(
            name,
            words,
            &Spec {
                with_arg: "ioe",
                long_args: &["input", "output", "error"],
                ..Spec::default()
            },
            false,
        ),
        "time" => simple(
            name,
            words,
            &Spec {
                flags: "pvqa",
                with_arg: "of",
                long_flags: &["portability", "verbose", "quiet", "append"],
                long_args: &["output", "format"],
                ..Spec::default()
            },
            false,
        ),
        "command" => match parse_opts(
            name,
            words,
            &Spec {
                flags: "pvV",
                ..Spec::default()
            },
        ) {
            Ok(parsed) if parsed.has(&["-v", "-V"]) => Step::Done,
            Ok(parsed) => wrap_at(words, parsed.next, false),
            Err(reason) => Step::Unknown(reason),
        },
        "exec" => simple(
            name,
            words,
            &Spec {
                flags: "cl",
                with_arg: "a",
                ..Spec::default()
            },
            false,
        ),
        "setsid" => simple(
            name,
            words,
            &Spec {
                flags: "cfw",
                long_flags: &["ctty", "fork", "wait"],
                ..Spec::default()
            },
            false,
        ),
        "ionice" => match parse_opts(
            name,
            words,
            &Spec {
                flags: "t",
                with_arg: "cnpPu",
                long_flags: &["ignore"],
                long_args: &["class", "classdata", "pid", "pgid", "uid"],
                ..Spec::default()
            },
        ) {
            Ok(parsed) if parsed.has(&["-p", "-P", "-u", "--pid", "--pgid", "--uid"]) => Step::Done,
            Ok(parsed) => wrap_at(words, parsed.next, false),
            Err(reason) => Step::Unknown(reason),
        },
        "chrt" | "taskset" => {
            let spec = if name == "chrt" {
                Spec {
                    flags: "abdefimoprRv",
                    with_arg: "TPD",
                    operands: 1,
                    ..Spec::default()
                }
            } else {
                Spec {
                    flags: "acp",
                    operands: 1,
                    ..Spec::default()
                }
            };
            match parse_opts(name, words, &spec) {
                Ok(parsed) if parsed.has(&["-p", "-m"]) => Step::Done,
                Ok(parsed) => wrap_at(words, parsed.next, false),
                Err(reason) => Step::Unknown(reason),
            }
        }
        "flock" => flock(words),
        "chroot" => simple(
            name,
            words,
            &Spec {
                long_flags: &["skip-chdir"],
                long_args: &["userspec", "groups"],
                operands: 1,
                ..Spec::default()
            },
            true,
        ),
        "unbuffer" => simple(
            name,
            words,
            &Spec {
                flags: "p",
                ..Spec::default()
            },
            false,
        ),
        "strace" | "ltrace" => {
            let spec = Spec {
                flags: "cCdDfFhiqrtTvVwxyzZkn",
                with_arg: "abeEIoOpPsSuUXAlLn",
                long_flags: &[
                    "follow-forks",
                    "summary",
                    "summary-only",
                    "no-abbrev",
                    "quiet",
                ],
                any_long_value: true,
                ..Spec::default()
            };
            match parse_opts(name, words, &spec) {
                Ok(parsed) if parsed.has(&["-p"]) => Step::Done,
                Ok(parsed) => wrap_at(words, parsed.next, false),
                Err(reason) => Step::Unknown(reason),
            }
        }
        "valgrind" => simple(
            name,
            words,
            &Spec {
                flags: "qv",
                any_long_value: true,
                ..Spec::default()
            },
            false,
        ),
        "watch" => watch(words),
        "script" => match parse_opts(
            name,
            words,
            &Spec {
                flags: "aefqt",
                with_arg: "cEBIOTm",
                long_flags: &["append", "return", "flush", "force", "quiet", "timing"],
                long_args: &[
                    "command",
                    "echo",
                    "log-io",
                    "log-in",
                    "log-out",
                    "log-timing",
                    "logging-format",
                    "output-limit",
                ],
                ..Spec::default()
            },
        ) {
            Ok(parsed) => match parsed.arg(&["-c", "--command"]).flatten() {
                Some(script) => script_of(words, parsed.next, script, false),
                None => Step::Unknown("`script` starts an interactive shell".into()),
            },
            Err(reason) => Step::Unknown(reason),
        },
        "su" | "runuser" => su(name, words),
        "sudo" => sudo(words),
        "doas" => match parse_opts(
            name,
            words,
            &Spec {
                flags: "nsL",
                with_arg: "Cu",
                ..Spec::default()
            },
        ) {
            Ok(parsed) if parsed.has(&["-C", "-L"]) => Step::Done,
            Ok(parsed) => wrap_at(words, parsed.next, true),
            Err(reason) => Step::Unknown(reason),
        },
        "pkexec" => simple(
            name,
            words,
            &Spec {
                long_flags: &["disable-internal-agent", "keep-cwd", "help", "version"],
                long_args: &["user"],
                ..Spec::default()
            },
            true,
        ),
        "busybox" | "toybox" => match words.get(1) {
            Some(applet) if applet.literal && !applet.text.starts_with('-') => {
                wrap_at(words, 1, false)
            }
            Some(applet) if !applet.literal => Step::Unknown(format!(
                "`{name}` applet `{}` is only known at run time",
                applet.text
            )),
            _ => Step::Done,
        },
        "xargs" => xargs(words),
        "env" => env(words),
        "find" => Step::Find,
        "eval" => Step::Eval,
        "trap" => trap(words),
        "alias"
            if words
                .iter()
                .skip(1)
                .any(|w| w.text.contains('=') || !w.literal) =>
        {
            Step::Unknown("`alias` defines a command whose text is not analysed".into())
        }
        "source" | "." => match words.get(1) {
            Some(path) if !path.literal => Step::Unknown(format!(
                "`{name}` runs a file whose path is only known at run time: `{}`",
                path.text
            )),
            Some(path) => match fd_path(&path.text) {
                Some(true) => Step::Stdin {
                    wrapper: texts(&words[..2]),
                    zsh: false,
                },
                Some(false) => {
                    Step::Unknown(format!("`{name}` runs `{}`, a file descriptor", path.text))
                }
                None => Step::Done,
            },
            None => Step::Done,
        },
        "parallel" | "sem" if words.len() > 1 => {
            Step::Unknown(format!("`{name}` builds commands at run time"))
        }
        _ if SHELLS.contains(&name) => shell(name, words),
        _ if FOREIGN_SHELLS.contains(&name) => foreign_shell(name, words),
        _ => Step::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::literal).collect()
    }

    fn timeout_spec() -> Spec {
        Spec {
            flags: "v",
            with_arg: "ks",
            long_flags: &["foreground", "preserve-status", "verbose"],
            long_args: &["kill-after", "signal"],
            operands: 1,
            ..Spec::default()
        }
    }

    #[test]
    fn options_clusters_abbreviations_and_operands() {
        let parsed = parse_opts(
            "timeout",
            &words("timeout -vkTERM --sig=HUP --fore 5 rm x"),
            &timeout_spec(),
        )
        .expect("known options");
        assert_eq!(parsed.next, 5);
        assert_eq!(parsed.arg(&["-k"]), Some(Some("TERM")));
        assert_eq!(parsed.arg(&["--signal"]), Some(Some("HUP")));
        assert!(parsed.has(&["--foreground", "-v"]));
        let parsed = parse_opts(
            "timeout",
            &words("timeout -s KILL -- 5 rm"),
            &timeout_spec(),
        )
        .expect("ok");
        assert_eq!(parsed.next, 5);
    }

    #[test]
    fn unknown_ambiguous_and_dynamic_options_fail() {
        assert!(parse_opts("timeout", &words("timeout -z 5 rm"), &timeout_spec()).is_err());
        assert!(parse_opts("timeout", &words("timeout --bogus 5 rm"), &timeout_spec()).is_err());
        // `--p` could be `--preserve-status` only: accepted; `--s` is `--signal` and needs a value.
        assert!(parse_opts("timeout", &words("timeout --p 5 rm"), &timeout_spec()).is_ok());
        assert!(parse_opts("timeout", &words("timeout --s"), &timeout_spec()).is_err());
        let mut dynamic = words("timeout x 5 rm");
        dynamic[1] = Word::dynamic("$OPT");
        assert!(parse_opts("timeout", &dynamic, &timeout_spec()).is_err());
    }

    #[test]
    fn classify_recognises_wrappers_and_plain_programs() {
        assert!(matches!(classify("ls", &words("ls -la")), Step::Done));
        assert!(matches!(
            classify("nohup", &words("nohup ls")),
            Step::Wrap { .. }
        ));
        assert!(matches!(
            classify("sudo", &words("sudo ls")),
            Step::Wrap {
                privileged: true,
                ..
            }
        ));
        assert!(matches!(
            classify("bash", &words("bash -c ls")),
            Step::Script { .. }
        ));
        assert!(matches!(classify("eval", &words("eval ls")), Step::Eval));
        assert!(matches!(classify("find", &words("find .")), Step::Find));
        assert!(matches!(classify("pwsh", &words("pwsh")), Step::Unknown(_)));
        assert!(matches!(classify("nice", &words("nice")), Step::Done));
    }
}

//! Wrappers with their own syntax: shells, `env`, `sudo`, `su`, `xargs`, `watch`, `flock`, `trap`.

use super::Assignment;
use super::MAX_WRAPPERS;
use super::options::{Spec, parse_opts, texts, wrap_at};
use super::parse::Word;
use super::words::{is_name, split_env_string};
use super::wrappers::{Step, fd_path};

pub(crate) fn script_of(words: &[Word], next: usize, script: &str, privileged: bool) -> Step {
    // The script came from an option value: find its word to keep its substitutions.
    let word = words
        .iter()
        .find(|w| w.text == script)
        .cloned()
        .unwrap_or_else(|| Word::literal(script));
    Step::Script {
        wrapper: texts(&words[..next.min(words.len())]),
        script: word,
        zsh: false,
        privileged,
    }
}

pub(crate) fn flock(words: &[Word]) -> Step {
    let spec = Spec {
        flags: "sxeunoF",
        with_arg: "wEc",
        long_flags: &[
            "shared",
            "exclusive",
            "unlock",
            "nonblock",
            "close",
            "no-fork",
            "verbose",
        ],
        long_args: &["timeout", "conflict-exit-code", "command"],
        ..Spec::default()
    };
    let parsed = match parse_opts("flock", words, &spec) {
        Ok(parsed) => parsed,
        Err(reason) => return Step::Unknown(reason),
    };
    if let Some(Some(script)) = parsed.arg(&["-c", "--command"]) {
        return script_of(words, parsed.next, script, false);
    }
    // The lock file, then either `-c SCRIPT` or the command.
    let after_file = parsed.next + 1;
    match words.get(after_file).map(|w| w.text.as_str()) {
        Some("-c" | "--command") => match words.get(after_file + 1) {
            Some(script) => Step::Script {
                wrapper: texts(&words[..=after_file]),
                script: script.clone(),
                zsh: false,
                privileged: false,
            },
            None => Step::Done,
        },
        _ => wrap_at(words, after_file, false),
    }
}

pub(crate) fn watch(words: &[Word]) -> Step {
    let spec = Spec {
        flags: "bcdeghtpx",
        with_arg: "nq",
        long_flags: &[
            "beep",
            "color",
            "no-color",
            "differences",
            "errexit",
            "chgexit",
            "exec",
            "no-title",
            "no-wrap",
            "precise",
            "no-rerun",
        ],
        long_args: &["interval", "equexit"],
        ..Spec::default()
    };
    let parsed = match parse_opts("watch", words, &spec) {
        Ok(parsed) => parsed,
        Err(reason) => return Step::Unknown(reason),
    };
    if parsed.has(&["-x", "--exec"]) {
        return wrap_at(words, parsed.next, false);
    }
    let rest = words.get(parsed.next..).unwrap_or(&[]);
    if rest.is_empty() {
        return Step::Done;
    }
    if let Some(dynamic) = rest.iter().find(|w| !w.literal) {
        return Step::Unknown(format!(
            "`watch` runs a command only known at run time: `{}`",
            dynamic.text
        ));
    }
    let script: Vec<&str> = rest.iter().map(|w| w.text.as_str()).collect();
    Step::Script {
        wrapper: texts(&words[..parsed.next]),
        script: Word::literal(script.join(" ")),
        zsh: false,
        privileged: false,
    }
}

pub(crate) fn su(name: &str, words: &[Word]) -> Step {
    let spec = Spec {
        flags: "lmpfP",
        with_arg: "csgGwu",
        long_flags: &["login", "preserve-environment", "pty", "fast"],
        long_args: &[
            "command",
            "session-command",
            "shell",
            "group",
            "supp-group",
            "whitelist-environment",
            "user",
        ],
        ..Spec::default()
    };
    // `su -` is the login flag, not the end of options.
    let filtered: Vec<Word> = words
        .iter()
        .filter(|w| !(w.literal && w.text == "-"))
        .cloned()
        .collect();
    let parsed = match parse_opts(name, &filtered, &spec) {
        Ok(parsed) => parsed,
        Err(reason) => return Step::Unknown(reason),
    };
    if let Some(Some(script)) = parsed.arg(&["-c", "--command", "--session-command"]) {
        return script_of(&filtered, parsed.next, script, true);
    }
    if name == "runuser" && parsed.has(&["-u", "--user"]) {
        return wrap_at(&filtered, parsed.next, true);
    }
    Step::Done
}

pub(crate) fn sudo(words: &[Word]) -> Step {
    let spec = Spec {
        flags: "AbBEeHiKklnPSsVvh",
        with_arg: "CDgpRrTtUu",
        long_flags: &[
            "askpass",
            "background",
            "bell",
            "preserve-env",
            "edit",
            "set-home",
            "login",
            "remove-timestamp",
            "reset-timestamp",
            "list",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "shell",
            "validate",
            "version",
            "help",
        ],
        long_args: &[
            "close-from",
            "chdir",
            "group",
            "host",
            "prompt",
            "chroot",
            "role",
            "type",
            "command-timeout",
            "other-user",
            "user",
        ],
        ..Spec::default()
    };
    let parsed = match parse_opts("sudo", words, &spec) {
        Ok(parsed) => parsed,
        Err(reason) => return Step::Unknown(reason),
    };
    if parsed.has(&[
        "-e",
        "-l",
        "-v",
        "-k",
        "-K",
        "-V",
        "-h",
        "--edit",
        "--list",
        "--validate",
    ]) {
        return Step::Done;
    }
    let mut next = parsed.next;
    let mut assignments = Vec::new();
    while let Some(word) = words.get(next) {
        match assignment_word(word) {
            Ok(Some(a)) => {
                assignments.push(a);
                next += 1;
            }
            Ok(None) => break,
            Err(reason) => return Step::Unknown(reason),
        }
    }
    if next >= words.len() {
        return Step::Done;
    }
    Step::Wrap {
        wrapper: texts(&words[..next]),
        rest: words[next..].to_vec(),
        assignments,
        privileged: true,
    }
}

/// `NAME=value` as a word (for `env` and `sudo`).
pub(crate) fn assignment_word(word: &Word) -> Result<Option<Assignment>, String> {
    let Some((name, value)) = word.text.split_once('=') else {
        if word.split {
            return Err(format!("`{}` may expand into several words", word.text));
        }
        return Ok(None);
    };
    if !is_name(name) {
        if word.split {
            return Err(format!("`{}` may expand into several words", word.text));
        }
        return Ok(None);
    }
    if word.split {
        return Err(format!(
            "the assignment `{}` may expand into several words",
            word.text
        ));
    }
    Ok(Some(Assignment {
        name: name.to_owned(),
        value: value.to_owned(),
        dynamic: !word.literal,
    }))
}

pub(crate) fn env(words: &[Word]) -> Step {
    let mut words = words.to_vec();
    let mut assignments = Vec::new();
    let mut splices = 0;
    let mut i = 1;
    while let Some(word) = words.get(i) {
        if !word.literal {
            match assignment_word(word) {
                Ok(Some(a)) => {
                    assignments.push(a);
                    i += 1;
                    continue;
                }
                Ok(None) => break,
                Err(reason) => return Step::Unknown(reason),
            }
        }
        let text = word.text.clone();
        let split_value = if text == "-S" || text == "--split-string" {
            match words.get(i + 1) {
                Some(v) if v.literal => Some((2, v.text.clone())),
                Some(v) => {
                    return Step::Unknown(format!(
                        "`env -S` with `{}`, only known at run time",
                        v.text
                    ));
                }
                None => return Step::Done,
            }
        } else if let Some(v) = text.strip_prefix("--split-string=") {
            Some((1, v.to_owned()))
        } else {
            text.strip_prefix("-S").map(|v| (1, v.to_owned()))
        };
        if let Some((consumed, value)) = split_value {
            splices += 1;
            if splices > MAX_WRAPPERS {
                return Step::Unknown("too many `env -S` strings".into());
            }
            let Some(split) = split_env_string(&value) else {
                return Step::Unknown(format!("`env -S` string `{value}` is not analysed"));
            };
            let end = (i + consumed).min(words.len());
            words.splice(i..end, split.into_iter().map(Word::literal));
            continue;
        }
        match text.as_str() {
            "--" => {
                i += 1;
                break;
            }
            "-" | "--ignore-environment" | "--null" | "--debug" | "--list-signal-handling" => {
                i += 1
            }
            "-u" | "--unset" | "-C" | "--chdir" => i += 2,
            t if [
                "--unset=",
                "--chdir=",
                "--block-signal",
                "--default-signal",
                "--ignore-signal",
            ]
            .iter()
            .any(|p| t.starts_with(p)) =>
            {
                i += 1;
            }
            t if t.starts_with("-u") || t.starts_with("-C") => i += 1,
            t if t.len() > 1 && t.starts_with('-') => {
                if t[1..].chars().all(|c| matches!(c, 'i' | '0' | 'v')) {
                    i += 1;
                } else {
                    return Step::Unknown(format!(
                        "`env` has an option `{t}` the analyser does not know"
                    ));
                }
            }
            _ => match assignment_word(word) {
                Ok(Some(a)) => {
                    assignments.push(a);
                    i += 1;
                }
                Ok(None) => break,
                Err(reason) => return Step::Unknown(reason),
            },
        }
    }
    if i >= words.len() {
        return Step::Done;
    }
    Step::Wrap {
        wrapper: texts(&words[..i]),
        rest: words[i..].to_vec(),
        assignments,
        privileged: false,
    }
}

pub(crate) fn xargs(words: &[Word]) -> Step {
    let spec = Spec {
        flags: "0rtpxo",
        with_arg: "adEILnPs",
        optional: "eil",
        long_flags: &[
            "null",
            "no-run-if-empty",
            "verbose",
            "interactive",
            "exit",
            "open-tty",
            "show-limits",
            "eof",
            "replace",
            "max-lines",
        ],
        long_args: &[
            "arg-file",
            "delimiter",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        ..Spec::default()
    };
    let parsed = match parse_opts("xargs", words, &spec) {
        Ok(parsed) => parsed,
        Err(reason) => return Step::Unknown(reason),
    };
    let replace = parsed
        .arg(&["-I", "-i", "--replace"])
        .map(|r| r.unwrap_or("{}").to_owned());
    let mut rest: Vec<Word> = words.get(parsed.next..).unwrap_or(&[]).to_vec();
    if rest.is_empty() {
        rest.push(Word::literal("echo"));
    }
    match replace {
        Some(r) => {
            for word in rest.iter_mut().skip(1) {
                if word.text.contains(r.as_str()) {
                    if word.literal {
                        word.placeholder = true;
                    }
                    word.literal = false;
                }
            }
        }
        None => rest.push(Word::dynamic("{}")),
    }
    Step::Wrap {
        wrapper: texts(&words[..parsed.next]),
        rest,
        assignments: Vec::new(),
        privileged: false,
    }
}

pub(crate) fn trap(words: &[Word]) -> Step {
    match words.get(1) {
        Some(action) if words.len() > 2 && !action.text.starts_with('-') => {
            if action.literal {
                Step::Trap(action.clone())
            } else {
                Step::Unknown(format!(
                    "`trap` runs a command only known at run time: `{}`",
                    action.text
                ))
            }
        }
        _ => Step::Done,
    }
}

pub(crate) fn shell(name: &str, words: &[Word]) -> Step {
    let zsh = name == "zsh";
    let mut i = 1;
    let mut command = false;
    let mut stdin = false;
    while let Some(word) = words.get(i) {
        if !word.literal {
            if word.text.starts_with('-') || word.split {
                return Step::Unknown(format!(
                    "`{name}` option `{}` is only known at run time",
                    word.text
                ));
            }
            break;
        }
        let text = word.text.as_str();
        if text == "--" || text == "-" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            match long {
                "login" | "noprofile" | "norc" | "posix" | "restricted" | "verbose"
                | "noediting" | "debugger" | "dump-strings" | "dump-po-strings" | "help"
                | "version" | "pretty-print" => i += 1,
                "rcfile" | "init-file" => i += 2,
                _ => {
                    return Step::Unknown(format!(
                        "`{name}` has an option `{text}` the analyser does not know"
                    ));
                }
            }
            continue;
        }
        if text.len() > 1 && (text.starts_with('-') || text.starts_with('+')) {
            i += 1;
            for c in text[1..].chars() {
                match c {
                    'c' if text.starts_with('-') => command = true,
                    's' => stdin = true,
                    'o' | 'O' => i += 1,
                    'a' | 'b' | 'e' | 'f' | 'h' | 'i' | 'k' | 'l' | 'm' | 'n' | 'p' | 'r' | 't'
                    | 'u' | 'v' | 'x' | 'B' | 'C' | 'E' | 'H' | 'P' | 'T' | 'D' => {}
                    _ => {
                        return Step::Unknown(format!(
                            "`{name}` has an option `-{c}` the analyser does not know"
                        ));
                    }
                }
            }
            continue;
        }
        break;
    }
    if command {
        return match words.get(i) {
            Some(script) => Step::Script {
                wrapper: texts(&words[..=i]),
                script: script.clone(),
                zsh,
                privileged: false,
            },
            None => Step::Unknown(format!("`{name} -c` without a command string")),
        };
    }
    if stdin || i >= words.len() {
        return Step::Stdin {
            wrapper: texts(&words[..i.min(words.len())]),
            zsh,
        };
    }
    if !words[i].literal {
        return Step::Unknown(format!(
            "`{name}` runs a script file only known at run time: `{}`",
            words[i].text
        ));
    }
    match fd_path(&words[i].text) {
        Some(true) => Step::Stdin {
            wrapper: texts(&words[..=i]),
            zsh,
        },
        Some(false) => Step::Unknown(format!(
            "`{name}` runs `{}`, a file descriptor",
            words[i].text
        )),
        None => Step::Done,
    }
}

pub(crate) fn foreign_shell(name: &str, words: &[Word]) -> Step {
    let reads_code = words.len() == 1
        || words.iter().skip(1).any(|w| {
            let t = w.text.to_ascii_lowercase();
            !w.literal
                || t == "-c"
                || t.starts_with("-c")
                || t.starts_with("-e")
                || t.starts_with("/c")
                || t.starts_with("/k")
                || t.starts_with("--command")
                || t.starts_with("-command")
        });
    if name.starts_with("pwsh")
        || name.starts_with("powershell")
        || name.starts_with("cmd")
        || reads_code
    {
        Step::Unknown(format!("`{name}` command lines are not analysed"))
    } else {
        Step::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::literal).collect()
    }

    fn rest(step: Step) -> Vec<String> {
        match step {
            Step::Wrap { rest, .. } => rest.into_iter().map(|w| w.text).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn env_options_assignments_and_split_strings() {
        assert_eq!(rest(env(&words("env -i -u HOME A=1 ls -l"))), ["ls", "-l"]);
        let Step::Wrap { assignments, .. } = env(&words("env A=1 B=2 ls")) else {
            panic!("env with a command wraps it");
        };
        assert_eq!(assignments.len(), 2);
        let mut split = words("env -S");
        split.push(Word::literal("-i X=1 rm -rf /"));
        assert_eq!(rest(env(&split)), ["rm", "-rf", "/"]);
        assert!(matches!(env(&words("env")), Step::Done));
        assert!(matches!(env(&words("env -q ls")), Step::Unknown(_)));
    }

    #[test]
    fn assignment_words() {
        let a = assignment_word(&Word::literal("LD_PRELOAD=/x.so")).expect("plain word");
        assert_eq!(a.map(|a| a.name), Some("LD_PRELOAD".to_owned()));
        assert_eq!(assignment_word(&Word::literal("ls")), Ok(None));
        assert!(assignment_word(&Word::dynamic("$X")).is_err());
    }

    #[test]
    fn shell_options() {
        assert!(matches!(
            shell("bash", &words("bash -ex -o pipefail -c ls")),
            Step::Script { .. }
        ));
        assert!(matches!(
            shell("sh", &words("sh -s arg")),
            Step::Stdin { .. }
        ));
        assert!(matches!(shell("sh", &words("sh")), Step::Stdin { .. }));
        assert!(matches!(
            shell("bash", &words("bash script.sh")),
            Step::Done
        ));
        assert!(matches!(
            shell("bash", &words("bash /dev/stdin")),
            Step::Stdin { .. }
        ));
        assert!(matches!(shell("bash", &words("bash -Q")), Step::Unknown(_)));
        assert!(matches!(shell("bash", &words("bash -c")), Step::Unknown(_)));
    }

    #[test]
    fn xargs_placeholders() {
        let args = rest(xargs(&words("xargs -0 -n1 rm -f")));
        assert_eq!(args, ["rm", "-f", "{}"]);
        assert_eq!(rest(xargs(&words("xargs"))), ["echo", "{}"]);
        let Step::Wrap { rest, .. } = xargs(&words("xargs -I% cp % dir")) else {
            panic!("xargs wraps");
        };
        assert!(!rest[1].literal && rest[1].placeholder);
        assert!(rest[2].literal);
    }
}

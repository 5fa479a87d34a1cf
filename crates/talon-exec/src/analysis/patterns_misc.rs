//! Deny-pattern checks for the later GoClaw groups: container escape, mining, filter bypass,
//! network reconnaissance, package installs, persistence, process control, environment dumps.

use std::sync::LazyLock;

use regex::Regex;

use super::deny::RawHit;
use super::longopts;
use super::patterns::{View, is_match, is_python, is_shell, long_is, re, short_has};
use super::{Analysis, RedirectKind, SegmentKind, basename};

static CONTAINER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"docker\.(sock|socket)|/proc/sys/(kernel|fs|net)/|/sys/(kernel|fs|class|devices)/")
});
static MINING_URL: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"stratum\+(tcp|ssl)://"));
static PROC_ENVIRON: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"/proc/[^/]+/environ"));
static SECRET_VAR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)\$\{?(GOCLAW_(GATEWAY_TOKEN|ENCRYPTION_KEY|POSTGRES_DSN)|TALON_[A-Z0-9_]+)")
});
static PY_ENV: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"os\.(environ|getenv).*(GOCLAW_|TALON_)"));
static NODE_ENV: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"process\.env\.(GOCLAW_|TALON_)"));

const MINERS: &[&str] = &[
    "xmrig",
    "cpuminer",
    "minerd",
    "cgminer",
    "bfgminer",
    "ethminer",
    "nbminer",
    "t-rex",
    "phoenixminer",
    "lolminer",
    "gminer",
    "claymore",
];
const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".bash_login",
    ".zlogin",
];

/// One segment seen by the checks.
pub(crate) fn container_and_mining(v: &mut View<'_>) {
    if v.any_word(|w| is_match(&CONTAINER, w)) {
        v.hit(
            "container_escape",
            r"/var/run/docker\.sock|docker\.(sock|socket)",
            "the Docker socket or a kernel interface under /proc/sys or /sys",
        );
    }
    if v.is(MINERS) {
        v.hit(
            "crypto_mining",
            r"\b(xmrig|cpuminer|minerd|…)\b",
            format!("the miner `{}`", v.prog),
        );
    }
    if v.any_word(|w| is_match(&MINING_URL, w)) {
        v.hit(
            "crypto_mining",
            r"stratum\+tcp://|stratum\+ssl://",
            "a mining pool address",
        );
    }
}

pub(crate) fn filter_bypass(v: &mut View<'_>) {
    const G: &str = "filter_bypass";
    if v.is(&["sed", "gsed"]) && sed_scripts(v.args).iter().any(|s| sed_executes(s)) {
        v.hit(
            G,
            r#"\bsed\b.*['"]/e\b"#,
            "a `sed` script that runs commands (`e`)",
        );
    }
    if v.is(&["sort"])
        && v.options()
            .any(|a| longopts::may_be(a, "compress-program", longopts::SORT))
    {
        v.hit(
            G,
            r"\bsort\b.*--compress-program",
            "`sort --compress-program`",
        );
    }
    if v.is(&["git"]) {
        let sub = v.first_operand().unwrap_or("").to_owned();
        let dangerous_config = |c: &str| {
            let key = c.split('=').next().unwrap_or("").to_ascii_lowercase();
            [
                "core.sshcommand",
                "core.pager",
                "core.editor",
                "core.fsmonitor",
                "core.hookspath",
                "core.gitproxy",
                "diff.external",
                "credential.helper",
                "sequence.editor",
                "gpg.program",
                "uploadpack.packobjectshook",
            ]
            .contains(&key.as_str())
                || (key.starts_with("alias.") && c.contains("=!"))
                || (key.starts_with("filter.") || key.ends_with(".textconv"))
                || (key.starts_with("protocol.") && key.ends_with(".allow"))
        };
        let mut args = v.args.iter().map(String::as_str).peekable();
        let mut why = None;
        while let Some(a) = args.next() {
            if ["--upload-pack", "--receive-pack", "--exec"]
                .iter()
                .any(|p| a == *p || a.starts_with(&format!("{p}=")))
            {
                why = Some(format!("`git {a}`"));
            } else if a == "-u" && matches!(sub.as_str(), "clone" | "ls-remote") {
                why = Some("`git -u` (upload-pack)".to_owned());
            } else if (a == "-c" || a == "--config-env")
                && args.peek().is_some_and(|c| dangerous_config(c))
            {
                why = Some(format!("`git -c {}`", args.peek().copied().unwrap_or("")));
            } else if let Some(c) = a.strip_prefix("--config-env=")
                && dangerous_config(c)
            {
                why = Some(format!("`git {a}`"));
            }
        }
        // `git config alias.x '!cmd'`, `git config core.pager cmd`: the same settings, stored.
        if let Some(pos) = v.args.iter().position(|a| a == "config") {
            let rest: Vec<&str> = v.args[pos + 1..]
                .iter()
                .map(String::as_str)
                .filter(|a| !a.starts_with('-'))
                .collect();
            if let [key, value, ..] = rest.as_slice()
                && dangerous_config(&format!("{key}={value}"))
            {
                why = Some(format!("`git config {key}`"));
            }
        }
        if let Some(why) = why {
            v.hit(G, r"\bgit\b.*(--upload-pack|--receive-pack|--exec)=", why);
        }
    }
    if v.is(&["rg", "grep", "egrep", "fgrep"])
        && v.options().any(|a| a == "--pre" || a.starts_with("--pre="))
    {
        v.hit(
            G,
            r"\b(rg|grep)\b.*--pre=",
            "`--pre`, which runs a command per file",
        );
    }
    if v.is(&["man"])
        && v.options()
            .any(|a| long_is(a, "html", 3) || a.starts_with("-H"))
    {
        v.hit(
            G,
            r"\bman\b.*--html=",
            "`man --html`, which runs a browser command",
        );
    }
    if v.is(&["history"]) && v.options().any(|a| short_has(a, "saw")) {
        v.hit(
            G,
            r"\bhistory\b.*-[saw]\b",
            "`history` writing or injecting entries",
        );
    }
}

/// The scripts `sed` runs: `-e`/`--expression` values, else the first operand.
fn sed_scripts(args: &[String]) -> Vec<&str> {
    let mut scripts = Vec::new();
    let mut first = None;
    let mut iter = args.iter().map(String::as_str);
    let mut file = false;
    while let Some(a) = iter.next() {
        if a == "-e" || a == "--expression" {
            scripts.extend(iter.next());
        } else if let Some(s) = a.strip_prefix("--expression=") {
            scripts.push(s);
        } else if a == "-f" || a == "--file" || a.starts_with("--file=") {
            file = true;
            if a == "-f" || a == "--file" {
                iter.next();
            }
        } else if a.starts_with("-e") && !a.starts_with("--") {
            scripts.push(&a[2..]);
        } else if a.starts_with('-') && a.len() > 1 {
            if let Some(pos) = a.find(['e', 'f']) {
                let rest = &a[pos + 1..];
                let value = if rest.is_empty() {
                    iter.next()
                } else {
                    Some(rest)
                };
                if a[pos..].starts_with('e') {
                    scripts.extend(value);
                } else {
                    file = true;
                }
            }
        } else if first.is_none() {
            first = Some(a);
        }
    }
    if scripts.is_empty() && !file {
        scripts.extend(first);
    }
    scripts
}

/// Whether a sed script has an `e` command or an `s///e` flag.
fn sed_executes(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let n = chars.len();
    let skip_to_eol = |i: &mut usize| {
        while *i < n && chars[*i] != '\n' {
            *i += 1;
        }
    };
    // Reads a delimited part starting after the delimiter; returns false if unterminated.
    let delimited = |i: &mut usize, d: char| -> bool {
        while *i < n {
            match chars[*i] {
                '\\' => *i += 2,
                c if c == d => {
                    *i += 1;
                    return true;
                }
                '\n' => return false,
                _ => *i += 1,
            }
        }
        false
    };
    while i < n {
        let c = chars[i];
        if c.is_whitespace()
            || c == ';'
            || c == '{'
            || c == '}'
            || c == '!'
            || c == ','
            || c.is_ascii_digit()
            || c == '$'
        {
            i += 1;
            continue;
        }
        match c {
            '/' => {
                i += 1;
                if !delimited(&mut i, '/') {
                    return false;
                }
            }
            '\\' => {
                let Some(&d) = chars.get(i + 1) else {
                    return false;
                };
                i += 2;
                if !delimited(&mut i, d) {
                    return false;
                }
            }
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | ':' | 'b' | 't' | 'T' => {
                i += 1;
                skip_to_eol(&mut i);
            }
            'e' => return true,
            's' | 'y' => {
                let Some(&d) = chars.get(i + 1) else {
                    return false;
                };
                i += 2;
                if !delimited(&mut i, d) || !delimited(&mut i, d) {
                    return false;
                }
                if c == 's' {
                    while i < n && (chars[i].is_ascii_alphanumeric()) {
                        match chars[i] {
                            'e' => return true,
                            'w' => {
                                skip_to_eol(&mut i);
                                break;
                            }
                            _ => i += 1,
                        }
                    }
                }
            }
            _ => i += 1,
        }
    }
    false
}

pub(crate) fn recon(v: &mut View<'_>) {
    const G: &str = "network_recon";
    if v.is(&["nmap", "masscan", "zmap", "rustscan"]) {
        v.hit(
            G,
            r"\b(nmap|masscan|zmap|rustscan)\b",
            format!("the scanner `{}`", v.prog),
        );
    }
    if v.is(&["ssh", "scp", "sftp"]) && v.any_arg(|a| a.contains('@')) {
        v.hit(
            G,
            r"\b(ssh|scp|sftp)\b.*@",
            format!("`{}` to a remote account", v.prog),
        );
    }
    if v.is(&[
        "chisel",
        "frp",
        "frpc",
        "frps",
        "ngrok",
        "cloudflared",
        "bore",
        "localtunnel",
    ]) {
        v.hit(
            G,
            r"\b(chisel|frp|ngrok|cloudflared|bore|localtunnel)\b",
            format!("the tunnel `{}`", v.prog),
        );
    }
}

pub(crate) fn packages(v: &mut View<'_>) {
    const G: &str = "package_install";
    let sub = v.first_operand().unwrap_or("").to_owned();
    let pip = v
        .prog
        .strip_prefix("pip")
        .is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'));
    let hit = (pip && matches!(sub.as_str(), "install" | "uninstall"))
        || (v.is(&["npm"])
            && matches!(
                sub.as_str(),
                "install"
                    | "i"
                    | "in"
                    | "ins"
                    | "inst"
                    | "insta"
                    | "instal"
                    | "isnt"
                    | "isnta"
                    | "isntal"
                    | "isntall"
                    | "add"
                    | "uninstall"
                    | "unlink"
                    | "remove"
                    | "rm"
                    | "r"
                    | "un"
            ))
        || (v.is(&["apk"]) && matches!(sub.as_str(), "add" | "del"))
        || (v.is(&["yarn"]) && matches!(sub.as_str(), "add" | "global"))
        || (v.is(&["pnpm"]) && matches!(sub.as_str(), "add" | "install" | "i"))
        || (is_python(v.prog) && v.args.windows(2).any(|w| w[0] == "-m" && w[1] == "pip")
            || is_python(v.prog) && v.any_arg(|a| a == "-mpip"));
    if hit {
        v.hit(
            G,
            r"\bpip3?\s+install\b|\bnpm\s+install\b|…",
            format!("`{} {sub}`", v.prog),
        );
    }
}

pub(crate) fn persistence(v: &mut View<'_>) {
    const G: &str = "persistence";
    if v.is(&["crontab"]) {
        v.hit(G, r"\bcrontab\b", "`crontab`");
    }
    let startup = |t: &str| STARTUP_FILES.contains(&basename(t));
    if v.seg.redirects.iter().any(|r| {
        matches!(
            r.kind,
            RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
        ) && startup(&r.target)
    }) {
        v.hit(
            G,
            r">\s*~/?\.(bashrc|bash_profile|profile|zshrc)",
            "a write to a shell start-up file",
        );
    }
    if v.is(&["tee"]) && v.operands().any(startup) {
        v.hit(
            G,
            r"\btee\b.*\.(bashrc|bash_profile|profile|zshrc)",
            "`tee` into a shell start-up file",
        );
    }
}

pub(crate) fn processes(v: &mut View<'_>) {
    const G: &str = "process_control";
    if v.is(&["kill"]) {
        let mut args = v.args.iter().map(String::as_str);
        let mut nine = false;
        while let Some(a) = args.next() {
            let sig = match a {
                "-s" | "-n" | "--signal" => args.next().unwrap_or(""),
                _ => a.strip_prefix('-').unwrap_or(""),
            };
            nine |= matches!(sig.to_ascii_uppercase().as_str(), "9" | "KILL" | "SIGKILL");
        }
        if nine {
            v.hit(G, r"\bkill\s+-9\s", "`kill -9`");
        }
    }
    if v.is(&["killall", "pkill"]) {
        v.hit(G, r"\b(killall|pkill)\b", format!("`{}`", v.prog));
    }
}

pub(crate) fn env_dump(v: &mut View<'_>) {
    const G: &str = "env_dump";
    if v.is(&["env"]) {
        v.hit(
            G,
            r"^\s*env\s*$",
            "`env` without a command prints the environment",
        );
    }
    if v.is(&["printenv"]) {
        v.hit(G, r"\bprintenv\b", "`printenv`");
    }
    let only_flags = |v: &View<'_>, allowed: &str| {
        !v.args.is_empty()
            && v.args
                .iter()
                .all(|a| a.starts_with('-') && a[1..].chars().all(|c| allowed.contains(c)))
    };
    if v.seg.kind == SegmentKind::Command
        && ((v.is(&["set"]) && v.args.is_empty())
            || (v.is(&["export"]) && (v.args.is_empty() || only_flags(v, "p")))
            || (v.is(&["declare", "typeset"]) && (v.args.is_empty() || only_flags(v, "xp"))))
    {
        v.hit(
            G,
            r"^\s*(set|export\s+-p|declare\s+-x)\s*($|\|)",
            format!("`{}` listing variables", v.prog),
        );
    }
    if v.is(&["compgen"])
        && (v.options().any(|a| short_has(a, "e"))
            || v.args.windows(2).any(|w| w[0] == "-A" && w[1] == "export"))
    {
        v.hit(G, r"\bcompgen\s+-e\b", "`compgen -e`");
    }
    if v.any_word(|w| is_match(&PROC_ENVIRON, w)) {
        v.hit(G, r"/proc/[^/]+/environ", "a process environment file");
    }
    if v.is(&["strings"]) && v.any_arg(|a| a.contains("/proc/")) {
        v.hit(G, r"(?i)\bstrings\b.*/proc/", "`strings` on /proc");
    }
    if v.is(&["echo", "printf"]) && v.any_arg(|a| is_match(&SECRET_VAR, a)) {
        v.hit(
            G,
            r"(?i)\becho\b.*\$\{?GOCLAW_(GATEWAY_TOKEN|ENCRYPTION_KEY|POSTGRES_DSN)",
            "printing a secret variable",
        );
    }
    if is_python(v.prog) && v.any_code(|a| is_match(&PY_ENV, a)) {
        v.hit(
            G,
            r"\bpython[23]?\b.*os\.(environ|getenv).*GOCLAW_",
            "Python reading a secret variable",
        );
    }
    if v.is(&["node"]) && v.any_code(|a| is_match(&NODE_ENV, a)) {
        v.hit(
            G,
            r"\bnode\b.*-e.*process\.env\.GOCLAW_",
            "JavaScript reading a secret variable",
        );
    }
}

/// Checks that need the whole analysis: pipelines into a shell, parameter transformations.
pub(crate) fn whole(analysis: &Analysis, out: &mut Vec<RawHit>) {
    for (i, seg) in analysis.segments.iter().enumerate() {
        let prog = seg.program().unwrap_or("");
        let source = match prog {
            "curl" | "wget" => Some((
                "data_exfiltration",
                r"\bcurl\b.*\|\s*(ba)?sh\b",
                "downloaded code run by a shell",
            )),
            "base64"
                if seg
                    .args()
                    .iter()
                    .any(|a| a == "--decode" || short_has(a, "dD")) =>
            {
                Some((
                    "code_injection",
                    r"\bbase64\s+(-d\w*|--decode)\b.*\|\s*(ba)?sh\b",
                    "decoded text run by a shell",
                ))
            }
            "xxd" if seg.args().iter().any(|a| short_has(a, "r")) => Some((
                "code_injection",
                r"\bbase64\s+(-d\w*|--decode)\b.*\|\s*(ba)?sh\b",
                "decoded text run by a shell",
            )),
            _ => None,
        };
        let Some((group, pattern, why)) = source else {
            continue;
        };
        let piped = seg.pipeline.is_some_and(|p| {
            analysis.segments.iter().skip(i + 1).any(|t| {
                t.pipeline
                    .is_some_and(|q| q.id == p.id && q.index > p.index)
                    && (t.program().is_some_and(is_shell) || t.program().is_some_and(is_python))
            })
        });
        if piped || seg.feeds_shell {
            out.push(RawHit {
                group,
                pattern,
                why: why.to_owned(),
                matched: seg.command_line(),
            });
        }
    }
    for transform in &analysis.transforms {
        out.push(RawHit {
            group: "filter_bypass",
            pattern: r"\$\{[^}]*@[PpEeAaKk]\}",
            why: "a parameter transformation".to_owned(),
            matched: transform.clone(),
        });
    }
    if analysis.is_unknown()
        && (analysis.normalized.contains("/dev/tcp/") || analysis.normalized.contains("/dev/udp/"))
    {
        out.push(RawHit {
            group: "data_exfiltration",
            pattern: "/dev/tcp/",
            why: "a `/dev/tcp` socket in a command that could not be analysed".to_owned(),
            matched: analysis.normalized.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_exec_detection() {
        assert!(sed_executes("s/a/b/e"));
        assert!(sed_executes("1e id"));
        assert!(sed_executes("/x/e rm -rf /"));
        assert!(sed_executes("s|a|b|ge"));
        assert!(!sed_executes("s/e/E/g"));
        assert!(!sed_executes("/foo/d"));
        assert!(!sed_executes("s/a/b/w out.txt"));
        assert!(!sed_executes("-n '/re/{p;q}'"));
        assert!(!sed_executes("y/abc/xyz/"));
    }

    #[test]
    fn sed_script_selection() {
        let args = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(sed_scripts(&args(&["-n", "s/a/b/", "f"])), ["s/a/b/"]);
        assert_eq!(
            sed_scripts(&args(&["-e", "p", "-e", "1e id", "f"])),
            ["p", "1e id"]
        );
        assert_eq!(sed_scripts(&args(&["-ne", "p"])), ["p"]);
        assert!(sed_scripts(&args(&["-f", "x.sed", "in"])).is_empty());
    }
}

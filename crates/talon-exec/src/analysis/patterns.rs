//! The checks behind each GoClaw deny pattern, on one analysed segment.
//!
//! Each check names the GoClaw regular expression it stands for. Checks look at the program
//! (base name after wrappers), its options and operands, its redirections and its assignments,
//! so a pattern's words inside a quoted argument (`echo "rm -rf /"`) do not match and quoting
//! tricks (`r''m`, `\rm`, `env sh -c …`) do not escape.

use std::sync::LazyLock;

use regex::Regex;

use super::deny::RawHit;
use super::longopts;
use super::wrappers::SHELLS;
use super::{RedirectKind, Segment, SegmentKind};
use super::{patterns_misc, patterns_runtime};

pub(crate) fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// A compiled pattern; one that failed to compile matches everything (fail closed).
pub(crate) fn is_match(regex: &LazyLock<Option<Regex>>, text: &str) -> bool {
    regex.as_ref().is_none_or(|r| r.is_match(text))
}

static LOCALHOST: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\b(localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0)\b|\[::1?\]"));
static IPV4: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^\d+\.\d+\.\d+\.\d+$"));
static PY_NET: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"\b(import|from)\s+(socket|http|urllib|requests|httpx|aiohttp)\b|__import__\(\s*['"](socket|http|urllib|requests|httpx|aiohttp)"#,
    )
});
static NODE_NET: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"\b(net\.|http\.|https\.|fetch\(|axios|got\(|undici)|require\s*\(\s*['"](https?|net|dgram)['"]\s*\)"#,
    )
});
static BLOCK_DEVICE: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d)"));
static SYMBOLIC_X: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^[ugoa]*[+=][rwxXst]*x"));

pub(crate) struct View<'a> {
    pub(crate) seg: &'a Segment,
    pub(crate) prog: &'a str,
    pub(crate) args: &'a [String],
    pub(crate) line: String,
    pub(crate) out: &'a mut Vec<RawHit>,
}

impl View<'_> {
    pub(crate) fn hit(
        &mut self,
        group: &'static str,
        pattern: &'static str,
        why: impl Into<String>,
    ) {
        let why = format!("{}{}", why.into(), wrapper_note(self.seg));
        self.out.push(RawHit {
            group,
            pattern,
            why,
            matched: self.line.clone(),
        });
    }

    pub(crate) fn is(&self, names: &[&str]) -> bool {
        names.contains(&self.prog)
    }

    /// Options before `--`.
    pub(crate) fn options(&self) -> impl Iterator<Item = &str> {
        self.args
            .iter()
            .map(String::as_str)
            .take_while(|a| *a != "--")
            .filter(|a| a.starts_with('-') && a.len() > 1)
    }

    /// Arguments that are not options.
    pub(crate) fn operands(&self) -> impl Iterator<Item = &str> {
        let mut after_dashes = false;
        self.args.iter().map(String::as_str).filter(move |a| {
            if after_dashes {
                return true;
            }
            if *a == "--" {
                after_dashes = true;
                return false;
            }
            !(a.starts_with('-') && a.len() > 1)
        })
    }

    pub(crate) fn any_arg(&self, f: impl Fn(&str) -> bool) -> bool {
        self.args.iter().any(|a| f(a))
    }

    /// Every word the command names: arguments, redirection targets, assignment values.
    pub(crate) fn any_word(&self, f: impl Fn(&str) -> bool) -> bool {
        self.any_arg(&f)
            || self.seg.redirects.iter().any(|r| f(&r.target))
            || self.seg.assignments.iter().any(|a| f(&a.value))
    }

    /// Arguments and the text on standard input (`python3 - <<EOF`): the code an interpreter
    /// may run.
    pub(crate) fn any_code(&self, f: impl Fn(&str) -> bool) -> bool {
        self.any_arg(&f)
            || self.seg.redirects.iter().any(|r| {
                matches!(r.kind, RedirectKind::HereDoc | RedirectKind::HereString) && f(&r.target)
            })
    }

    pub(crate) fn first_operand(&self) -> Option<&str> {
        self.operands().next()
    }
}

/// A short option cluster (`-rf`) containing any of `chars`.
pub(crate) fn short_has(arg: &str, chars: &str) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].chars().any(|c| chars.contains(c))
}

/// `--name`, `--name=…` or an unambiguous abbreviation of at least `min` characters.
pub(crate) fn long_is(arg: &str, name: &str, min: usize) -> bool {
    let Some(key) = arg.strip_prefix("--") else {
        return false;
    };
    let key = key.split('=').next().unwrap_or(key);
    key.len() >= min && name.starts_with(key)
}

pub(crate) fn is_python(prog: &str) -> bool {
    prog.strip_prefix("python")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

pub(crate) fn is_shell(prog: &str) -> bool {
    SHELLS.contains(&prog)
}

/// Checks one segment.
pub(crate) fn segment(seg: &Segment, out: &mut Vec<RawHit>) {
    let mut line = seg.command_line();
    if seg.kind == SegmentKind::Assignment {
        line = seg
            .assignments
            .iter()
            .map(|a| format!("{}={}", a.name, a.value))
            .collect::<Vec<_>>()
            .join(" ");
    }
    let mut v = View {
        seg,
        prog: seg.program().unwrap_or(""),
        args: seg.args(),
        line,
        out,
    };
    destructive(&mut v);
    exfiltration(&mut v);
    reverse_shell(&mut v);
    injection(&mut v);
    privilege(&mut v);
    paths(&mut v);
    env_injection(&mut v);
    patterns_misc::container_and_mining(&mut v);
    patterns_misc::filter_bypass(&mut v);
    patterns_misc::recon(&mut v);
    patterns_misc::packages(&mut v);
    patterns_misc::persistence(&mut v);
    patterns_misc::processes(&mut v);
    patterns_misc::env_dump(&mut v);
    patterns_runtime::segment(&mut v);
}

fn wrapper_note(seg: &Segment) -> String {
    let names: Vec<&str> = seg.wrappers.iter().map(|w| w.name.as_str()).collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(", run through `{}`", names.join("` and `"))
    }
}

fn destructive(v: &mut View<'_>) {
    const G: &str = "destructive_ops";
    if v.is(&["rm"]) {
        let flags: Vec<String> = v.options().map(str::to_owned).collect();
        if flags.iter().any(|a| short_has(a, "rRf")) {
            v.hit(
                G,
                r"\brm\s+-[rf]{1,2}\b",
                "`rm` with a recursive or forced option",
            );
        } else if flags
            .iter()
            .any(|a| longopts::may_be(a, "recursive", longopts::RM))
        {
            v.hit(G, r"\brm\s+.*--recursive", "`rm --recursive`");
        } else if flags
            .iter()
            .any(|a| longopts::may_be(a, "force", longopts::RM))
        {
            v.hit(G, r"\brm\s+.*--force", "`rm --force`");
        }
    }
    if v.is(&["del"]) && v.any_arg(|a| matches!(a.to_ascii_lowercase().as_str(), "/f" | "/q")) {
        v.hit(G, r"\bdel\s+/[fq]\b", "`del /f` or `/q`");
    }
    if v.is(&["rmdir"]) && v.any_arg(|a| a.eq_ignore_ascii_case("/s")) {
        v.hit(G, r"\brmdir\s+/s\b", "`rmdir /s`");
    }
    if v.prog == "mkfs"
        || v.prog.starts_with("mkfs.")
        || v.is(&["diskpart"])
        || (v.is(&["format"]) && !v.args.is_empty())
    {
        v.hit(
            G,
            r"\b(mkfs|diskpart)\b|\bformat\s",
            "a disk formatting program",
        );
    }
    if v.is(&["dd"]) && v.any_arg(|a| a.starts_with("if=")) {
        v.hit(G, r"\bdd\s+if=", "`dd if=…`");
    }
    let writes_device = v.seg.redirects.iter().any(|r| {
        matches!(
            r.kind,
            RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
        ) && is_match(&BLOCK_DEVICE, &r.target)
    }) || (v.is(&["tee", "cp", "dd"])
        && v.any_arg(|a| is_match(&BLOCK_DEVICE, a.trim_start_matches("of="))));
    if writes_device {
        v.hit(G, r">\s*/dev/sd[a-z]\b", "a write to a block device");
    }
    if v.is(&["shutdown", "reboot", "poweroff", "halt"]) {
        v.hit(
            G,
            r"\b(shutdown|reboot|poweroff|halt)\b",
            format!("`{}`", v.prog),
        );
    }
    if v.is(&["init", "telinit"]) && v.any_arg(|a| a == "0" || a == "6") {
        v.hit(
            G,
            r"\b(init|telinit)\s+[06]\b",
            "a runlevel change to halt or reboot",
        );
    }
    if v.is(&["systemctl", "loginctl"])
        && v.any_arg(|a| {
            matches!(
                a,
                "suspend"
                    | "hibernate"
                    | "hybrid-sleep"
                    | "suspend-then-hibernate"
                    | "reboot"
                    | "poweroff"
                    | "halt"
                    | "kexec"
            )
        })
    {
        v.hit(
            G,
            r"\bsystemctl\s+(suspend|hibernate)\b",
            "a power-state change",
        );
    }
    if let Some(function) = &v.seg.function
        && v.seg.argv.first().is_some_and(|p| p == function)
    {
        v.hit(
            G,
            r":\(\)\s*\{.*\};\s*:",
            format!("the function `{function}` calls itself (a fork bomb)"),
        );
    }
}

fn exfiltration(v: &mut View<'_>) {
    const G: &str = "data_exfiltration";
    if v.is(&["curl"]) {
        let mut upload = false;
        let mut args = v
            .args
            .iter()
            .map(String::as_str)
            .take_while(|a| *a != "--")
            .peekable();
        while let Some(a) = args.next() {
            if a.starts_with("--") {
                if ["--data", "--upload", "--form", "--json"]
                    .iter()
                    .any(|p| a.starts_with(p))
                {
                    upload = true;
                }
                if long_is(a, "request", 4) {
                    let method = a
                        .split_once('=')
                        .map(|(_, m)| m)
                        .or_else(|| args.peek().copied());
                    upload |= method.is_some_and(is_write_method);
                }
            } else if a.starts_with('-') && a.len() > 1 {
                for (i, c) in a[1..].char_indices() {
                    match c {
                        'd' | 'F' | 'T' => {
                            upload = true;
                            break;
                        }
                        'X' => {
                            let rest = &a[1 + i + 1..];
                            let method = if rest.is_empty() {
                                args.peek().copied()
                            } else {
                                Some(rest)
                            };
                            upload |= method.is_some_and(is_write_method);
                            break;
                        }
                        c if "AbcCDeEHKmoPQrtuUwxyYz".contains(c) => break,
                        _ => {}
                    }
                }
            }
        }
        if upload {
            v.hit(
                G,
                r"\bcurl\b.*(-d\b|-F\b|--data|--upload|--form|-T\b|(-X|--request)\s*P(UT|OST|ATCH))",
                "`curl` sending data",
            );
        }
    }
    if v.is(&["wget"])
        && v.any_arg(|a| {
            ["--post-data", "--post-file", "--body-data", "--body-file"]
                .iter()
                .any(|p| a.starts_with(p))
                || a.strip_prefix("--method=").is_some_and(is_write_method)
        })
    {
        v.hit(
            G,
            r"\bwget\b.*(--post-(data|file)|--method=P(UT|OST|ATCH)|--body-data)",
            "`wget` sending data",
        );
    }
    if v.is(&["nslookup", "dig", "host"]) {
        v.hit(
            G,
            r"\b(nslookup|dig|host)\b",
            "a DNS lookup tool (a DNS exfiltration channel)",
        );
    }
    if v.seg
        .redirects
        .iter()
        .any(|r| r.target.contains("/dev/tcp/") || r.target.contains("/dev/udp/"))
    {
        v.hit(G, "/dev/tcp/", "a redirection to `/dev/tcp` or `/dev/udp`");
    }
    if v.is(&["curl", "wget"]) && v.any_arg(|a| is_match(&LOCALHOST, a)) {
        v.hit(
            G,
            r"\b(curl|wget)\b.*\blocalhost\b",
            "a request to a loopback address",
        );
    }
}

fn is_write_method(method: &str) -> bool {
    matches!(
        method.to_ascii_uppercase().as_str(),
        "PUT" | "POST" | "PATCH"
    )
}

fn reverse_shell(v: &mut View<'_>) {
    const G: &str = "reverse_shell";
    if v.is(&["nc", "ncat", "netcat", "nc.traditional", "nc.openbsd"])
        && v.any_arg(|a| {
            (a.starts_with('-') && a[1..].starts_with(|c: char| c.is_ascii_lowercase()))
                || is_match(&IPV4, a)
                || a == "localhost"
        })
    {
        v.hit(
            G,
            r"\b(nc|ncat|netcat)\b.*(\s+-[a-z]|\s+\d+\.\d+\.\d+\.\d+|\s+localhost\b)",
            format!("`{}`", v.prog),
        );
    }
    if v.is(&["socat"]) {
        v.hit(G, r"\bsocat\b", "`socat`");
    }
    if v.is(&["openssl"]) && v.any_arg(|a| a == "s_client") {
        v.hit(G, r"\bopenssl\b.*s_client", "`openssl s_client`");
    }
    if v.is(&["telnet"]) && v.any_arg(|a| a.chars().any(|c| c.is_ascii_digit())) {
        v.hit(G, r"\btelnet\b.*\d+", "`telnet`");
    }
    if is_python(v.prog) && v.any_code(|a| is_match(&PY_NET, a)) {
        v.hit(
            G,
            r"\bpython[23]?\b.*(import|from)\s+(socket|http|urllib|requests|httpx|aiohttp)\b",
            "Python code importing a network module",
        );
    }
    let inline = |v: &View<'_>, flags: &[&str]| {
        v.options()
            .any(|a| flags.contains(&a) || (short_has(a, "eE") && !a.starts_with("--")))
    };
    if v.is(&["perl"])
        && inline(v, &["-e", "-E"])
        && v.any_arg(|a| a.contains("Socket") || a.contains("socket"))
    {
        v.hit(
            G,
            r"\bperl\b.*-e\s*.*\b[Ss]ocket\b",
            "Perl code using sockets",
        );
    }
    if v.is(&["ruby"]) && inline(v, &["-e"]) && v.any_arg(|a| a.contains("Socket")) {
        v.hit(
            G,
            r"\bruby\b.*-e\s*.*\b(TCPSocket|Socket)\b",
            "Ruby code using sockets",
        );
    }
    if v.is(&["node", "nodejs", "bun", "deno"])
        && v.options().any(|a| {
            matches!(a, "-e" | "--eval" | "-p" | "--print" | "-pe") || a.starts_with("--eval=")
        })
        && v.any_arg(|a| is_match(&NODE_NET, a))
    {
        v.hit(
            G,
            r"\bnode\b.*-e\s*.*\b(net\.|http\.|https\.|fetch\(|axios|got\(|undici)\b",
            "JavaScript code using the network",
        );
    }
    if v.is(&["awk", "gawk", "mawk", "nawk"]) && v.any_arg(|a| a.contains("/inet/")) {
        v.hit(G, r"\bawk\b.*/inet/", "`awk` with a network special file");
    }
    if v.is(&["mkfifo"]) || (v.is(&["mknod"]) && v.any_arg(|a| a == "p")) {
        v.hit(
            G,
            r"\bmkfifo\b",
            "a named pipe (used to wire shells to sockets)",
        );
    }
}

fn injection(v: &mut View<'_>) {
    const G: &str = "code_injection";
    if v.is(&["eval"])
        && (0..v.args.len()).any(|i| v.seg.is_dynamic(i + 1) || v.args[i].contains('$'))
    {
        v.hit(G, r"\beval\s*\$", "`eval` of expanded text");
    }
}

fn privilege(v: &mut View<'_>) {
    const G: &str = "privilege_escalation";
    const PROGRAMS: &[&str] = &[
        "sudo", "su", "doas", "pkexec", "runuser", "nsenter", "unshare", "mount", "umount",
        "capsh", "setcap", "getcap",
    ];
    if v.is(PROGRAMS) {
        v.hit(
            G,
            r"\b(sudo|su|doas|pkexec|runuser|nsenter|unshare|mount|umount|capsh|setcap|getcap)\b",
            format!("`{}`", v.prog),
        );
    }
    if let Some(w) = v
        .seg
        .wrappers
        .iter()
        .find(|w| PROGRAMS.contains(&w.name.as_str()))
    {
        let why = format!("run through `{}`", w.name);
        v.hit(G, r"\bsudo\b", why);
    }
}

fn paths(v: &mut View<'_>) {
    const G: &str = "dangerous_paths";
    if v.is(&["chmod"]) {
        let operands: Vec<String> = v.operands().map(str::to_owned).collect();
        let (mode, files) = operands
            .split_first()
            .map_or(("", &[][..]), |(m, f)| (m.as_str(), f));
        let octal =
            (3..=4).contains(&mode.len()) && mode.bytes().all(|b| (b'0'..=b'7').contains(&b));
        if octal && files.iter().any(|f| f.starts_with('/')) {
            v.hit(
                G,
                r"\bchmod\s+[0-7]{3,4}\s+/",
                "`chmod` with a numeric mode on an absolute path",
            );
        }
        let exec =
            mode.split(',').any(|m| is_match(&SYMBOLIC_X, m)) || v.options().any(|o| o == "+x");
        if exec
            && files.iter().any(|f| {
                ["/tmp/", "/var/tmp/", "/dev/shm/"]
                    .iter()
                    .any(|p| f.starts_with(p))
            })
        {
            v.hit(
                G,
                r"\bchmod\b.*\+x.*/tmp/",
                "making a file in a temporary directory executable",
            );
        }
    }
    if v.is(&["chown", "chgrp"]) && v.operands().skip(1).any(|f| f.starts_with('/')) {
        v.hit(
            G,
            r"\bchown\b.*\s+/",
            "changing ownership of an absolute path",
        );
    }
}

fn env_injection(v: &mut View<'_>) {
    const G: &str = "env_injection";
    const NAMES: &[&str] = &[
        "LD_PRELOAD",
        "DYLD_INSERT_LIBRARIES",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "GIT_EXTERNAL_DIFF",
        "GIT_DIFF_OPTS",
        "BASH_ENV",
        "ENV",
    ];
    let assigned: Vec<String> = v
        .seg
        .assignments
        .iter()
        .map(|a| a.name.split('[').next().unwrap_or("").to_owned())
        .filter(|n| NAMES.contains(&n.as_str()))
        .collect();
    let shell = is_shell(v.prog) || v.seg.wrappers.iter().any(|w| is_shell(&w.name));
    for name in assigned {
        let value = v
            .seg
            .assignments
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.clone());
        // GoClaw: `ENV=… sh`; ENV is read by sh, so other programs' ENV=production passes.
        if name == "ENV" && !shell && !value.is_some_and(|val| val.contains("sh")) {
            continue;
        }
        v.hit(G, r"\bLD_PRELOAD\s*=", format!("setting `{name}`"));
    }
    if v.any_word(|w| w.contains("/etc/ld.so.preload")) {
        v.hit(G, r"/etc/ld\.so\.preload", "`/etc/ld.so.preload`");
    }
    if v.is(&["export", "declare", "typeset", "readonly", "local"]) {
        let exported = v.args.iter().find(|a| {
            let name = a.split('=').next().unwrap_or("");
            name.starts_with("LD_")
                || name.starts_with("DYLD_")
                || name == "BASH_ENV"
                || name == "PROMPT_COMMAND"
                || (name == "ENV" && a.contains('='))
        });
        if let Some(name) = exported.cloned() {
            v.hit(G, r"\bexport\s+LD_", format!("exporting `{name}`"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_helpers() {
        assert!(short_has("-rf", "r"));
        assert!(!short_has("--rf", "r"));
        assert!(long_is("--rec", "recursive", 3));
        assert!(long_is("--force=1", "force", 3));
        assert!(!long_is("--re", "recursive", 3));
        assert!(is_python("python3.12"));
        assert!(!is_python("pythonista"));
    }
}

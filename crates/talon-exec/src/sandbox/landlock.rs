//! The Landlock + seccomp backend, for hosts where bubblewrap cannot create namespaces
//! (unprivileged containers, Ubuntu's AppArmor user-namespace restriction).
//!
//! Landlock confines a process and everything it executes from then on, so it has to be applied
//! in the child, before `exec`. Doing that in `pre_exec` is not an option: the child of a
//! multi-threaded process must not allocate between `fork` and `exec`, and building a ruleset
//! opens and allocates. So, as OpenAI Codex's `codex-linux-sandbox` did, the command line is
//! wrapped in a helper program — Talon's own binary, `talon __sandbox-landlock` — which reads
//! its policy from its arguments, confines itself ([`super::confine`]) and then `exec`s the
//! command:
//!
//! ```text
//! talon __sandbox-landlock [--report] --network off|on [--write DIR]… [--hide PATH]… [--tmp DIR] -- PROGRAM ARGS…
//! ```
//!
//! What it enforces: the host read-only (read and execute), the writable roots and a private
//! scratch directory (`TMPDIR`) read-write, `/dev` reduced to `null`, `zero`, `full`, `random`
//! and `urandom`, the hidden paths' contents unreadable, capabilities dropped, `no_new_privs`,
//! and the same seccomp filter as bubblewrap's (no sockets at all with the network off). On
//! kernels with Landlock ABI ≥ 4 TCP bind/connect is denied as well with the network off, and
//! with ABI ≥ 6 signals and abstract Unix sockets cannot reach outside the sandbox.
//!
//! Its known limits (also printed by `talon doctor`):
//! * paths inside a writable root cannot be re-protected: `.git/hooks`, `.git/config`, shell rc
//!   files, `.mcp.json` and the other [`super::PROTECTED`] names stay writable, and `.git` can
//!   be renamed and replaced (the file tools' jail still refuses them). What a command creates
//!   under a protected name that was missing is removed when it ends;
//! * Landlock only adds permissions, it cannot subtract one path from a readable tree. Hidden
//!   paths are kept out by granting read on everything around them instead: the tree from `/`
//!   is split, directory by directory, along the way to each hidden path, and every sibling
//!   is granted on its own. Directory listings stay allowed everywhere, so a hidden directory's
//!   file *names* can be listed, never their contents. Files created later in a split
//!   directory, and hard links to hidden files elsewhere, are not covered;
//! * no PID, mount or network namespace: the host's processes are visible in `/proc` (Landlock
//!   still refuses to ptrace or signal them), `/tmp` is the host's (read-only; use `TMPDIR`),
//!   and network mode `proxy` is refused (nothing would force connections through the proxy).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::network::Network;
use super::protected::{Protection, protected_paths};
use super::{Placeholders, Policy, Sandbox, SandboxError, Wrapped};

pub use super::confine::helper_main;

/// The hidden subcommand of Talon's binary that confines itself and executes the command.
pub const SUBCOMMAND: &str = "__sandbox-landlock";

/// The kernel's Landlock ABI version, or why there is none (not built in, or not enabled in
/// the `lsm=` boot parameter).
pub fn abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_ulong = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only
    // returns the ABI version; no memory is read or written.
    let version = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version > 0 {
        return u32::try_from(version).map_err(|e| e.to_string());
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(nix::libc::EOPNOTSUPP) => Err(
            "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)"
                .into(),
        ),
        _ => Err("this kernel has no Landlock (it needs Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK=y)".into()),
    }
}

/// What the helper is told to enforce: the argument list of [`SUBCOMMAND`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Directories writable beneath (the workspace, configured roots).
    pub writable: Vec<PathBuf>,
    /// Paths whose contents must stay unreadable.
    pub hidden: Vec<PathBuf>,
    /// Whether inet sockets are allowed (network mode `host`).
    pub network: bool,
    /// A private scratch directory, writable and handed to the command as `TMPDIR`.
    pub tmp: Option<PathBuf>,
    /// Print what was enforced (ABI, status) to stderr before executing the command.
    pub report: bool,
}

impl Confinement {
    /// The helper's arguments for `argv` (after the subcommand name).
    pub fn to_args(&self, argv: &[OsString]) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if self.report {
            args.push("--report".into());
        }
        args.push("--network".into());
        args.push(if self.network { "on" } else { "off" }.into());
        let paths = [("--write", &self.writable), ("--hide", &self.hidden)];
        for (flag, list) in paths {
            for path in list {
                args.push(flag.into());
                args.push(path.into());
            }
        }
        if let Some(tmp) = &self.tmp {
            args.push("--tmp".into());
            args.push(tmp.into());
        }
        args.push("--".into());
        args.extend(argv.iter().cloned());
        args
    }

    /// Parses the helper's arguments (after the subcommand name): the confinement and the
    /// command line to execute.
    pub fn parse(args: &[OsString]) -> Result<(Self, Vec<OsString>), String> {
        let mut out = Self::default();
        let mut network = None;
        let mut rest = args.iter();
        let value = |flag: &str, rest: &mut std::slice::Iter<'_, OsString>| {
            rest.next()
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        while let Some(arg) = rest.next() {
            match arg.to_str() {
                Some("--report") => out.report = true,
                Some("--network") => {
                    network = match value("--network", &mut rest)?.to_str() {
                        Some("on") => Some(true),
                        Some("off") => Some(false),
                        other => return Err(format!("--network {other:?}: use on or off")),
                    }
                }
                Some("--write") => out.writable.push(value("--write", &mut rest)?.into()),
                Some("--hide") => out.hidden.push(value("--hide", &mut rest)?.into()),
                Some("--tmp") => out.tmp = Some(value("--tmp", &mut rest)?.into()),
                Some("--") => break,
                _ => return Err(format!("unexpected argument {arg:?}")),
            }
        }
        out.network = network.ok_or("--network on|off is required")?;
        let argv: Vec<OsString> = rest.cloned().collect();
        if argv.is_empty() {
            return Err("no command after --".into());
        }
        Ok((out, argv))
    }
}

/// A Landlock-capable kernel and a helper program that confines itself there.
#[derive(Debug, Clone)]
pub struct Landlock {
    helper: PathBuf,
    abi: u32,
    report: String,
}

/// Probe results per helper program (in practice one per process).
static PROBES: Mutex<Vec<(PathBuf, Result<Landlock, SandboxError>)>> = Mutex::new(Vec::new());

impl Landlock {
    /// Checks once per helper program that the kernel has Landlock and that the helper can
    /// confine itself and execute a command (`/bin/true`), so a host where either fails refuses
    /// commands with the reason.
    pub fn probe(helper: &Path) -> Result<Self, SandboxError> {
        let mut probes = PROBES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, result)) = probes.iter().find(|(h, _)| h == helper) {
            return result.clone();
        }
        let result = Self::probe_uncached(helper);
        probes.push((helper.to_path_buf(), result.clone()));
        result
    }

    fn probe_uncached(helper: &Path) -> Result<Self, SandboxError> {
        let abi = abi().map_err(SandboxError::Unavailable)?;
        let confinement = Confinement {
            report: true,
            ..Confinement::default()
        };
        let output = std::process::Command::new(helper)
            .arg(SUBCOMMAND)
            .args(confinement.to_args(&["/bin/true".into()]))
            .env_clear()
            .current_dir("/")
            .output()
            .map_err(|e| {
                SandboxError::Unavailable(format!(
                    "cannot run the Landlock helper {}: {e}",
                    helper.display()
                ))
            })?;
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if !output.status.success() {
            return Err(SandboxError::Unavailable(format!(
                "the Landlock helper {} failed ({}): {stderr}",
                helper.display(),
                output.status
            )));
        }
        Ok(Self {
            helper: helper.to_path_buf(),
            abi,
            report: stderr,
        })
    }

    /// The kernel's Landlock ABI version.
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// What the helper reported enforcing when probed (ABI, status, seccomp).
    pub fn report(&self) -> &str {
        &self.report
    }

    /// The helper program.
    pub fn helper(&self) -> &Path {
        &self.helper
    }
}

/// The directory every command's scratch directory is made in. Commands never get to read it
/// (it is hidden from the read grants), only their own scratch directory beneath it, so one
/// user's command cannot read another's running command's files (issue 35).
fn scratch_parent() -> PathBuf {
    std::env::temp_dir().join("talon-landlock")
}

/// A fresh private directory (mode 0700) in [`scratch_parent`].
fn scratch_dir() -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let base = scratch_parent();
    let failed = |e: std::io::Error| {
        SandboxError::Policy(format!(
            "cannot create a scratch directory in {}: {e}",
            base.display()
        ))
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(e)),
    }
    // Another user of the host may have made it first: it must be ours, a real directory.
    let meta = std::fs::symlink_metadata(&base).map_err(failed)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(SandboxError::Policy(format!(
            "{} is not a directory of this user; remove it so Talon can make its own",
            base.display()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    let dir = base.join(format!("{:016x}", crate::random_u64()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(failed)?;
    Ok(dir)
}

impl Sandbox for Landlock {
    fn name(&self) -> &'static str {
        "landlock"
    }

    fn wrap(
        &self,
        policy: &Policy,
        _cwd: &Path,
        argv: &[OsString],
    ) -> Result<Wrapped, SandboxError> {
        let network = match &policy.network {
            Network::None => false,
            Network::Host => true,
            Network::Proxy { .. } => {
                return Err(SandboxError::Network(
                    "network = \"proxy\" needs the bubblewrap backend: without a network namespace \
                     nothing forces a command's connections through the proxy"
                        .into(),
                ));
            }
        };
        for root in &policy.writable_roots {
            if !root.is_dir() {
                return Err(SandboxError::Policy(format!(
                    "writable root {} is not a directory",
                    root.display()
                )));
            }
        }
        let tmp = scratch_dir()?;
        let mut hidden = policy.hidden.clone();
        hidden.push(scratch_parent());
        let confinement = Confinement {
            writable: policy.writable_roots.clone(),
            hidden,
            network,
            tmp: Some(tmp.clone()),
            report: false,
        };
        let mut args: Vec<OsString> = vec![self.helper.clone().into(), SUBCOMMAND.into()];
        args.extend(confinement.to_args(argv));
        let mut placeholders = Placeholders::default();
        placeholders.scratch(tmp);
        // Landlock cannot keep a protected name from being created inside a writable root; what
        // a command created under a missing one is removed once it has ended, as after
        // bubblewrap's foreground commands.
        for root in &policy.writable_roots {
            for protection in protected_paths(root) {
                if let Protection::Pin(path) | Protection::Absent(path) = protection {
                    placeholders.unpinned(root, path);
                }
            }
        }
        Ok(Wrapped {
            argv: args,
            pass_fds: Vec::new(),
            placeholders,
        })
    }
}

/// Whether `arg` (the first argument of Talon's binary) names the helper.
pub fn is_helper(arg: &OsStr) -> bool {
    arg == SUBCOMMAND
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_round_trip() {
        let c = Confinement {
            writable: vec!["/ws".into(), "/cache".into()],
            hidden: vec!["/data".into()],
            network: false,
            tmp: Some("/tmp/t".into()),
            report: true,
        };
        let argv = os(&["/bin/sh", "-c", "echo --write x"]);
        let args = c.to_args(&argv);
        assert_eq!(
            args,
            os(&[
                "--report",
                "--network",
                "off",
                "--write",
                "/ws",
                "--write",
                "/cache",
                "--hide",
                "/data",
                "--tmp",
                "/tmp/t",
                "--",
                "/bin/sh",
                "-c",
                "echo --write x"
            ])
        );
        assert_eq!(Confinement::parse(&args).expect("parses"), (c, argv));
        for bad in [
            &["--write", "/ws", "--", "x"][..],
            &["--network", "maybe", "--", "x"],
            &["--network", "off", "--"],
            &["--network", "off", "--write"],
            &["--bogus"],
        ] {
            assert!(Confinement::parse(&os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn proxy_mode_is_refused() {
        let l = Landlock {
            helper: "/bin/true".into(),
            abi: 1,
            report: String::new(),
        };
        let policy = Policy {
            network: Network::Proxy {
                socket: "/s".into(),
                helper: "/h".into(),
            },
            ..Policy::default()
        };
        let err = l
            .wrap(&policy, Path::new("/"), &os(&["true"]))
            .expect_err("refused");
        assert!(matches!(err, SandboxError::Network(_)), "{err}");
    }

    /// `sh -c true` wrapped by a Landlock backend whose helper is `/usr/bin/talon`, writing `ws`.
    fn wrap_true_in(ws: &Path) -> Wrapped {
        let l = Landlock {
            helper: "/usr/bin/talon".into(),
            abi: 7,
            report: String::new(),
        };
        let policy = Policy {
            writable_roots: vec![ws.to_path_buf()],
            ..Policy::default()
        };
        l.wrap(&policy, ws, &os(&["sh", "-c", "true"]))
            .expect("wraps")
    }

    #[test]
    fn the_wrapper_names_the_helper_and_a_private_tmp() {
        let ws = tempfile::tempdir().expect("dir");
        let wrapped = wrap_true_in(ws.path());
        assert_eq!(wrapped.argv[..2], os(&["/usr/bin/talon", SUBCOMMAND])[..]);
        let (c, argv) = Confinement::parse(&wrapped.argv[2..]).expect("parses");
        assert_eq!(argv, os(&["sh", "-c", "true"]));
        assert_eq!(c.writable, vec![ws.path().to_path_buf()]);
        let tmp = c.tmp.expect("a scratch directory");
        assert!(tmp.is_dir());
        wrapped.placeholders.remove();
        assert!(!tmp.exists(), "the scratch directory is removed afterwards");
    }

    #[test]
    fn h21_03_protected_names_a_command_created_are_removed() {
        let ws = tempfile::tempdir().expect("dir");
        let wrapped = wrap_true_in(ws.path());
        // What the command did: a repository and an MCP configuration where there were none.
        std::fs::create_dir_all(ws.path().join(".git/hooks")).expect("git");
        std::fs::write(ws.path().join(".git/hooks/pre-commit"), "x").expect("hook");
        std::fs::write(ws.path().join(".mcp.json"), "{}").expect("mcp");
        std::fs::write(ws.path().join("kept.txt"), "x").expect("file");
        let removed = wrapped.placeholders.remove();
        assert!(removed.contains(&ws.path().join(".git")), "{removed:?}");
        assert!(
            removed.contains(&ws.path().join(".mcp.json")),
            "{removed:?}"
        );
        assert!(!ws.path().join(".git").exists());
        assert!(ws.path().join("kept.txt").exists());
    }
}

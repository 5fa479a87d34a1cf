//! OS sandboxes for commands: the security boundary.
//!
//! Command analysis and approvals decide when to ask a person; what a command can actually touch
//! is decided here, by the kernel. A [`Sandbox`] turns a command line into one that runs confined
//! by a [`Policy`]: the writable roots, paths hidden from it, and whether it has a network. If the
//! configured sandbox cannot start, the call is refused (see [`SandboxError`]); running on the
//! host happens only when the operator set the mode to `off`, never because a model asked.
//!
//! Backends ([`select`]): bubblewrap (namespaces; the strongest), Landlock + seccomp through
//! Talon's own binary as a helper ([`landlock`]; for hosts without user namespaces, with known
//! limits), and a Docker container spec ([`docker`]; refuses commands until an engine path
//! exists).
//!
//! Inside the namespaces a seccomp filter (`seccomp.rs`) refuses the system calls that could undo
//! them: io_uring, ptrace, mounts, new user or mount namespaces, and the socket families the
//! network mode does not allow. The network itself — none, Talon's filtering proxy, or the
//! host's — is [`network`]'s business.

mod bwrap;
mod confine;
pub mod credentials;
pub mod diagnose;
pub mod docker;
pub mod landlock;
mod net_helper;
mod net_session;
pub mod network;
pub(crate) mod protected;
mod seccomp;
mod select;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use bwrap::Bubblewrap;
pub use confine::deny_all_access;
pub use credentials::CredentialHiding;
pub use net_helper::{HELPER_FAILED, helper_main};
pub use network::{
    HELPER_SUBCOMMAND, Network, NetworkLists, NetworkMode, NetworkPolicy, NetworkPolicyError,
    NetworkReport,
};
pub use protected::{PROTECTED, Protection, protected_paths, removal_note};
pub use seccomp::seccomp_program;
pub use select::{Backend, Selected, reason, refuse_shared_landlock, select};

/// Which calls run sandboxed (GoClaw's modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Every command on the host. Only an operator can choose this.
    Off,
    /// Every agent but `main` and `default`.
    NonMain,
    /// Every command (the default).
    #[default]
    All,
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "non-main" => Ok(Self::NonMain),
            "all" => Ok(Self::All),
            other => Err(format!(
                "unknown sandbox mode {other:?}: use \"all\" (the default), \"non-main\" or \"off\""
            )),
        }
    }
}

impl SandboxMode {
    /// Whether a call by `agent` runs sandboxed.
    pub fn applies_to(self, agent: Option<&str>) -> bool {
        match self {
            Self::Off => false,
            Self::All => true,
            Self::NonMain => !matches!(agent, None | Some("main" | "default")),
        }
    }
}

/// What one sandboxed command may do.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Directories the command may write (the workspace first); everything else is read-only.
    pub writable_roots: Vec<PathBuf>,
    /// Paths the command must not see at all (Talon's data directory and configuration, the
    /// host's credential stores).
    pub hidden: Vec<PathBuf>,
    /// The command's network. [`Network::None`]: its own empty network namespace, and the
    /// seccomp filter refuses every socket, `AF_UNIX` included (a host Unix socket is reached
    /// by its path; `socketpair` stays allowed). Otherwise `AF_UNIX`, `AF_INET`/`AF_INET6` and
    /// `NETLINK_ROUTE` sockets: reaching only the sandbox's loopback and the proxy's bridge
    /// ([`Network::Proxy`], whose helper refuses `AF_UNIX` again to the command), or the
    /// host's network ([`Network::Host`]).
    pub network: Network,
    /// Do not pin missing protected names with placeholder files; whatever a command created
    /// under them is removed once it has ended instead ([`Placeholders::remove`]). Foreground
    /// commands set this: a pin costs a bind mount (bubblewrap re-reads the mount table for
    /// each: about 0.2 ms apiece, most of a one-shot sandbox's set-up), and a session
    /// sandbox's mounts outlive its commands. Background commands keep the pins: they may run
    /// on while the user runs git or opens a shell on the host.
    pub skip_pins: bool,
}

/// Why a sandboxed command could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The backend is not installed or cannot create namespaces here.
    #[error(
        "sandbox unavailable: {0}; the command was not run (Talon never falls back to running it unsandboxed; an operator can set [exec] sandbox = \"off\" to run commands on the host)"
    )]
    Unavailable(String),
    /// The policy cannot be expressed (a writable root that does not exist, …).
    #[error("sandbox policy error: {0}")]
    Policy(String),
    /// The configured network mode cannot be set up (no helper program, the proxy cannot
    /// start). The command is refused rather than run with another network.
    #[error("sandbox network unavailable: {0}; the command was not run")]
    Network(String),
}

/// A way to confine a command.
pub trait Sandbox: Send + Sync + std::fmt::Debug {
    /// The backend's name (`bubblewrap`, …).
    fn name(&self) -> &'static str;

    /// The command line that runs `argv` in `cwd` confined by `policy`, with what it needs
    /// alongside (see [`Wrapped`]).
    fn wrap(&self, policy: &Policy, cwd: &Path, argv: &[OsString])
    -> Result<Wrapped, SandboxError>;
}

/// A command line confined by a sandbox, and what has to live beside it.
#[derive(Debug)]
#[must_use = "the placeholders must be removed after the command"]
pub struct Wrapped {
    /// The command line to spawn.
    pub argv: Vec<OsString>,
    /// Descriptors `argv` names by number (bwrap reads its seccomp filter from `--seccomp FD`).
    /// The spawned child must inherit them at those numbers: hand them to
    /// [`Job::pass_fds`](crate::Job::pass_fds). They are close-on-exec everywhere else.
    pub pass_fds: Vec<Arc<OwnedFd>>,
    /// Files to remove once the command has ended.
    pub placeholders: Placeholders,
}

/// What to clean up in the writable roots once a sandboxed command has ended.
///
/// - Empty files the sandbox created to pin a protected name that did not exist (a `.mcp.json`
///   the command must not create), removed if they are still empty files.
/// - Protected names left unpinned (a policy with [`Policy::skip_pins`]): whatever the command
///   created under them is removed, and [`Placeholders::remove`] says which, so the model can
///   be told.
/// - The private scratch directories a backend made for the command (Landlock's `TMPDIR`),
///   removed whole.
#[derive(Debug, Default)]
#[must_use = "placeholders must be removed after the command"]
pub struct Placeholders {
    /// The writable roots the pins and unpinned names lie in: removals are relative to them.
    roots: Vec<PathBuf>,
    pins: Vec<PathBuf>,
    /// Placeholders holding harmless content (a `commondir` of `.`), with that content.
    seeds: Vec<(PathBuf, &'static [u8])>,
    unpinned: Vec<PathBuf>,
    scratch: Vec<PathBuf>,
}

impl Placeholders {
    /// Registers an empty file the sandbox pins a missing protected name in writable `root`
    /// with.
    pub fn pin(&mut self, root: &Path, path: PathBuf) {
        self.root(root);
        self.pins.push(path);
    }

    /// Pins the missing protected `path` in writable `root` with a placeholder that reads as
    /// harmless to the programs outside ([`protected::seed`]), for the sandbox to bind
    /// read-only; false if there is no such placeholder (then leave it unpinned).
    pub fn seed(&mut self, root: &Path, path: &Path) -> bool {
        match protected::seed(root, path) {
            Some(content) => {
                self.root(root);
                self.seeds.push((path.to_path_buf(), content));
                true
            }
            None => false,
        }
    }

    /// Registers a missing protected name in writable `root` the sandbox leaves unpinned:
    /// removed after the command if the command created it.
    pub fn unpinned(&mut self, root: &Path, path: PathBuf) {
        self.root(root);
        self.unpinned.push(path);
    }

    fn root(&mut self, root: &Path) {
        if !self.roots.iter().any(|r| r == root) {
            self.roots.push(root.to_path_buf());
        }
    }

    /// Registers a scratch directory to remove, with its contents, after the command.
    pub fn scratch(&mut self, dir: PathBuf) {
        self.scratch.push(dir);
    }

    /// The pinned names (for tests and diagnostics).
    pub fn pinned(&self) -> &[PathBuf] {
        &self.pins
    }

    /// Removes the placeholders that are still empty regular files, the scratch directories
    /// and whatever the command created under an unpinned protected name; returns the
    /// protected names it removed. Removals in the writable roots are fd-relative and follow
    /// no symlink ([`talon_fs::remove_beneath`]): the command may have planted one anywhere.
    pub fn remove(self) -> Vec<PathBuf> {
        for dir in self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        for path in &self.pins {
            protected::remove_pin(&self.roots, path);
        }
        for (path, content) in &self.seeds {
            protected::remove_seed(&self.roots, path, content);
        }
        protected::remove_created(&self.roots, &self.unpinned)
    }
}

/// The sandbox this host supports, or why there is none.
pub fn detect() -> Result<Bubblewrap, SandboxError> {
    Bubblewrap::probe()
}

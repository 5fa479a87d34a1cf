//! Running shell commands for Talon's tools.
//!
//! * [`run`] — one command in its own process group: capped capture, timeout and cancellation
//!   that take the whole group down, resource limits.
//! * [`sandbox`] — the OS sandbox (bubblewrap), the security boundary; fails closed.
//! * [`env`] — the allowlisted environment; Talon's secrets never reach a command.
//! * [`cap`] — the caps on what the model sees.
//!
//! [`Shell`] puts them together: the tools (`exec`, `Bash`) hand it a command, a working
//! directory and a workspace, and get back an [`Outcome`] or the reason nothing ran.

pub mod background;
pub mod cap;
pub mod env;
pub mod run;
pub mod sandbox;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use background::{Background, BackgroundError, Status, TaskInfo};
pub use env::{ChildEnv, EnvError};
pub use run::{Ending, Job, Limits, Outcome, RunError};
pub use sandbox::{Placeholders, Policy, Sandbox, SandboxError, SandboxMode, Wrapped};

/// How commands run: sandbox mode, environment, limits, and what the sandbox hides.
#[derive(Debug, Clone, Default)]
pub struct ShellConfig {
    pub mode: SandboxMode,
    pub env: ChildEnv,
    pub limits: Limits,
    /// Hidden from sandboxed commands (Talon's data directory and configuration file).
    pub hidden: Vec<PathBuf>,
    /// Writable besides the call's workspace.
    pub extra_writable: Vec<PathBuf>,
    /// Sandboxed commands get a network (off by default).
    pub network: bool,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The shell that interprets `command` (`/bin/sh` for `exec`, `bash` for `Bash`).
    pub shell: &'a Path,
    pub command: &'a str,
    /// Where it starts; inside `workspace`.
    pub cwd: &'a Path,
    /// The call's workspace: writable, and the root of the protected paths.
    pub workspace: &'a Path,
    /// The calling agent (selects the sandbox under `non-main`).
    pub agent: Option<&'a str>,
    pub timeout: Duration,
}

/// Why a command did not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Background(#[from] BackgroundError),
}

/// Runs commands under a [`ShellConfig`], and keeps the background ones.
#[derive(Debug, Clone, Default)]
pub struct Shell {
    config: ShellConfig,
    background: Arc<Background>,
}

impl Shell {
    pub fn new(config: ShellConfig) -> Self {
        Self {
            config,
            background: Arc::default(),
        }
    }

    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// The background commands started through this shell.
    pub fn background(&self) -> &Background {
        &self.background
    }

    /// The sandbox a call by `agent` runs in: `None` when the mode exempts it, an error when it
    /// should be sandboxed and cannot be.
    pub fn sandbox_for(
        &self,
        agent: Option<&str>,
    ) -> Result<Option<sandbox::Bubblewrap>, SandboxError> {
        if self.config.mode.applies_to(agent) {
            sandbox::detect().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The job that runs `request` (wrapped in the sandbox when it applies) and the sandbox's
    /// placeholders to remove once it has ended.
    fn prepare(&self, request: &Request<'_>) -> Result<(Job, Option<Placeholders>), ExecError> {
        let argv: Vec<OsString> = vec![request.shell.into(), "-c".into(), request.command.into()];
        let (argv, placeholders, pass_fds) = match self.sandbox_for(request.agent)? {
            Some(sandbox) => {
                let mut writable = vec![request.workspace.to_path_buf()];
                writable.extend(self.config.extra_writable.iter().cloned());
                let policy = Policy {
                    writable_roots: writable,
                    hidden: self.config.hidden.clone(),
                    network: self.config.network,
                };
                let wrapped = sandbox.wrap(&policy, request.cwd, &argv)?;
                (wrapped.argv, Some(wrapped.placeholders), wrapped.pass_fds)
            }
            None => (argv, None, Vec::new()),
        };
        let mut job = Job::new(argv, request.cwd.to_path_buf(), request.timeout);
        job.env = self.config.env.vars();
        job.limits = Some(self.config.limits);
        job.pass_fds = pass_fds;
        Ok((job, placeholders))
    }

    /// Runs `request` to its end, its timeout or `cancel`.
    pub async fn run(
        &self,
        request: &Request<'_>,
        cancel: &CancellationToken,
    ) -> Result<Outcome, ExecError> {
        let (job, placeholders) = self.prepare(request)?;
        let outcome = run::run(job, cancel).await;
        if let Some(placeholders) = placeholders {
            placeholders.remove();
        }
        Ok(outcome?)
    }

    /// Starts `request` in the background for `owner` (a session) as task `id`, its output
    /// appended to `log_file` (at `log`). It runs until it ends, its timeout, a stop, or
    /// Talon's shutdown; the call that started it may end at once.
    pub fn start_background(
        &self,
        request: &Request<'_>,
        owner: &str,
        id: String,
        log_file: std::fs::File,
        log: PathBuf,
    ) -> Result<TaskInfo, ExecError> {
        self.background.check_room(owner)?;
        let (job, placeholders) = self.prepare(request)?;
        let cleanup = placeholders.map(|p| Box::new(move || p.remove()) as background::Cleanup);
        Ok(self
            .background
            .start(owner, id, request.command, job, log_file, log, cleanup)?)
    }
}

/// 64 random bits from the operating system, for markers and ids a command cannot predict.
pub fn random_u64() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

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
//!
//! # Charter
//!
//! - **Owns:** running commands contained: the sandboxes (bubblewrap, Landlock, Docker), command
//!   analysis, credentialed execution, background processes.
//! - **Never contains:** tools' schemas or policy decisions (it enforces what it is given).
//! - **A new feature goes:** a new sandbox backend (another host, a VM) is a backend here behind
//!   `Sandbox`; a browser process runs contained through it.

pub mod analysis;
pub mod background;
pub mod cap;
pub mod credentialed;
pub mod env;
mod limits;
pub mod run;
pub mod sandbox;
pub mod session;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use background::{Background, BackgroundError, Status, TaskInfo};
pub use env::{ChildEnv, EnvError};
pub use run::{Ending, Job, Limits, Outcome, RunError};
pub use sandbox::{
    NetworkLists, NetworkMode, NetworkPolicy, NetworkPolicyError, NetworkReport, Placeholders,
    Policy, Sandbox, SandboxError, SandboxMode, Wrapped,
};

/// How commands run: sandbox mode, environment, limits, and what the sandbox hides.
#[derive(Debug, Clone, Default)]
pub struct ShellConfig {
    pub mode: SandboxMode,
    pub env: ChildEnv,
    pub limits: Limits,
    /// Hidden from sandboxed commands (Talon's data directory and configuration file).
    pub hidden: Vec<PathBuf>,
    /// The host's credential stores hidden besides (`~/.ssh`, `~/.aws`, …; see
    /// [`sandbox::credentials`]), with the operator's additions and exceptions.
    pub credentials: sandbox::CredentialHiding,
    /// Writable besides the call's workspace.
    pub extra_writable: Vec<PathBuf>,
    /// What sandboxed commands reach over the network: nothing (the default), only Talon's
    /// filtering proxy, or the host's network (see [`sandbox::network`]).
    pub network: NetworkMode,
    /// The `talon` binary, whose hidden subcommands run inside sandboxes (the session init, and
    /// the network bridge of proxy mode). Without it every sandboxed command gets a sandbox of
    /// its own, and proxy mode refuses commands.
    ///
    /// Also the Landlock backend's helper (`__sandbox-landlock`): without it that backend is
    /// unavailable.
    pub helper: Option<PathBuf>,
    /// One command per process (`talon tool call`): a session sandbox would cost more to start
    /// than it saves, so each command gets a sandbox of its own.
    pub one_shot: bool,
    /// Commands of more than one person run here (`talon serve`): Landlock, which cannot keep
    /// their processes apart, is refused unless [`Self::landlock_single_user`].
    pub shared: bool,
    /// The operator's word that one person uses this shared shell after all.
    pub landlock_single_user: bool,
    /// Which backend confines commands (`[exec] backend`; see [`sandbox::select`]).
    pub backend: sandbox::Backend,
    /// The Docker backend's container settings (`[exec.docker]`).
    pub docker: sandbox::docker::DockerSettings,
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
    /// The calling session: its commands share one sandbox (see [`session`]).
    pub session: Option<&'a str>,
    pub timeout: Duration,
    /// Variables added to the allowlisted environment (a custom tool's own, decrypted from the
    /// store), over an allowlisted variable of the same name. Talon's own environment is never
    /// the source of these.
    pub env: &'a [(String, String)],
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
    sessions: Arc<session::Sessions>,
}

impl Shell {
    pub fn new(config: ShellConfig) -> Self {
        Self {
            config,
            background: Arc::default(),
            sessions: Arc::default(),
        }
    }

    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// Stops the background commands and closes the session sandboxes (Talon is shutting
    /// down): nothing this shell started outlives it.
    pub async fn shutdown(&self) {
        self.background.stop_all_and_wait().await;
        self.sessions.close_all().await;
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
    ) -> Result<Option<Box<dyn Sandbox>>, SandboxError> {
        if self.config.mode.applies_to(agent) {
            let config = &self.config;
            sandbox::select(config.backend, config.helper.as_deref(), &config.docker).and_then(
                |selected| {
                    sandbox::refuse_shared_landlock(
                        &selected,
                        config.shared && !config.landlock_single_user,
                    )?;
                    Ok(Some(selected.sandbox))
                },
            )
        } else {
            Ok(None)
        }
    }

    /// The sandbox policy for a command in `workspace` with `network`; `foreground`: see
    /// [`Policy::skip_pins`].
    fn policy(&self, workspace: &Path, network: sandbox::Network, foreground: bool) -> Policy {
        let mut writable = vec![workspace.to_path_buf()];
        writable.extend(self.config.extra_writable.iter().cloned());
        let mut hidden = self.config.hidden.clone();
        hidden.extend(self.config.credentials.for_this_user());
        Policy {
            writable_roots: writable,
            hidden,
            network,
            skip_pins: foreground,
        }
    }

    /// The job that runs `request` (wrapped in the sandbox when it applies) and the sandbox's
    /// placeholders to remove once it has ended; `foreground`: see [`Policy::skip_pins`].
    fn prepare(
        &self,
        request: &Request<'_>,
        foreground: bool,
    ) -> Result<(Job, Option<Placeholders>), ExecError> {
        // On the host the shell itself lowers its limits (hard and soft) before it reads the
        // command, so the command starts with `posix_spawn` instead of a fork with a pre-exec
        // hook; nothing of the command runs before the limits hold. In a sandbox the wrapper
        // takes them (see `job_for_argv`).
        let on_host = !self.config.mode.applies_to(request.agent);
        let script = if on_host {
            format!(
                "{}{}",
                limits::shell_prefix(&self.config.limits, request.shell),
                request.command
            )
        } else {
            request.command.to_string()
        };
        let argv: Vec<OsString> = vec![request.shell.into(), "-c".into(), script.into()];
        let place = Placement {
            cwd: request.cwd,
            workspace: request.workspace,
            agent: request.agent,
            timeout: request.timeout,
        };
        let (mut job, placeholders) = self.job_for_argv(argv, &place, foreground)?;
        if on_host {
            job.limits = None;
        }
        job.env = self.env_for(request);
        Ok((job, placeholders))
    }

    /// The environment of `request`'s command: the allowlist ([`env::ChildEnv`]), then the
    /// request's own variables over it.
    fn env_for(&self, request: &Request<'_>) -> Vec<(String, OsString)> {
        let mut vars = self.config.env.vars();
        vars.retain(|(name, _)| !request.env.iter().any(|(n, _)| n == name));
        vars.extend(
            request
                .env
                .iter()
                .map(|(n, v)| (n.clone(), OsString::from(v))),
        );
        vars
    }

    /// The job that runs `argv` directly (no shell) at `at`, wrapped in the sandbox when it
    /// applies to the agent, with this shell's limits and no environment (the caller sets it:
    /// the allowlist for shell commands, a minimal one for credentialed exec). Also returns the
    /// sandbox's placeholders to remove once the job has ended; `foreground`: see
    /// [`Policy::skip_pins`].
    pub fn job_for_argv(
        &self,
        argv: Vec<OsString>,
        at: &Placement<'_>,
        foreground: bool,
    ) -> Result<(Job, Option<Placeholders>), ExecError> {
        let (argv, placeholders, pass_fds, proxy) = match self.sandbox_for(at.agent)? {
            Some(sandbox) => {
                // Proxy mode: this job's own proxy, served while it runs (see `Job::network`).
                let (network, proxy) =
                    sandbox::network::plan(&self.config.network, self.config.helper.as_deref())?;
                let policy = self.policy(at.workspace, network, foreground);
                let wrapped = sandbox.wrap(&policy, at.cwd, &argv)?;
                let proxy = proxy.map(Arc::new);
                (
                    wrapped.argv,
                    Some(wrapped.placeholders),
                    wrapped.pass_fds,
                    proxy,
                )
            }
            None => (argv, None, Vec::new(), None),
        };
        let mut job = Job::new(argv, at.cwd.to_path_buf(), at.timeout);
        job.limits = Some(self.config.limits);
        job.pass_fds = pass_fds;
        job.network = proxy;
        Ok((job, placeholders))
    }

    /// Runs `request` to its end, its timeout or `cancel`.
    pub async fn run(
        &self,
        request: &Request<'_>,
        cancel: &CancellationToken,
    ) -> Result<Outcome, ExecError> {
        if let Some(outcome) = self.run_in_session(request, cancel).await {
            return outcome;
        }
        let (job, placeholders) = self.prepare(request, true)?;
        Ok(run_foreground(job, placeholders, cancel).await?)
    }

    /// Runs `request` in its session's sandbox when it can share one: a session, the helper
    /// program, bubblewrap, a network mode without a per-command proxy, and UTF-8 paths and
    /// environment. `None`: run it on its own.
    async fn run_in_session(
        &self,
        request: &Request<'_>,
        cancel: &CancellationToken,
    ) -> Option<Result<Outcome, ExecError>> {
        let session = request.session.filter(|_| !self.config.one_shot)?;
        let helper = self.config.helper.clone()?;
        let network = self.config.network.shared()?;
        let sandbox = match self.sandbox_for(request.agent) {
            // Session sandboxes are bubblewrap's; other backends run each command on its own.
            Ok(Some(sandbox)) if sandbox.name() == "bubblewrap" => sandbox,
            Ok(_) => return None,
            Err(e) => return Some(Err(e.into())),
        };
        let env: Option<Vec<(String, String)>> = self
            .env_for(request)
            .into_iter()
            .map(|(k, v)| v.into_string().ok().map(|v| (k, v)))
            .collect();
        let command = session::Command {
            argv: vec![
                session::utf8(request.shell)?,
                "-c".into(),
                request.command.to_string(),
            ],
            cwd: session::utf8(request.cwd)?,
            env: env?,
            limits: self.config.limits,
            timeout: request.timeout,
            stream_cap: cap::STREAM_CAP,
        };
        session::utf8(request.workspace)?;
        let key = session::Key {
            session: session.to_string(),
            agent: request.agent.map(str::to_string),
            workspace: request.workspace.to_path_buf(),
        };
        let start = |init_args: Vec<OsString>| {
            let policy = self.policy(request.workspace, network.clone(), true);
            let mut argv = vec![helper.into_os_string()];
            argv.extend(init_args);
            let wrapped = sandbox.wrap(&policy, request.workspace, &argv)?;
            let mut job = Job::new(
                wrapped.argv,
                request.workspace.to_path_buf(),
                request.timeout,
            );
            job.env = self.config.env.vars();
            job.pass_fds = wrapped.pass_fds;
            // Nothing is pinned and nothing has run yet: the session removes what each command
            // creates under a protected name itself.
            wrapped.placeholders.remove();
            Ok((job, policy.writable_roots))
        };
        Some(self.sessions.run(key, start, command, cancel).await)
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
        let (job, placeholders) = self.prepare(request, false)?;
        let cleanup = placeholders.map(|p| {
            Box::new(move || {
                p.remove();
            }) as background::Cleanup
        });
        Ok(self
            .background
            .start(owner, id, request.command, job, log_file, log, cleanup)?)
    }
}

/// Where and how long a command runs.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// Where it starts; inside `workspace`.
    pub cwd: &'a Path,
    /// The call's workspace (writable inside the sandbox).
    pub workspace: &'a Path,
    /// The calling agent (selects the sandbox under `non-main`).
    pub agent: Option<&'a str>,
    /// Then the command and everything it started are killed (the binary's configured
    /// timeout unless the call asked for another).
    pub timeout: Duration,
}

/// Runs `job` to its end, then cleans up after its sandbox, telling the model (after the
/// command's error output) about each protected name it created and Talon removed.
async fn run_foreground(
    job: Job,
    placeholders: Option<Placeholders>,
    cancel: &CancellationToken,
) -> Result<Outcome, run::RunError> {
    let outcome = run::run(job, cancel).await;
    let removed = placeholders.map(Placeholders::remove).unwrap_or_default();
    let mut outcome = outcome?;
    for path in removed {
        outcome
            .stderr
            .push(sandbox::removal_note(&path).as_bytes(), usize::MAX);
    }
    Ok(outcome)
}

/// 64 random bits from the operating system, for markers and ids a command cannot predict.
pub fn random_u64() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

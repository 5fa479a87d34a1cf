//! Running one command to completion: its own process group, capped capture, a deadline and
//! cancellation that take the whole group down, and resource limits.
//!
//! When the command's main process ends, whatever it left running in its process group is killed
//! too (a double-forked daemon would otherwise keep the output pipes open and outlive the call).
//! On timeout or cancel the group gets SIGTERM, then SIGKILL after the grace period. A process
//! that leaves the group with `setsid` escapes this on the host; inside the sandbox it cannot
//! escape the PID namespace, which dies with the sandbox.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cap::{Captured, STREAM_CAP};
use crate::sandbox::NetworkReport;
use crate::sandbox::network::ProxySession;

/// Time between SIGTERM and SIGKILL (GoClaw's 3 s).
pub const GRACE: Duration = Duration::from_secs(3);

/// How long to wait for the output pipes to close once the group is gone.
const DRAIN: Duration = Duration::from_secs(2);

/// Resource limits set on the command (and inherited by its children).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// Writable data segment (heap and private mappings), MiB; GoClaw's container memory default.
    pub memory_mb: u64,
    /// CPU seconds per process.
    pub cpu_secs: u64,
    /// Largest file a command may write, MiB.
    pub file_size_mb: u64,
    /// Open file descriptors per process.
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: 512,
            cpu_secs: 600,
            file_size_mb: 1024,
            open_files: 1024,
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// Program and arguments (the sandbox's wrapper, or `/bin/sh -c …`).
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(String, OsString)>,
    pub timeout: Duration,
    pub limits: Option<Limits>,
    /// Bytes kept per stream.
    pub stream_cap: usize,
    /// Descriptors the program inherits at their numbers (Talon's own are close-on-exec): the
    /// sandbox's seccomp filter, which bwrap reads from the fd its command line names.
    pub pass_fds: Vec<Arc<OwnedFd>>,
    /// The network proxy the sandbox reaches (proxy mode): served while the job runs, its
    /// refusals reported in the [`Outcome`].
    pub network: Option<Arc<ProxySession>>,
}

impl Job {
    /// `argv` in `cwd` with no environment, [`STREAM_CAP`] per stream and no limits.
    pub fn new(argv: Vec<OsString>, cwd: PathBuf, timeout: Duration) -> Self {
        Self {
            argv,
            cwd,
            env: Vec::new(),
            timeout,
            limits: None,
            stream_cap: STREAM_CAP,
            pass_fds: Vec::new(),
            network: None,
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The caller gave up and it was killed.
    Cancelled,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
    pub elapsed: Duration,
    /// What the sandbox's network proxy refused while the command ran (proxy mode only), to be
    /// told to the model after the output.
    pub network: Option<NetworkReport>,
}

impl Outcome {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.ending == Ending::Exited(0)
    }
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no command given")]
    Empty,
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

pub(crate) fn set_limits(limits: &Limits) -> std::io::Result<()> {
    let mib = |n: u64| n.saturating_mul(1 << 20);
    let pairs = [
        (Resource::RLIMIT_DATA, mib(limits.memory_mb)),
        (Resource::RLIMIT_CPU, limits.cpu_secs),
        (Resource::RLIMIT_FSIZE, mib(limits.file_size_mb)),
        (Resource::RLIMIT_NOFILE, limits.open_files),
    ];
    for (resource, value) in pairs {
        setrlimit(resource, value, value).map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// Clears close-on-exec on `fd`, in a forked child, so the program it executes inherits `fd`.
pub(crate) fn inherit_fd(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: F_SETFD only changes the flags of a descriptor number; async-signal-safe.
    if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn reader<R: AsyncRead + Unpin + Send + 'static>(
    mut stream: R,
    cap: usize,
) -> JoinHandle<Captured> {
    tokio::spawn(async move {
        let mut captured = Captured::default();
        let mut buf = vec![0u8; 16 * 1024];
        // Keep reading past the cap so the command never blocks on a full pipe.
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            captured.push(&buf[..n], cap);
        }
        captured
    })
}

pub(crate) fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH: the group is already gone.
        let _ = killpg(pgid, signal);
    }
}

/// A started command: the child and its process group.
pub(crate) struct Started {
    pub child: tokio::process::Child,
    pub pgid: Option<Pid>,
}

/// Spawns `job` in its own process group with `stdin`, stdout and stderr piped.
pub(crate) fn start(job: &Job, stdin: Stdio) -> Result<Started, RunError> {
    let (program, args) = job.argv.split_first().ok_or(RunError::Empty)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(&job.cwd)
        .env_clear()
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(limits) = job.limits {
        // SAFETY: the closure runs in the forked child before exec and only makes setrlimit
        // system calls, which are async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(move || set_limits(&limits));
        }
    }
    for fd in job.pass_fds.iter().map(|fd| fd.as_raw_fd()) {
        // SAFETY: runs in the forked child before exec; only an fcntl (see `inherit_fd`).
        unsafe {
            command.pre_exec(move || inherit_fd(fd));
        }
    }
    let child = command.spawn().map_err(|source| RunError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    Ok(Started { child, pgid })
}

/// How an exit status ended the command.
fn ending_of(status: std::io::Result<std::process::ExitStatus>) -> Ending {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signaled(signal),
            (None, None) => Ending::Signaled(0),
        },
        Err(_) => Ending::Signaled(0),
    }
}

impl Started {
    /// Waits for the command's end, its `timeout`, or `cancel`; then takes down whatever is
    /// left of its process group (SIGTERM and [`GRACE`] first when it was stopped early).
    pub async fn finish(&mut self, timeout: Duration, cancel: &CancellationToken) -> Ending {
        let ending = tokio::select! {
            status = self.child.wait() => ending_of(status),
            () = tokio::time::sleep(timeout) => Ending::TimedOut,
            () = cancel.cancelled() => Ending::Cancelled,
        };
        if matches!(ending, Ending::TimedOut | Ending::Cancelled) {
            signal_group(self.pgid, Signal::SIGTERM);
            if tokio::time::timeout(GRACE, self.child.wait())
                .await
                .is_err()
            {
                tracing::debug!("command ignored SIGTERM; killing its process group");
            }
        }
        // No orphan survives the call: whatever is left in the group goes now.
        signal_group(self.pgid, Signal::SIGKILL);
        let _ = self.child.wait().await;
        ending
    }
}

/// Waits up to [`DRAIN`] for a stream reader whose pipe may be held by a process that left the
/// group; gives up with what it has (nothing) rather than hang.
pub(crate) async fn drain<T: Default>(handle: Option<JoinHandle<T>>) -> T {
    let Some(handle) = handle else {
        return T::default();
    };
    let abort = handle.abort_handle();
    match tokio::time::timeout(DRAIN, handle).await {
        Ok(Ok(value)) => value,
        _ => {
            abort.abort();
            T::default()
        }
    }
}

/// Runs `job` to its end, its timeout, or `cancel`.
pub async fn run(job: Job, cancel: &CancellationToken) -> Result<Outcome, RunError> {
    let begin = Instant::now();
    let mut started = start(&job, Stdio::null())?;
    let stdout = started
        .child
        .stdout
        .take()
        .map(|s| reader(s, job.stream_cap));
    let stderr = started
        .child
        .stderr
        .take()
        .map(|s| reader(s, job.stream_cap));
    let ending = started.finish(job.timeout, cancel).await;
    let stdout = drain(stdout).await;
    let stderr = drain(stderr).await;
    let elapsed = begin.elapsed();
    let network = match &job.network {
        Some(proxy) => proxy.finish().await,
        None => None,
    };
    Ok(Outcome {
        ending,
        stdout,
        stderr,
        elapsed,
        network,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<OsString> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    fn job(script: &str, timeout: Duration) -> Job {
        let mut job = Job::new(sh(script), std::env::temp_dir(), timeout);
        job.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
        job
    }

    #[tokio::test]
    async fn exit_codes_and_streams() {
        let out = run(
            job("echo out; echo err >&2; exit 3", Duration::from_secs(10)),
            &CancellationToken::new(),
        )
        .await
        .expect("runs");
        assert_eq!(out.ending, Ending::Exited(3));
        assert_eq!(out.stdout.bytes, b"out\n");
        assert_eq!(out.stderr.bytes, b"err\n");
    }

    #[tokio::test]
    async fn the_environment_is_only_what_was_given() {
        let mut j = job("env", Duration::from_secs(10));
        j.env.push(("ONLY".into(), "this".into()));
        let out = run(j, &CancellationToken::new()).await.expect("runs");
        let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
        let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
        for name in names {
            assert!(
                ["PATH", "ONLY", "PWD", "SHLVL", "_"].contains(&name),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn a_timeout_kills_double_forked_children_too() {
        let marker = tempfile::NamedTempFile::new().expect("temp");
        let path = marker.path().display().to_string();
        // The grandchild outlives its parent and would keep the pipes open.
        let script = format!("(sh -c 'sleep 30; echo late > {path}' &) ; sleep 30");
        let out = run(
            job(&script, Duration::from_millis(300)),
            &CancellationToken::new(),
        )
        .await
        .expect("runs");
        assert_eq!(out.ending, Ending::TimedOut);
        assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
        let survivors = std::process::Command::new("pgrep")
            .args(["-f", &format!("echo late > {path}")])
            .output()
            .expect("pgrep");
        assert!(
            survivors.stdout.is_empty(),
            "orphans survived: {:?}",
            survivors
        );
    }

    #[tokio::test]
    async fn background_leftovers_die_when_the_command_ends() {
        let out = run(
            job("sleep 30 & echo started", Duration::from_secs(20)),
            &CancellationToken::new(),
        )
        .await
        .expect("runs");
        assert_eq!(out.ending, Ending::Exited(0));
        assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
        assert_eq!(out.stdout.bytes, b"started\n");
    }

    #[tokio::test]
    async fn cancellation_stops_the_command() {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.cancel();
        });
        let out = run(job("sleep 30", Duration::from_secs(60)), &cancel)
            .await
            .expect("runs");
        assert_eq!(out.ending, Ending::Cancelled);
    }

    #[tokio::test]
    async fn limits_apply() {
        let mut j = job("head -c 3000000 /dev/zero > big", Duration::from_secs(10));
        let dir = tempfile::tempdir().expect("dir");
        j.cwd = dir.path().to_path_buf();
        j.limits = Some(Limits {
            file_size_mb: 1,
            ..Limits::default()
        });
        let out = run(j, &CancellationToken::new()).await.expect("runs");
        assert!(!out.success(), "{out:?}");
        let size = std::fs::metadata(dir.path().join("big"))
            .expect("file")
            .len();
        assert!(size <= 1 << 20, "{size}");
    }

    #[tokio::test]
    async fn output_past_the_cap_is_counted_not_kept() {
        let mut j = job("head -c 100000 /dev/zero", Duration::from_secs(10));
        j.stream_cap = 1000;
        let out = run(j, &CancellationToken::new()).await.expect("runs");
        assert_eq!(out.stdout.bytes.len(), 1000);
        assert_eq!(out.stdout.total, 100_000);
        assert!(out.success());
    }
}

//! Session sandboxes: one bubblewrap sandbox per session, kept running with a small init
//! ([`init`]) that runs each command, so the namespaces (the network namespace above all, which
//! costs milliseconds to create) are set up once per session instead of once per call.
//!
//! Same confinement as a sandbox per call: the sandbox is built from the same policy, and it is
//! rebuilt whenever the protected paths in the workspace change (a `git init` that created
//! `.git/hooks` gets them bound read-only before the next command runs). Commands run in their
//! own process groups with the resource limits; on timeout or cancel the group gets SIGTERM,
//! then SIGKILL after the grace period, and strays are killed when each command ends.
//!
//! Bounded: at most [`MAX_SANDBOXES`] at once (the least recently used is closed first), and a
//! sandbox idle for [`IDLE`] is closed on the next call.

pub mod init;
pub mod proto;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::proto::{Reply, Request};
use crate::cap::Captured;
use crate::run::{self, Ending, GRACE, Job, Limits, Outcome, RunError};
use crate::sandbox::protected::{self, Protection, protected_paths, removal_note};

/// Sandboxes kept at once.
pub const MAX_SANDBOXES: usize = 32;
/// A sandbox unused this long is closed.
pub const IDLE: Duration = Duration::from_secs(600);

/// Which sandbox a command may share: same session, agent, workspace and shell settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub session: String,
    pub agent: Option<String>,
    pub workspace: PathBuf,
}

/// The protected paths of a sandbox's writable roots: those that exist are bound read-only in
/// the sandbox; those that do not ([`Protection::Pin`]) must still not be created.
fn plan(roots: &[PathBuf]) -> Vec<Protection> {
    roots
        .iter()
        .flat_map(|root| protected_paths(root))
        .collect()
}

type Waiters = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>>;

#[derive(Debug)]
enum Event {
    Output(u8, Vec<u8>),
    Ended(Ending),
    Failed(String),
}

/// The two pipes between Talon and a session's init: requests in, replies out. The init's ends
/// are passed to bubblewrap as descriptors of their own, not as its standard streams, which
/// bubblewrap's PID 1 keeps open where commands could reach them (see [`init`]).
pub struct Channel {
    to_init: OwnedFd,
    from_init: OwnedFd,
    init_control: Arc<OwnedFd>,
    init_replies: Arc<OwnedFd>,
}

/// `fd` moved above the standard streams (close-on-exec), so the child's stdio set-up cannot
/// replace it.
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor this function owns.
    let raw = unsafe { nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_DUPFD_CLOEXEC, 3) };
    if raw == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` was just returned by F_DUPFD_CLOEXEC and is owned by nothing else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

impl Channel {
    /// Two fresh pipes, every end close-on-exec (the spawn clears that flag for the init's
    /// ends in bubblewrap alone).
    pub fn new() -> std::io::Result<Self> {
        let (control, to_init) = std::io::pipe()?;
        let (from_init, replies) = std::io::pipe()?;
        Ok(Self {
            to_init: above_stdio(to_init.into())?,
            from_init: above_stdio(from_init.into())?,
            init_control: Arc::new(above_stdio(control.into())?),
            init_replies: Arc::new(above_stdio(replies.into())?),
        })
    }

    /// The init's command line after the helper program: `__sandbox-init --control FD
    /// --replies FD`.
    pub fn init_args(&self) -> Vec<OsString> {
        vec![
            INIT_SUBCOMMAND.into(),
            "--control".into(),
            self.init_control.as_raw_fd().to_string().into(),
            "--replies".into(),
            self.init_replies.as_raw_fd().to_string().into(),
        ]
    }

    /// The descriptors bubblewrap must inherit at their numbers (see [`Job::pass_fds`]).
    pub fn init_fds(&self) -> [Arc<OwnedFd>; 2] {
        [
            Arc::clone(&self.init_control),
            Arc::clone(&self.init_replies),
        ]
    }
}

/// The hidden `talon` subcommand that runs a session sandbox's init ([`init::serve`]).
pub const INIT_SUBCOMMAND: &str = "__sandbox-init";

/// One running session sandbox.
struct Sandbox {
    stdin: tokio::sync::Mutex<pipe::Sender>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    next: AtomicU64,
    roots: Vec<PathBuf>,
    plan: Vec<Protection>,
    last_used: Mutex<Instant>,
    /// The bubblewrap process; killed (and with it the sandbox) when this is dropped.
    _child: tokio::process::Child,
}

type LastWords = Arc<Mutex<Vec<String>>>;

async fn read_replies(
    stdout: pipe::Receiver,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    last_words: LastWords,
) {
    let mut input = BufReader::new(stdout);
    loop {
        let mut line = String::new();
        match input.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(reply) = serde_json::from_str::<Reply>(line.trim_end()) else {
            tracing::warn!(line = %line.trim_end(), "session sandbox: unreadable reply");
            break;
        };
        let (id, event) = match reply {
            Reply::Output { id, stream, len } => {
                if len > proto::MAX_FRAME {
                    break;
                }
                let mut payload = vec![0u8; len];
                if input.read_exact(&mut payload).await.is_err() {
                    break;
                }
                (id, Event::Output(stream, payload))
            }
            Reply::Ended { id, code, signal } => {
                let ending = match (code, signal) {
                    (Some(code), _) => Ending::Exited(code),
                    (None, Some(signal)) => Ending::Signaled(signal),
                    (None, None) => Ending::Signaled(0),
                };
                (id, Event::Ended(ending))
            }
            Reply::Failed { id, message } => (id, Event::Failed(message)),
        };
        let waiter = waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned();
        if let Some(waiter) = waiter {
            let _ = waiter.send(event);
        }
    }
    alive.store(false, Ordering::Relaxed);
    // Give the stderr reader a moment to collect the last words.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let words = last_words
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .join("; ");
    let message = if words.is_empty() {
        "the session sandbox stopped".to_string()
    } else {
        format!("the session sandbox stopped: {words}")
    };
    // Every command still waiting learns the sandbox is gone.
    for (_, waiter) in waiters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain()
    {
        let _ = waiter.send(Event::Failed(message.clone()));
    }
}

impl Sandbox {
    /// Starts `job` (bubblewrap around the init, which talks over `channel`; the job passes
    /// the init's ends) for writable `roots`. Consumes the job, so Talon's copies of the init's
    /// ends are closed once bubblewrap has them: the sandbox's end shows as end of input.
    fn start(job: Job, channel: Channel, roots: Vec<PathBuf>) -> Result<Self, RunError> {
        let mut started = run::start(&job, Stdio::null())?;
        drop(job);
        let Channel {
            to_init,
            from_init,
            init_control,
            init_replies,
        } = channel;
        drop((init_control, init_replies));
        let spawn_error = |e: std::io::Error| RunError::Spawn {
            program: "session sandbox".into(),
            source: e,
        };
        let stdin = pipe::Sender::from_owned_fd(to_init).map_err(spawn_error)?;
        let stdout = pipe::Receiver::from_owned_fd(from_init).map_err(spawn_error)?;
        // Nothing is said on bubblewrap's standard output; the replies have their own pipe.
        drop(started.child.stdout.take());
        // What bubblewrap or the init said last: the reason when the sandbox dies.
        let last_words: LastWords = Arc::default();
        if let Some(stderr) = started.child.stderr.take() {
            let last_words = Arc::clone(&last_words);
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(%line, "session sandbox");
                    let mut words = last_words.lock().unwrap_or_else(PoisonError::into_inner);
                    if words.len() >= 5 {
                        words.remove(0);
                    }
                    words.push(line);
                }
            });
        }
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        tokio::spawn(read_replies(
            stdout,
            Arc::clone(&waiters),
            Arc::clone(&alive),
            last_words,
        ));
        let plan = plan(&roots);
        Ok(Self {
            stdin: tokio::sync::Mutex::new(stdin),
            waiters,
            alive,
            next: AtomicU64::new(1),
            roots,
            plan,
            last_used: Mutex::new(Instant::now()),
            _child: started.child,
        })
    }

    /// Still running, and built for the protected paths the workspace has now.
    fn usable(&self) -> bool {
        self.alive.load(Ordering::Relaxed) && plan(&self.roots) == self.plan
    }

    async fn send(&self, request: &Request) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(request).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(&line).await?;
        stdin.flush().await
    }

    /// Runs one command in the sandbox.
    async fn run(&self, command: Command, cancel: &CancellationToken) -> Result<Outcome, RunError> {
        let begin = Instant::now();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, mut events) = mpsc::unbounded_channel();
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, sender);
        let request = Request::Run {
            id,
            argv: command.argv,
            cwd: command.cwd,
            env: command.env,
            limits: command.limits,
        };
        let failed = |message: String| RunError::Spawn {
            program: "session sandbox".into(),
            source: std::io::Error::other(message),
        };
        if let Err(e) = self.send(&request).await {
            self.waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            return Err(failed(format!("cannot reach the session sandbox: {e}")));
        }
        let (mut stdout, mut stderr) = (Captured::default(), Captured::default());
        let mut stop = Stop::Running;
        let deadline = tokio::time::Instant::now() + command.timeout;
        let result = loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = tokio::time::sleep_until(deadline), if stop == Stop::Running => {
                    stop = Stop::Terminating { why: Ending::TimedOut, since: Instant::now() };
                    let _ = self.send(&Request::Signal { id, signal: 15 }).await;
                    continue;
                }
                () = cancel.cancelled(), if stop == Stop::Running => {
                    stop = Stop::Terminating { why: Ending::Cancelled, since: Instant::now() };
                    let _ = self.send(&Request::Signal { id, signal: 15 }).await;
                    continue;
                }
                () = tokio::time::sleep_until(stop.next_step().into()), if stop != Stop::Running => {
                    match stop {
                        Stop::Terminating { why, .. } => {
                            let _ = self.send(&Request::Signal { id, signal: 9 }).await;
                            stop = Stop::Killed { why, since: Instant::now() };
                            continue;
                        }
                        // The init did not report the end of a killed command: the sandbox is
                        // not trusted any more, and the next command gets a new one.
                        _ => {
                            self.alive.store(false, Ordering::Relaxed);
                            break Err(failed("the session sandbox did not report the end of a killed command".into()));
                        }
                    }
                }
            };
            match event {
                Some(Event::Output(1, bytes)) => stdout.push(&bytes, command.stream_cap),
                Some(Event::Output(_, bytes)) => stderr.push(&bytes, command.stream_cap),
                Some(Event::Ended(ending)) => break Ok(stop.ending().unwrap_or(ending)),
                Some(Event::Failed(message)) => break Err(failed(message)),
                None => break Err(failed("the session sandbox stopped".into())),
            }
        };
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let unpinned: Vec<PathBuf> = self
            .plan
            .iter()
            .filter_map(|p| match p {
                Protection::Pin(path) | Protection::Absent(path) => Some(path.clone()),
                Protection::Anchor(_) | Protection::ReadOnly(_) => None,
            })
            .collect();
        for path in protected::remove_created(&self.roots, &unpinned) {
            stderr.push(removal_note(&path).as_bytes(), usize::MAX);
        }
        Ok(Outcome {
            ending: result?,
            stdout,
            stderr,
            elapsed: begin.elapsed(),
            network: None,
        })
    }
}

/// Where stopping a command early stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Running,
    /// SIGTERM sent (for `why`); SIGKILL follows after the grace period.
    Terminating {
        why: Ending,
        since: Instant,
    },
    /// SIGKILL sent; the init must report the end soon.
    Killed {
        why: Ending,
        since: Instant,
    },
}

impl Stop {
    /// When the next step is due.
    fn next_step(self) -> Instant {
        match self {
            Self::Running => Instant::now() + Duration::from_secs(3600),
            Self::Terminating { since, .. } => since + GRACE,
            Self::Killed { since, .. } => since + Duration::from_secs(5),
        }
    }

    /// Why the command was stopped, if it was.
    fn ending(self) -> Option<Ending> {
        match self {
            Self::Running => None,
            Self::Terminating { why, .. } | Self::Killed { why, .. } => Some(why),
        }
    }
}

/// One command for a session sandbox.
#[derive(Debug, Clone)]
pub struct Command {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    pub limits: Limits,
    pub timeout: Duration,
    pub stream_cap: usize,
}

/// The session sandboxes of this process.
#[derive(Default)]
pub struct Sessions {
    sandboxes: tokio::sync::Mutex<HashMap<Key, Arc<Sandbox>>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// Runs `command` in `key`'s sandbox, starting one (with `start`: the bubblewrap job around
    /// the helper program run with the arguments it is given, and its writable roots) when
    /// there is none or the one there no longer fits the workspace.
    pub async fn run<F>(
        &self,
        key: Key,
        start: F,
        command: Command,
        cancel: &CancellationToken,
    ) -> Result<Outcome, crate::ExecError>
    where
        F: FnOnce(Vec<OsString>) -> Result<(Job, Vec<PathBuf>), crate::ExecError>,
    {
        let sandbox = {
            let mut sandboxes = self.sandboxes.lock().await;
            let now = Instant::now();
            sandboxes.retain(|_, s| {
                s.alive.load(Ordering::Relaxed)
                    && now
                        .duration_since(*s.last_used.lock().unwrap_or_else(PoisonError::into_inner))
                        < IDLE
            });
            match sandboxes.get(&key).filter(|s| s.usable()) {
                Some(sandbox) => Arc::clone(sandbox),
                None => {
                    // Close the old one first so its pins are gone before the new plan is made.
                    sandboxes.remove(&key);
                    if sandboxes.len() >= MAX_SANDBOXES
                        && let Some(oldest) = sandboxes
                            .iter()
                            .min_by_key(|(_, s)| {
                                *s.last_used.lock().unwrap_or_else(PoisonError::into_inner)
                            })
                            .map(|(k, _)| k.clone())
                    {
                        sandboxes.remove(&oldest);
                    }
                    let channel = Channel::new().map_err(|source| RunError::Spawn {
                        program: "session sandbox".into(),
                        source,
                    })?;
                    let (mut job, roots) = start(channel.init_args())?;
                    job.pass_fds.extend(channel.init_fds());
                    let sandbox = Arc::new(Sandbox::start(job, channel, roots)?);
                    sandboxes.insert(key, Arc::clone(&sandbox));
                    sandbox
                }
            }
        };
        Ok(sandbox.run(command, cancel).await?)
    }

    /// Closes every session sandbox (Talon is shutting down).
    pub async fn close_all(&self) {
        self.sandboxes.lock().await.clear();
    }
}

/// Whether `path` can travel in the init protocol (JSON strings are UTF-8).
pub fn utf8(path: &Path) -> Option<String> {
    path.to_str().map(str::to_string)
}

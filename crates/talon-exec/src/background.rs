//! Background commands: started by one call, read, fed and stopped by later ones.
//!
//! A background command runs like a foreground one (its own process group, the same sandbox,
//! the same environment), but its output goes to a log file instead of the call's result, and
//! it does not die with the turn that started it: only its deadline, [`Background::stop`], or
//! Talon's shutdown end it. Each command belongs to the session that started it; another
//! session's ids are unknown to it, so one conversation cannot read or kill another's processes.
//!
//! Bounded everywhere: at most [`MAX_RUNNING_PER_OWNER`] running per owner and [`MAX_RUNNING`]
//! in all (an owner is a caller, and a gateway has as many callers as user names), at most
//! [`KEEP_FINISHED_PER_OWNER`] finished ones remembered, and at most [`LOG_CAP`] bytes logged
//! per command (the rest is counted, not written).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::run::{self, Ending, Job, RunError};
use crate::sandbox::NetworkReport;
use crate::sandbox::network::ProxySession;

/// Running background commands one session may have at once.
pub const MAX_RUNNING_PER_OWNER: usize = 16;
/// Running background commands of every owner together.
pub const MAX_RUNNING: usize = 64;
/// Finished background commands remembered per session (the oldest are forgotten first).
pub const KEEP_FINISHED_PER_OWNER: usize = 32;
/// Bytes written to one command's log; output past it is counted and dropped.
pub const LOG_CAP: u64 = 64 << 20;
/// Bytes one read of a command's output returns at most.
pub const READ_CAP: u64 = 256 << 10;

/// Where a background command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    /// It ended (a stop shows as [`Ending::Cancelled`]).
    Finished(Ending),
}

impl Status {
    /// `running`, `completed`, `failed (exit code 2)`, `killed by signal 9`, `timed out`,
    /// `stopped`.
    pub fn describe(self) -> String {
        match self {
            Self::Running => "running".into(),
            Self::Finished(Ending::Exited(0)) => "completed".into(),
            Self::Finished(Ending::Exited(code)) => format!("failed (exit code {code})"),
            Self::Finished(Ending::Signaled(signal)) => format!("killed by signal {signal}"),
            Self::Finished(Ending::TimedOut) => "timed out".into(),
            Self::Finished(Ending::Cancelled) => "stopped".into(),
        }
    }
}

/// A snapshot of one background command.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    pub id: String,
    pub command: String,
    pub status: Status,
    pub started: SystemTime,
    /// Running time so far, or until it ended.
    pub elapsed: Duration,
    /// The log file holding its combined stdout and stderr.
    pub log: PathBuf,
    /// Bytes the command wrote in all (logged or not).
    pub output_bytes: u64,
}

/// Output read from a background command.
#[derive(Debug, Clone)]
pub struct Read {
    pub info: TaskInfo,
    /// The output since the previous read (at most [`READ_CAP`] bytes, invalid UTF-8 replaced).
    pub text: String,
    /// Bytes between the previous read and `text` that were skipped to respect [`READ_CAP`].
    pub skipped: u64,
    /// The wait for the command's end ran out (only when a wait was asked for).
    pub wait_expired: bool,
    /// What the sandbox's network proxy refused since the previous read (proxy mode only).
    pub network: Option<NetworkReport>,
}

/// Why a background request failed; the messages are for the model.
#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    #[error(
        "no background command {0:?} in this session; list them with the process tool (action \"list\")"
    )]
    Unknown(String),
    #[error(
        "this session already has {MAX_RUNNING_PER_OWNER} background commands running; stop one before starting another"
    )]
    TooMany,
    #[error(
        "{MAX_RUNNING} background commands are running here already; try again when some have ended"
    )]
    TooManyInAll,
    #[error("background command {id} is not running ({status}); its output can still be read")]
    NotRunning { id: String, status: String },
    #[error("background command {0} does not read its standard input any more")]
    StdinClosed(String),
    #[error("cannot write to background command {id}: {source}")]
    Write { id: String, source: std::io::Error },
    #[error("cannot read the output log {}: {source}", log.display())]
    Log {
        log: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Something to do when the command ends (remove sandbox placeholders, …).
pub type Cleanup = Box<dyn FnOnce() + Send>;

struct Task {
    id: String,
    owner: String,
    command: String,
    log: PathBuf,
    /// The log, read through the descriptor Talon opened (never reopened by name, so a command
    /// that renames or replaces the file cannot change what is read).
    log_reader: std::fs::File,
    started: SystemTime,
    started_at: Instant,
    status: watch::Sender<(Status, Option<Instant>)>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    stop: CancellationToken,
    /// The job's network proxy (proxy mode): kept while the command runs, read for refusals.
    network: Option<Arc<ProxySession>>,
    written: AtomicU64,
    total: AtomicU64,
    cursor: Mutex<u64>,
}

impl Task {
    fn info(&self) -> TaskInfo {
        let (status, ended) = *self.status.borrow();
        let elapsed = ended
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(self.started_at);
        TaskInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            status,
            started: self.started,
            elapsed,
            log: self.log.clone(),
            output_bytes: self.total.load(Ordering::Relaxed),
        }
    }

    fn running(&self) -> bool {
        self.status.borrow().0 == Status::Running
    }
}

/// The background commands of every session in this process.
#[derive(Default)]
pub struct Background {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("tasks", &self.lock().len())
            .finish()
    }
}

/// A new task id: 8 hex digits nobody can predict.
pub fn new_id() -> String {
    format!("{:08x}", crate::random_u64() as u32)
}

impl Background {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Task>>> {
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn task(&self, owner: &str, id: &str) -> Result<Arc<Task>, BackgroundError> {
        self.lock()
            .get(id.trim())
            .filter(|task| task.owner == owner)
            .cloned()
            .ok_or_else(|| BackgroundError::Unknown(id.to_string()))
    }

    /// `owner`'s command `id`, which must still be running.
    fn running_task(&self, owner: &str, id: &str) -> Result<Arc<Task>, BackgroundError> {
        let task = self.task(owner, id)?;
        if task.running() {
            return Ok(task);
        }
        let info = task.info();
        Err(BackgroundError::NotRunning {
            id: info.id,
            status: info.status.describe(),
        })
    }

    /// Whether `owner` may start another command now.
    pub fn check_room(&self, owner: &str) -> Result<(), BackgroundError> {
        let tasks = self.lock();
        let running = || tasks.values().filter(|t| t.running());
        if running().filter(|t| t.owner == owner).count() >= MAX_RUNNING_PER_OWNER {
            return Err(BackgroundError::TooMany);
        }
        if running().count() >= MAX_RUNNING {
            return Err(BackgroundError::TooManyInAll);
        }
        Ok(())
    }

    /// Starts `job` for `owner` as task `id`, logging its output to `log_file` (opened for
    /// reading and appending, at `log`). `cleanup` runs once the command has ended, or at once
    /// when it could not be started; the job's network proxy, if any, serves it until then.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        self: &Arc<Self>,
        owner: &str,
        id: String,
        command: &str,
        job: Job,
        log_file: std::fs::File,
        log: PathBuf,
        cleanup: Option<Cleanup>,
    ) -> Result<TaskInfo, BackgroundError> {
        let prepared = self.check_room(owner).and_then(|()| {
            let log_reader = log_file
                .try_clone()
                .map_err(|source| BackgroundError::Log {
                    log: log.clone(),
                    source,
                })?;
            Ok((log_reader, run::start(&job, Stdio::piped())?))
        });
        let (log_reader, mut started) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                // Nothing started: what the sandbox set up for it goes now.
                if let Some(cleanup) = cleanup {
                    cleanup();
                }
                return Err(e);
            }
        };
        let task = Arc::new(Task {
            id: id.clone(),
            owner: owner.to_string(),
            command: command.to_string(),
            log,
            log_reader,
            started: SystemTime::now(),
            started_at: Instant::now(),
            status: watch::channel((Status::Running, None)).0,
            stdin: tokio::sync::Mutex::new(started.child.stdin.take()),
            stop: CancellationToken::new(),
            network: job.network.clone(),
            written: AtomicU64::new(0),
            total: AtomicU64::new(0),
            cursor: Mutex::new(0),
        });
        let sink = Arc::new(Mutex::new(log_file));
        let pumps: Vec<_> = [
            started
                .child
                .stdout
                .take()
                .map(|s| pump(s, Arc::clone(&sink), Arc::clone(&task))),
            started
                .child
                .stderr
                .take()
                .map(|s| pump(s, Arc::clone(&sink), Arc::clone(&task))),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.lock().insert(id, Arc::clone(&task));
        self.forget_old(owner);
        let info = task.info();
        tokio::spawn(async move {
            let ending = started.finish(job.timeout, &task.stop).await;
            for handle in pumps {
                run::drain(Some(handle)).await;
            }
            *task.stdin.lock().await = None;
            if let Some(proxy) = &task.network {
                proxy.stop();
            }
            if let Some(cleanup) = cleanup {
                cleanup();
            }
            task.status
                .send_replace((Status::Finished(ending), Some(Instant::now())));
        });
        Ok(info)
    }

    /// Forgets `owner`'s oldest finished commands past [`KEEP_FINISHED_PER_OWNER`].
    fn forget_old(&self, owner: &str) {
        let mut tasks = self.lock();
        let mut finished: Vec<(Instant, String)> = tasks
            .values()
            .filter(|t| t.owner == owner && !t.running())
            .map(|t| (t.started_at, t.id.clone()))
            .collect();
        if finished.len() <= KEEP_FINISHED_PER_OWNER {
            return;
        }
        finished.sort();
        let excess = finished.len() - KEEP_FINISHED_PER_OWNER;
        for (_, id) in finished.into_iter().take(excess) {
            tasks.remove(&id);
        }
    }

    /// `owner`'s commands, oldest first.
    pub fn list(&self, owner: &str) -> Vec<TaskInfo> {
        let mut list: Vec<TaskInfo> = self
            .lock()
            .values()
            .filter(|t| t.owner == owner)
            .map(|t| t.info())
            .collect();
        list.sort_by_key(|t| t.started);
        list
    }

    /// The output of `owner`'s command `id` since the previous read, after waiting up to `wait`
    /// for the command to end (no wait: what is there now).
    pub async fn read(
        &self,
        owner: &str,
        id: &str,
        wait: Option<Duration>,
    ) -> Result<Read, BackgroundError> {
        let task = self.task(owner, id)?;
        let mut wait_expired = false;
        if let Some(wait) = wait {
            let mut status = task.status.subscribe();
            let ended =
                tokio::time::timeout(wait, status.wait_for(|(s, _)| *s != Status::Running)).await;
            wait_expired = ended.is_err();
        }
        let (text, skipped) = read_new(&task)?;
        Ok(Read {
            info: task.info(),
            text,
            skipped,
            wait_expired,
            network: task.network.as_ref().and_then(|proxy| proxy.report()),
        })
    }

    /// Writes `data` to the command's standard input; `close` closes it afterwards (end of file).
    pub async fn write(
        &self,
        owner: &str,
        id: &str,
        data: &[u8],
        close: bool,
    ) -> Result<TaskInfo, BackgroundError> {
        let task = self.running_task(owner, id)?;
        let mut stdin = task.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(BackgroundError::StdinClosed(task.id.clone()));
        };
        let written = async {
            pipe.write_all(data).await?;
            pipe.flush().await
        };
        match tokio::time::timeout(Duration::from_secs(10), written).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                *stdin = None;
                return Err(BackgroundError::Write {
                    id: task.id.clone(),
                    source,
                });
            }
            Err(_) => {
                return Err(BackgroundError::Write {
                    id: task.id.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the command did not read its input for 10 seconds",
                    ),
                });
            }
        }
        if close {
            *stdin = None;
        }
        Ok(task.info())
    }

    /// Stops `owner`'s command `id` (SIGTERM to its group, SIGKILL after the grace period) and
    /// waits for it to be gone.
    pub async fn stop(&self, owner: &str, id: &str) -> Result<TaskInfo, BackgroundError> {
        let task = self.running_task(owner, id)?;
        task.stop.cancel();
        let mut status = task.status.subscribe();
        let _ = tokio::time::timeout(
            run::GRACE + Duration::from_secs(5),
            status.wait_for(|(s, _)| *s != Status::Running),
        )
        .await;
        Ok(task.info())
    }

    /// Stops every running command (Talon is shutting down).
    pub fn stop_all(&self) {
        for task in self.lock().values() {
            task.stop.cancel();
        }
    }

    /// Stops every running command and waits (up to the grace period and a little more) until
    /// they are gone, so none outlives Talon.
    pub async fn stop_all_and_wait(&self) {
        let running: Vec<Arc<Task>> = self
            .lock()
            .values()
            .filter(|t| t.running())
            .cloned()
            .collect();
        for task in &running {
            task.stop.cancel();
        }
        let all_ended = async {
            for task in &running {
                let mut status = task.status.subscribe();
                let _ = status.wait_for(|(s, _)| *s != Status::Running).await;
            }
        };
        let _ = tokio::time::timeout(run::GRACE + Duration::from_secs(2), all_ended).await;
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Copies one stream into the shared log, up to [`LOG_CAP`] bytes, counting the rest.
fn pump<R: AsyncRead + Unpin + Send + 'static>(
    mut stream: R,
    sink: Arc<Mutex<std::fs::File>>,
    task: Arc<Task>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            task.total.fetch_add(n as u64, Ordering::Relaxed);
            let mut file = sink.lock().unwrap_or_else(|p| p.into_inner());
            let written = task.written.load(Ordering::Relaxed);
            let room = LOG_CAP.saturating_sub(written);
            let keep = (n as u64).min(room) as usize;
            if keep > 0 && file.write_all(&buf[..keep]).is_ok() {
                task.written.fetch_add(keep as u64, Ordering::Relaxed);
            }
        }
    })
}

/// The log's bytes since the task's read cursor (at most [`READ_CAP`], the newest kept), and
/// how many were skipped; advances the cursor.
fn read_new(task: &Task) -> Result<(String, u64), BackgroundError> {
    use std::os::unix::fs::FileExt;
    let mut cursor = task.cursor.lock().unwrap_or_else(|p| p.into_inner());
    let end = task.written.load(Ordering::Relaxed);
    let from = (*cursor).max(end.saturating_sub(READ_CAP));
    let skipped = from - *cursor;
    let mut bytes = vec![0u8; usize::try_from(end - from).unwrap_or(0)];
    let mut filled = 0;
    while filled < bytes.len() {
        match task
            .log_reader
            .read_at(&mut bytes[filled..], from + filled as u64)
        {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(BackgroundError::Log {
                    log: task.log.clone(),
                    source,
                });
            }
        }
    }
    bytes.truncate(filled);
    *cursor = from + filled as u64;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), skipped))
}

#[cfg(test)]
mod tests;

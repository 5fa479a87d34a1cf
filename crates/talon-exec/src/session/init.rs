//! The init that runs inside a session sandbox (`talon __sandbox-init`): it starts the commands
//! Talon sends, each in its own process group with the resource limits, streams their output
//! back, and reports how they ended.
//!
//! When a command's main process ends, whatever is left of its group is killed, and so is every
//! process in the sandbox that belongs to no running command (one that left its group with
//! `setsid`): no orphan survives a command, as with a sandbox per call. When Talon closes the
//! pipe, every command is killed and the init exits, which ends the sandbox.
//!
//! Synchronous and small on purpose (threads, no async runtime): it is started once per
//! session and must not depend on anything but the kernel.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::proto::{MAX_FRAME, Reply, Request, read_line, write_reply};
use crate::run::{Limits, set_limits};

type Out = Arc<Mutex<std::io::Stdout>>;
type Groups = Arc<Mutex<HashMap<u64, i32>>>;

fn send(out: &Out, reply: &Reply, payload: &[u8]) {
    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
    // Talon gone: nothing left to tell.
    let _ = write_reply(&mut *out, reply, payload);
}

fn pump(
    mut stream: impl Read + Send + 'static,
    id: u64,
    which: u8,
    out: Out,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; MAX_FRAME];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            let reply = Reply::Output {
                id,
                stream: which,
                len: n,
            };
            send(&out, &reply, &buf[..n]);
        }
    })
}

/// Kills every process in this PID namespace that is neither the namespace's init, this
/// process, nor in the group of a running command.
fn kill_strays(groups: &Groups) {
    let keep: Vec<i32> = groups
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .copied()
        .collect();
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 1 || pid == me {
            continue;
        }
        let pgid = nix::unistd::getpgid(Some(Pid::from_raw(pid))).map(Pid::as_raw);
        if let Ok(pgid) = pgid
            && !keep.contains(&pgid)
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Whether the init runs under `limits` itself (setting them the first time).
fn own_limits(limits: Limits) -> bool {
    static OWN: std::sync::OnceLock<Option<Limits>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| set_limits(&limits).ok().map(|()| limits)) == Some(limits)
}

fn start(
    id: u64,
    argv: Vec<String>,
    cwd: String,
    env: Vec<(String, String)>,
    limits: Limits,
    out: &Out,
    groups: &Groups,
) {
    let Some((program, args)) = argv.split_first() else {
        send(
            out,
            &Reply::Failed {
                id,
                message: "no command given".into(),
            },
            &[],
        );
        return;
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The init takes the limits on itself once, so its children inherit them and can be
    // started with posix_spawn (much cheaper than fork); other limits fall back to a pre-exec
    // hook in a forked child.
    if !own_limits(limits) {
        // SAFETY: runs in the forked child before exec; setrlimit only (async-signal-safe).
        unsafe {
            command.pre_exec(move || set_limits(&limits));
        }
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let message = format!("cannot start {program}: {e}");
            send(out, &Reply::Failed { id, message }, &[]);
            return;
        }
    };
    let pgid = child.id() as i32;
    groups
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, pgid);
    let pumps = [
        child.stdout.take().map(|s| pump(s, id, 1, Arc::clone(out))),
        child.stderr.take().map(|s| pump(s, id, 2, Arc::clone(out))),
    ];
    let out = Arc::clone(out);
    let groups = Arc::clone(groups);
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        kill_strays(&groups);
        for handle in pumps.into_iter().flatten() {
            let _ = handle.join();
        }
        let (code, signal) = match status {
            Ok(status) => (status.code(), status.signal()),
            Err(_) => (None, Some(9)),
        };
        send(&out, &Reply::Ended { id, code, signal }, &[]);
    });
}

/// Serves requests from stdin until it closes, then kills every command and returns.
pub fn serve() -> std::io::Result<()> {
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let groups: Groups = Arc::default();
    let mut input = BufReader::new(std::io::stdin().lock());
    while let Some(request) = read_line::<Request>(&mut input)? {
        match request {
            Request::Run {
                id,
                argv,
                cwd,
                env,
                limits,
            } => start(id, argv, cwd, env, limits, &out, &groups),
            Request::Signal { id, signal } => {
                let pgid = groups
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&id)
                    .copied();
                if let (Some(pgid), Ok(signal)) = (pgid, Signal::try_from(signal)) {
                    let _ = killpg(Pid::from_raw(pgid), signal);
                }
            }
        }
    }
    for pgid in groups
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
    {
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
    }
    let _ = std::io::stdout().flush();
    Ok(())
}

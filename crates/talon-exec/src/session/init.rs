//! The init that runs inside a session sandbox (`talon __sandbox-init`): it starts the commands
//! Talon sends, each in its own process group with the resource limits, streams their output
//! back, and reports how they ended.
//!
//! When a command's main process ends, whatever is left of its group is killed, and so is every
//! process in the sandbox that belongs to no running command (one that left its group with
//! `setsid`): no orphan survives a command, as with a sandbox per call. When Talon closes the
//! pipe, every command is killed and the init exits, which ends the sandbox.
//!
//! **Its channel is Talon's alone.** Commands run as the same user in the same PID namespace,
//! so anything the init holds that a command can open through `/proc/<pid>/fd` would let the
//! command queue work of its own (which outlived its call) or forge the replies of later calls.
//! So the init talks to Talon over two pipes passed as descriptors of their own
//! (`--control FD --replies FD`), never over the standard streams that bubblewrap's own init
//! (PID 1 of the namespace) keeps too; bubblewrap's PID 1 closes every other descriptor. Before
//! anything else the init makes itself non-dumpable (`PR_SET_DUMPABLE 0`): the kernel then
//! refuses its `/proc/<pid>/fd`, `mem` and `environ` to processes without `CAP_SYS_PTRACE`,
//! which no command has. Both channel descriptors are close-on-exec, so no command inherits them.
//!
//! After each command the init also kills every process of the namespace but its own and those
//! of the commands still running, until none is left: nothing Talon did not start survives a
//! call.
//!
//! Synchronous and small on purpose (threads, no async runtime): it is started once per
//! session and must not depend on anything but the kernel.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::proto::{MAX_FRAME, Reply, Request, read_line, write_reply};
use crate::run::{Limits, set_limits};

type Out = Arc<Mutex<File>>;
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

/// The process group of `pid`, unless it is a zombie (already dead, waiting to be reaped) or
/// gone.
fn live_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    (state != "Z" && state != "X").then_some(pgrp)
}

/// Kills every process in this PID namespace that is neither the namespace's init, this
/// process, nor in the group of a running command. Repeats until a pass finds none, so a
/// process that forks while it is being killed does not leave a child behind (bounded: a pass
/// kills everything it saw, and nothing new can appear once the forkers are dead).
///
/// Each pass holds the registry of running commands, which [`start`] also holds from spawning
/// a command until its group is registered: a command started meanwhile is never taken for a
/// stray.
fn kill_strays(groups: &Groups) {
    let me = std::process::id() as i32;
    for _ in 0..100 {
        let registry = groups.lock().unwrap_or_else(PoisonError::into_inner);
        let keep: Vec<i32> = registry.values().copied().collect();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut killed = 0;
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
            if let Some(pgid) = live_group(pid)
                && !keep.contains(&pgid)
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                killed += 1;
            }
        }
        drop(registry);
        if killed == 0 {
            return;
        }
        // Give the kernel a moment to finish the kills (a killed process stays "live" in
        // /proc until it has exited).
        std::thread::sleep(std::time::Duration::from_millis(2));
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
    // Registered before any stray hunt can see the new group (see `kill_strays`).
    let mut registry = groups.lock().unwrap_or_else(PoisonError::into_inner);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            drop(registry);
            let message = format!("cannot start {program}: {e}");
            send(out, &Reply::Failed { id, message }, &[]);
            return;
        }
    };
    let pgid = child.id() as i32;
    registry.insert(id, pgid);
    drop(registry);
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

/// The channel descriptors from the init's arguments: `--control FD --replies FD`.
fn channel(args: &[OsString]) -> std::io::Result<(RawFd, RawFd)> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    let (mut control, mut replies) = (None, None);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let slot = match arg.to_str() {
            Some("--control") => &mut control,
            Some("--replies") => &mut replies,
            _ => return Err(invalid(format!("unexpected argument {arg:?}"))),
        };
        let fd = rest
            .next()
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|fd| *fd > 2)
            .ok_or_else(|| invalid(format!("{arg:?} needs a descriptor number above 2")))?;
        *slot = Some(fd);
    }
    match (control, replies) {
        (Some(control), Some(replies)) if control != replies => Ok((control, replies)),
        _ => Err(invalid(
            "--control FD and --replies FD (two descriptors) are required".into(),
        )),
    }
}

/// Makes this process non-dumpable, so that processes of the same user (every command) cannot
/// open its descriptors, memory or environment through `/proc`.
fn shut_proc_access() -> std::io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes integers only.
    if unsafe { nix::libc::prctl(nix::libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Takes descriptor `fd` as a file, close-on-exec so no command inherits it.
fn take(fd: RawFd) -> std::io::Result<File> {
    // SAFETY: F_SETFD changes the flags of a descriptor number only.
    if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: Talon passed `fd` for the init alone (`channel` checked it is not a standard
    // stream), and nothing else in this process owns it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Serves the requests on the control channel (`args`: the arguments after the subcommand)
/// until Talon closes it, then kills every command and returns.
pub fn serve(args: &[OsString]) -> std::io::Result<()> {
    shut_proc_access()?;
    let (control, replies) = channel(args)?;
    let (control, replies) = (take(control)?, take(replies)?);
    let out: Out = Arc::new(Mutex::new(replies));
    let groups: Groups = Arc::default();
    let mut input = BufReader::new(control);
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
    let _ = out.lock().unwrap_or_else(PoisonError::into_inner).flush();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_channel_is_two_descriptors_past_the_standard_streams() {
        assert_eq!(
            channel(&os(&["--control", "5", "--replies", "6"])).unwrap(),
            (5, 6)
        );
        for bad in [
            &[][..],
            &["--control", "5"],
            &["--control", "0", "--replies", "6"],
            &["--control", "5", "--replies", "5"],
            &["--control", "x", "--replies", "6"],
            &["--stdin"],
        ] {
            assert!(channel(&os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn stat_lines_give_the_group_of_live_processes() {
        let me = std::process::id() as i32;
        let own = nix::unistd::getpgid(None).unwrap().as_raw();
        assert_eq!(live_group(me), Some(own));
        assert_eq!(live_group(i32::MAX), None);
    }
}

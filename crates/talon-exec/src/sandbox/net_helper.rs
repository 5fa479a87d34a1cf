//! `talon __sandbox-net`: the first program inside a proxy-mode sandbox.
//!
//! The sandbox's network namespace has only a loopback interface. This helper listens there
//! ([`super::network::BRIDGE_ADDR`]), relays every connection to the proxy's bind-mounted Unix
//! socket ([`talon_net::Bridge`]), and runs the command with the proxy variables
//! ([`talon_net::proxy_env`]) pointing at itself. It decides nothing: every check happens in the
//! proxy, outside the sandbox. It exits with the command's status (its exit code, or 128 + the
//! signal that ended it, as a shell reports it), so the caller sees the command's own ending.
//!
//! It is a subcommand of Talon's binary rather than a separate program so there is one file to
//! install; `talon` recognises it before reading any configuration (there is none to read inside
//! the sandbox).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

use talon_net::{Bridge, proxy_env};
use tokio_util::sync::CancellationToken;

use super::network::HELPER_SUBCOMMAND;

/// Exit status when the helper itself failed (bad arguments, no listener): the command did not
/// run. 125 is what `env`, `nice` and `timeout` use for their own failures.
pub const HELPER_FAILED: u8 = 125;

/// The helper's arguments: `--listen ADDR --socket PATH -- PROGRAM [ARGS…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    listen: SocketAddr,
    socket: PathBuf,
    argv: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Result<Args, String> {
    let mut listen = None;
    let mut socket = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--listen") => {
                let value = rest.next().and_then(|v| v.to_str()).unwrap_or_default();
                listen = Some(
                    value
                        .parse::<SocketAddr>()
                        .map_err(|e| format!("--listen {value:?}: {e}"))?,
                );
            }
            Some("--socket") => {
                socket = rest.next().map(PathBuf::from);
            }
            Some("--") => break,
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    let argv: Vec<OsString> = rest.cloned().collect();
    if argv.is_empty() {
        return Err("no command after --".into());
    }
    Ok(Args {
        listen: listen.ok_or("--listen ADDR is required")?,
        socket: socket.ok_or("--socket PATH is required")?,
        argv,
    })
}

/// Runs the helper with the arguments that follow the subcommand name; returns the exit status.
pub fn helper_main(args: &[OsString]) -> u8 {
    let fail = |message: String| {
        eprintln!("talon {HELPER_SUBCOMMAND}: {message}");
        HELPER_FAILED
    };
    let args = match parse(args) {
        Ok(args) => args,
        Err(e) => return fail(e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    runtime.block_on(run(args)).unwrap_or_else(fail)
}

async fn run(args: Args) -> Result<u8, String> {
    let bridge = Bridge::bind(args.listen, args.socket)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = bridge
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let cancel = CancellationToken::new();
    let relay = tokio::spawn(bridge.run(cancel.clone()));
    let Some((program, rest)) = args.argv.split_first() else {
        return Err("no command after --".into());
    };
    // The command gets no Unix sockets: the helper needed one to reach the proxy, the command
    // would reach the host's (a D-Bus bus, docker.sock) through paths it can see.
    let refusal = super::seccomp::unix_socket_refusal()?;
    let mut command = tokio::process::Command::new(program);
    command.args(rest).envs(proxy_env(addr));
    // SAFETY: runs in the forked child before exec; `install` is two system calls on memory
    // prepared before the fork, and allocates nothing.
    unsafe {
        command.pre_exec(move || super::seccomp::install(&refusal));
    }
    let status = command.status().await;
    cancel.cancel();
    let _ = relay.await;
    match status {
        Ok(status) => Ok(match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(1),
            (None, None) => 1,
        }),
        Err(e) => {
            eprintln!("{}: {e}", program.to_string_lossy());
            // As a shell: 127 when the program does not exist, 126 when it cannot run.
            Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_parse() {
        let args = parse(&os(&[
            "--listen",
            "127.0.0.1:3128",
            "--socket",
            "/tmp/s",
            "--",
            "sh",
            "-c",
            "echo --listen",
        ]))
        .expect("parses");
        assert_eq!(args.listen, "127.0.0.1:3128".parse().expect("addr"));
        assert_eq!(args.socket, PathBuf::from("/tmp/s"));
        assert_eq!(args.argv, os(&["sh", "-c", "echo --listen"]));
        for bad in [
            &["--listen", "nope", "--socket", "/s", "--", "x"][..],
            &["--socket", "/s", "--", "x"],
            &["--listen", "127.0.0.1:1", "--socket", "/s", "--"],
            &["--bogus"],
        ] {
            assert!(parse(&os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_gets_the_proxy_and_its_status_is_forwarded() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("none.sock");
        let run = |script: &str| {
            let mut args = os(&["--listen", "127.0.0.1:0", "--socket"]);
            args.push(socket.clone().into());
            args.extend(os(&["--", "/bin/sh", "-c", script]));
            helper_main(&args)
        };
        assert_eq!(
            run("case \"$HTTPS_PROXY $all_proxy $NO_PROXY.\" in \
                 'http://127.0.0.1:'*' socks5h://127.0.0.1:'*' .') exit 7;; esac; exit 1"),
            7
        );
        assert_eq!(run("kill -TERM $$"), 128 + 15);
        assert_eq!(helper_main(&os(&["--listen"])), HELPER_FAILED);
    }

    #[test]
    fn h21_06_the_proxied_command_gets_no_unix_socket() {
        let dir = tempfile::tempdir().expect("dir");
        let host = dir.path().join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&host).expect("binds");
        listener.set_nonblocking(true).expect("nonblocking");
        let mut args = os(&["--listen", "127.0.0.1:0", "--socket"]);
        args.push(dir.path().join("proxy.sock").into());
        args.extend(os(&["--", "python3", "-c"]));
        args.push(
            "import socket,sys\n\
             a,b=socket.socketpair()\n\
             try:\n  socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n\
             except PermissionError:\n  sys.exit(9)\n"
                .into(),
        );
        args.push(host.into());
        assert_eq!(
            helper_main(&args),
            9,
            "socket(AF_UNIX) is refused, socketpair is not"
        );
        assert!(
            listener.accept().is_err(),
            "nothing reached the host socket"
        );
    }
}

//! The naive baseline for the bridged-call benchmark (`bench/mcp/bridge_calls.py`): a process
//! that starts the command it is given and copies bytes between its own stdin/stdout and the
//! child's, one blocking thread per direction, nothing parsed. What a call through it costs
//! beyond the direct call is the price of one extra process hop by itself, which no bridge can
//! go below.
//!
//! Usage: `stdio_relay COMMAND [ARGS...]`

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: stdio_relay COMMAND [ARGS...]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("stdio_relay: cannot start the command: {e}");
            return ExitCode::from(1);
        }
    };
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        eprintln!("stdio_relay: the child has no pipes");
        return ExitCode::from(1);
    };
    let upstream = std::thread::spawn(move || copy(std::io::stdin().lock(), child_in));
    copy(child_out, std::io::stdout().lock());
    let _ = upstream.join();
    let _ = child.wait();
    ExitCode::SUCCESS
}

//! `talon __sandbox-landlock …`: the Landlock backend's wrapper around every sandboxed command.
//!
//! Hidden from the CLI (nobody types it): `main` recognises it before parsing arguments,
//! loading any configuration or starting the async runtime, so the process is single-threaded
//! when it confines itself — a Landlock domain and a seccomp filter apply to the calling
//! thread, and `exec` then hands them to the command. The work is
//! `talon_exec::sandbox::landlock`'s; this only turns its status into the exit code.

use std::ffi::OsString;
use std::process::ExitCode;

/// Confines this process as `args` say and executes the command after `--`. Returns only when
/// that failed (the command did not run).
pub fn run(args: &[OsString]) -> ExitCode {
    ExitCode::from(talon_exec::sandbox::landlock::helper_main(args))
}

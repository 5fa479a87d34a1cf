//! `talon serve`: the gateway ([`talon_runtime::serve`]) until Ctrl-C or SIGTERM, started again
//! in place when the `gateway` tool asks for a reload.

use std::path::PathBuf;
use std::process::ExitCode;

use talon_runtime::serve::{ServeError, ServeOptions, Served};

use super::usage_error;
use crate::config::Config;

pub async fn run(
    config: Config,
    bind: Option<String>,
    workspace: Option<PathBuf>,
    data_dir: Option<PathBuf>,
) -> ExitCode {
    let options = ServeOptions {
        bind,
        workspace,
        data_dir,
    };
    match talon_runtime::serve::serve(config, options, stop_signal()).await {
        Ok(Served::Stopped) => ExitCode::SUCCESS,
        Ok(Served::Reload) => restart_in_place(),
        Err(e @ ServeError::Usage(_)) => usage_error(e),
        Err(ServeError::Build(e)) => crate::commands::refused(e),
        Err(ServeError::Gateway(
            e @ (talon_gateway::GatewayError::NoTokenBeyondLoopback(_)
            | talon_gateway::GatewayError::WeakToken(_)),
        )) => usage_error(e),
        Err(e) => {
            eprintln!("talon serve: {e}");
            ExitCode::from(1)
        }
    }
}

/// Replaces this process with a new run of the same program, arguments and environment (the
/// `gateway` tool's reload); returns only if that fails.
fn restart_in_place() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            eprintln!("talon serve: cannot reload, the program's path is unknown: {e}");
            return ExitCode::from(1);
        }
    };
    let e = std::process::Command::new(program)
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("talon serve: cannot reload: {e}");
    ExitCode::from(1)
}

/// Ctrl-C or SIGTERM (a service manager stopping the server).
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for SIGTERM; stop with Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

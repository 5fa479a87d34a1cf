//! Where a command's typed errors become exit statuses, and only here (the runtime answers
//! typed errors; the HTTP API maps the same ones to statuses): 2 when the request was at fault,
//! 1 otherwise. Errors are printed with control characters made visible: they can quote a
//! server, a model or a stored value.

use std::fmt::Display;
use std::process::ExitCode;

use talon_core::visible::visible_prose;

/// Exit status for a usage or configuration error.
pub const USAGE: u8 = 2;

/// A typed error a command can end with.
pub(crate) trait Failure: Display {
    /// Whether the request was at fault (exit status 2).
    fn usage(&self) -> bool;
}

impl Failure for talon_runtime::mcp_admin::McpAdminError {
    fn usage(&self) -> bool {
        self.is_usage()
    }
}

impl Failure for talon_runtime::cron::ops::CronError {
    fn usage(&self) -> bool {
        self.is_usage()
    }
}

impl Failure for talon_runtime::cli_credentials::CredentialError {
    fn usage(&self) -> bool {
        self.is_usage()
    }
}

impl Failure for talon_runtime::op_error::OpError {
    fn usage(&self) -> bool {
        self.is_usage()
    }
}

impl Failure for talon_runtime::custom_tools::DefineError {
    fn usage(&self) -> bool {
        !matches!(self, Self::Store(_))
    }
}

impl Failure for talon_store::StoreError {
    fn usage(&self) -> bool {
        matches!(self, Self::Invalid { .. } | Self::NotFound { .. })
    }
}

impl Failure for talon_runtime::agent_runs::RunError {
    fn usage(&self) -> bool {
        matches!(self, Self::Invalid(_) | Self::UnknownAgent(_))
    }
}

impl Failure for talon_runtime::runtime::BuildError {
    fn usage(&self) -> bool {
        matches!(self, Self::Config(_))
    }
}

/// Ends with `error` and status 1.
pub(crate) fn fail(error: impl Display) -> ExitCode {
    eprintln!("talon: {}", visible_prose(&error.to_string()));
    ExitCode::from(1)
}

/// Ends with `error` and status 2: the request was wrong.
pub(crate) fn usage_error(error: impl Display) -> ExitCode {
    eprintln!("talon: {}", visible_prose(&error.to_string()));
    ExitCode::from(USAGE)
}

/// Ends with a typed error and its status.
pub(crate) fn refused(error: impl Failure) -> ExitCode {
    if error.usage() {
        usage_error(error)
    } else {
        fail(error)
    }
}

/// Prints what `say` makes of a success, or ends with the error.
pub(crate) fn said<T, E: Failure>(result: Result<T, E>, say: impl FnOnce(T) -> String) -> ExitCode {
    match result {
        Ok(value) => {
            println!("{}", say(value));
            ExitCode::SUCCESS
        }
        Err(e) => refused(e),
    }
}

//! `talon doctor`: which sandbox backends work on this host, which one the configuration makes
//! active and why, the network mode, what to do about the backends that do not work, the
//! Landlock backend's limits, and how memory is searched (hybrid or full text, what compares
//! vectors, how many chunks are embedded). Exit 0 when the configured backend works (or the sandbox is off
//! by the operator's choice) and a test command ran, 1 otherwise.
//!
//! The checks are `talon_exec::sandbox::diagnose`'s (with this binary as the sandboxes' helper);
//! this command prints them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use talon_exec::sandbox::diagnose::{gather, trial};

use crate::config::Config;

/// Runs the checks for `config`; prints the report (text, or JSON with `as_json`) and returns
/// the exit status.
pub async fn run(config: &Config, data_dir: &Path, as_json: bool) -> ExitCode {
    let hidden: Vec<PathBuf> = std::iter::once(data_dir.to_path_buf())
        .chain(config.source.clone())
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    let mut shell = match config.exec.shell(hidden) {
        Ok(shell) => shell,
        Err(e) => return super::usage_error(format!("invalid configuration: {}", e.0)),
    };
    // As the runtime does: this binary is the sandboxes' helper.
    shell.helper = std::env::current_exe().ok();
    let report = gather(&shell);
    let (ran, line) = trial(&shell).await;
    let memory = match talon_runtime::store::open(config, data_dir).await {
        Ok(store) => config.memory.status(&store).await,
        Err(e) => format!("unavailable: {e}"),
    };
    if as_json {
        let mut json = report.json();
        json["test_command"] = serde_json::json!({"ran": ran, "result": line});
        json["memory_search"] = serde_json::json!(memory);
        json["ok"] = serde_json::json!(report.ok && ran);
        println!("{json}");
    } else {
        print!(
            "{}\nTest command: {line}\n\nMemory search: {memory}\n",
            report.text()
        );
    }
    ExitCode::from(u8::from(!(report.ok && ran)))
}

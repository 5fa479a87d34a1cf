//! Seed 000's runtime group: shell commands (`exec`; Claude Code's `Bash` lives in
//! [`crate::claude_code::bash`] and shares this module's helpers).
//!
//! Commands run through [`talon_exec::Shell`]: sandboxed by default, in their own process group,
//! with an allowlisted environment. The working directory is resolved by the file jail, so it is
//! always inside the call's workspace and never becomes a new writable root.

pub mod approvals;
pub mod background;
pub mod credentialed_exec;
pub mod custom_tool;
pub mod exec;
pub mod process;
pub mod script;

use std::path::PathBuf;
use std::time::Duration;

use talon_core::CallContext;
use talon_exec::{Ending, NetworkMode, NetworkReport, Outcome, Shell};

use crate::fs::workspace::FsConfig;

/// Characters of output the model sees (GoClaw's `execMaxOutputChars`, Claude Code's
/// `BASH_MAX_OUTPUT_LENGTH`).
pub const MAX_OUTPUT_CHARS: usize = 30_000;

/// The call's workspace and the directory a command starts in: `working_dir` (relative to the
/// workspace, or absolute inside it), resolved by the kernel like every file path, so a symlink
/// cannot move it out; the workspace itself when not given.
pub fn working_dir(
    fs: &FsConfig,
    ctx: &CallContext,
    working_dir: Option<&str>,
) -> Result<(PathBuf, PathBuf), String> {
    let jail = fs.jail(ctx)?;
    let workspace = jail.root().to_path_buf();
    let Some(dir) = working_dir.map(str::trim).filter(|d| !d.is_empty()) else {
        return Ok((workspace.clone(), workspace));
    };
    let located = jail.locate(dir).map_err(|e| format!("working_dir: {e}"))?;
    let opened = jail
        .open_read(&located)
        .map_err(|e| format!("working_dir: {e}"))?;
    if !opened.is_dir() {
        return Err(format!("working_dir: {dir} is not a directory"));
    }
    if !opened.real_abs.starts_with(&workspace) {
        return Err(format!(
            "working_dir: {dir} is outside the workspace {}; commands start inside it",
            workspace.display()
        ));
    }
    Ok((workspace, opened.real_abs))
}

/// A command text the shell can be given: not empty, no NUL byte.
pub fn check_command(command: &str) -> Result<(), String> {
    if command.trim().is_empty() {
        return Err("command is empty: pass the shell command to run".into());
    }
    if command.contains('\0') {
        return Err("command contains a NUL byte; remove it".into());
    }
    Ok(())
}

/// `Exit code N`, or how a signal, the deadline or the caller ended the command.
pub fn ending_line(outcome: &Outcome, timeout: Duration) -> Option<String> {
    match outcome.ending {
        Ending::Exited(0) => None,
        Ending::Exited(code) => Some(format!("Exit code {code}")),
        Ending::Signaled(signal) => Some(format!("Killed by signal {signal}")),
        Ending::TimedOut => Some(format!(
            "command timed out after {} and was killed (with everything it started)",
            human(timeout)
        )),
        Ending::Cancelled => Some("command aborted".into()),
    }
}

/// What sandboxed commands can reach, as a clause of the tools' descriptions ("there is no
/// network", …), so the model knows before it tries.
pub fn network_clause(shell: &Shell) -> String {
    match &shell.config().network {
        NetworkMode::Off => "there is no network".into(),
        NetworkMode::Proxy(policy) => format!(
            "the network is reachable only through Talon's proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY \
             are set) and only for {}",
            policy.reach()
        ),
        NetworkMode::Host => "the network is the host's".into(),
    }
}

/// The lines that tell the model, after a command's output, which connections the sandbox's
/// network proxy refused and what it can reach instead, so it stops retrying a destination that
/// will never answer. Shared by `exec`, `Bash` and the background readers.
pub fn network_footer(report: &NetworkReport) -> String {
    let mut lines: Vec<String> = report
        .refused
        .iter()
        .map(|line| format!("Network: {line}."))
        .collect();
    lines.push(format!(
        "The sandbox reaches {}. Other destinations are refused by the operator's configuration \
         ([exec] allowed_domains); retrying will not get through.",
        report.reach
    ));
    lines.join("\n")
}

/// `text` followed by the [`network_footer`] when the proxy refused something. Appended after
/// the output caps, so it is never truncated away.
pub fn with_network_footer(mut text: String, report: Option<&NetworkReport>) -> String {
    if let Some(report) = report {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&network_footer(report));
    }
    text
}

/// `90s`, `1500ms`.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_footer_names_each_refusal_and_the_reach() {
        let report = NetworkReport {
            refused: vec![
                "connection to evil.test:443 refused (not in the allowed domains)".into(),
            ],
            reach: "the network only through Talon's proxy, and only these domains: ok.test".into(),
        };
        assert_eq!(
            with_network_footer("out".into(), Some(&report)),
            "out\nNetwork: connection to evil.test:443 refused (not in the allowed domains).\n\
             The sandbox reaches the network only through Talon's proxy, and only these domains: ok.test. \
             Other destinations are refused by the operator's configuration ([exec] allowed_domains); \
             retrying will not get through."
        );
        assert_eq!(with_network_footer("out".into(), None), "out");
    }
}

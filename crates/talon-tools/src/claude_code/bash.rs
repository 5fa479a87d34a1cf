//! `Bash` (Claude Code dialect): run a command with bash in the workspace, sandboxed unless the
//! operator turned the sandbox off. The working directory persists across calls of a session
//! (other shell state does not), as in Claude Code.
//!
//! The directory comes from a report the shell prints at its end, which the command can forge
//! (it can read the marker from its own trap) or make stale (a background command turns the
//! directory into a symbolic link out of the workspace). So a directory is trusted only as
//! [`inside`] finds it, both when the report is read and again before the next call uses it:
//! resolved (symbolic links, `..`) and still a directory inside the workspace. Otherwise the
//! session goes back to the workspace root and the model is told.
//!
//! Result: stdout (leading blank lines and trailing whitespace removed), stderr with `Exit code N`
//! appended on failure, joined by a newline; capped at 30,000 characters with
//! `... [K lines truncated] ...`. `dangerouslyDisableSandbox` is accepted for compatibility and
//! never honoured: only the operator decides where commands run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::cap::cap_head_lines;
use talon_exec::{Ending, Request, Shell};

use crate::fs::workspace::FsConfig;
use crate::runtime::background::{self, DEFAULT_LIFETIME};
use crate::runtime::credentialed_exec;
use crate::runtime::exec::ExecInput;
use crate::runtime::{
    MAX_OUTPUT_CHARS, check_command, ending_line, network_clause, with_network_footer, working_dir,
};
use crate::session_map::SessionMap;

/// Default timeout (ms).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout (ms).
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Input of [`Bash`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command to execute.
    pub command: String,
    /// Optional timeout in milliseconds (max 600000).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Clear, concise description of what this command does in 5-10 words, in active voice.
    #[serde(default)]
    pub description: Option<String>,
    /// Set to true to run this command in the background.
    #[serde(default)]
    pub run_in_background: Option<bool>,
    /// Accepted for compatibility; the sandbox is the operator's decision and stays on.
    #[serde(default, rename = "dangerouslyDisableSandbox")]
    pub dangerously_disable_sandbox: Option<bool>,
}

/// The `Bash` tool.
#[derive(Debug)]
pub struct Bash {
    pub fs: Arc<FsConfig>,
    pub shell: Arc<Shell>,
    /// Working directory per session key.
    cwds: SessionMap<PathBuf>,
}

impl Bash {
    pub fn new(fs: Arc<FsConfig>, shell: Arc<Shell>) -> Self {
        Self {
            fs,
            shell,
            cwds: SessionMap::default(),
        }
    }
}

/// Wraps `command` so the shell reports its final directory on stderr behind `marker`.
fn with_cwd_report(command: &str, marker: &str) -> String {
    format!("trap 'printf \"\\n{marker}%s\\n\" \"$(pwd -P)\" >&2' EXIT\n{command}")
}

/// Splits the directory report off stderr: (stderr without it, the reported directory).
fn take_cwd_report(stderr: &str, marker: &str) -> (String, Option<PathBuf>) {
    let needle = format!("\n{marker}");
    let Some(at) = stderr.rfind(&needle) else {
        return (stderr.to_string(), None);
    };
    let rest = &stderr[at + needle.len()..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let dir = PathBuf::from(&rest[..line_end]);
    let mut cleaned = stderr[..at].to_string();
    cleaned.push_str(rest.get(line_end + 1..).unwrap_or(""));
    (cleaned, Some(dir))
}

/// `dir` resolved (symbolic links, `.` and `..`), if it is a directory inside `workspace`
/// (itself resolved).
fn inside(dir: &Path, workspace: &Path) -> Option<PathBuf> {
    let workspace = std::fs::canonicalize(workspace).ok()?;
    let dir = std::fs::canonicalize(dir).ok()?;
    (dir.starts_with(&workspace) && dir.is_dir()).then_some(dir)
}

/// The note for a directory that was not kept.
fn reset_note(workspace: &Path) -> String {
    format!(
        "Shell cwd was reset to {} (commands stay inside the workspace)",
        workspace.display()
    )
}

/// Claude Code's result text.
fn render(stdout: &str, stderr: &str, ending: Option<&str>, notes: &[String]) -> String {
    let stdout = stdout.trim_start_matches(['\n', '\r']).trim_end();
    let mut stderr = stderr.trim().to_string();
    if let Some(line) = ending {
        if !stderr.is_empty() {
            stderr.push('\n');
        }
        stderr.push_str(line);
    }
    let mut parts: Vec<&str> = [stdout, stderr.as_str()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    parts.extend(notes.iter().map(String::as_str));
    cap_head_lines(&parts.join("\n"), MAX_OUTPUT_CHARS)
}

impl Tool for Bash {
    type Input = BashInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Bash",
            format!(
                "Executes a bash command in the workspace and returns its output. The working directory \
                 persists between commands in a session; shell variables and other state do not. Commands run \
                 in a sandbox: the workspace is writable, the rest of the filesystem read-only, {network}, and \
                 git hooks, shell rc files and agent settings cannot be changed. timeout is in milliseconds \
                 (default 120000, max 600000). Output over 30000 characters is truncated. run_in_background: \
                 true starts the command and returns a task id at once; read its output with TaskOutput and \
                 stop it with TaskStop.",
                network = network_clause(&self.shell)
            ),
            SideEffect::Spawns,
        )
        .same_as("exec")
        .in_group("claude_code")
        .in_group("runtime")
        .delegating_to(credentialed_exec::NAME)
        .with_shell_script_arg("command")
    }

    async fn execute(&self, call: Authorized<BashInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        or_error!(check_command(&input.command));
        let ms = input.timeout.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(1..=MAX_TIMEOUT_MS).contains(&ms) {
            return ToolOutput::error(format!(
                "timeout must be between 1 and {MAX_TIMEOUT_MS} milliseconds, got {ms}"
            ));
        }
        let timeout = Duration::from_millis(ms);
        let (workspace, root) = or_error!(working_dir(&self.fs, ctx, None));
        let mut notes = Vec::new();
        if input.dangerously_disable_sandbox == Some(true) {
            notes.push(
                "Note: dangerouslyDisableSandbox was ignored; whether commands are sandboxed is decided by the \
                 operator's configuration."
                    .to_string(),
            );
        }
        // The working directory is the caller's, like its background commands: callers of one
        // gateway token share a session key.
        let caller = crate::runtime::background::owner(ctx);
        let cwd = match self.cwds.get(&caller) {
            None => root,
            Some(dir) => match inside(&dir, &workspace) {
                Some(dir) => dir,
                None => {
                    self.cwds.insert(&caller, workspace.clone());
                    notes.push(reset_note(&workspace));
                    root
                }
            },
        };
        // A command running a CLI with stored credentials granted to this agent runs without a
        // shell, as through `exec`, on the permission step's analysis of the command.
        let routed = ExecInput {
            command: input.command.clone(),
            working_dir: cwd
                .strip_prefix(&workspace)
                .ok()
                .map(|rel| rel.display().to_string())
                .filter(|rel| !rel.is_empty()),
            timeout: input.timeout.map(|ms| ms.div_ceil(1000)),
            background: input.run_in_background,
        };
        if let Some(permit) = call.delegation(credentialed_exec::NAME)
            && let Some(output) = credentialed_exec::route(
                &self.fs,
                &self.shell,
                ctx,
                &routed,
                call.script(),
                &permit,
            )
            .await
        {
            return output;
        }
        let request = |command, timeout| Request {
            shell: Path::new("/bin/bash"),
            command,
            cwd: &cwd,
            workspace: &workspace,
            agent: ctx.agent_key.as_deref(),
            session: Some(&ctx.session_key),
            timeout,
            env: &[],
        };
        if input.run_in_background == Some(true) {
            let request = request(&input.command, DEFAULT_LIFETIME);
            let info = or_error!(background::start(&self.fs, &self.shell, ctx, &request));
            notes.insert(
                0,
                format!(
                    "Command running in background with ID: {}. Output is being written to: {}",
                    info.id,
                    background::shown_log(&info, Some(&workspace))
                ),
            );
            return ToolOutput::text(notes.join("\n"));
        }
        let marker = format!("__TALON_CWD_{:016x}=", talon_exec::random_u64());
        let script = with_cwd_report(&input.command, &marker);
        let outcome = or_error!(
            self.shell
                .run(&request(&script, timeout), &ctx.cancel)
                .await
        );
        let (stderr, reported) = take_cwd_report(&outcome.stderr.text(), &marker);
        match reported.map(|dir| inside(&dir, &workspace)) {
            Some(Some(dir)) => self.cwds.insert(&caller, dir),
            Some(None) => {
                self.cwds.insert(&caller, workspace.clone());
                notes.push(reset_note(&workspace));
            }
            None => {}
        }
        let ending = match outcome.ending {
            Ending::Cancelled => {
                Some("<error>Command was aborted before completion</error>".into())
            }
            _ => ending_line(&outcome, timeout),
        };
        let text = render(&outcome.stdout.text(), &stderr, ending.as_deref(), &notes);
        let text = with_network_footer(text, outcome.network.as_ref());
        if outcome.success() {
            ToolOutput::text(text)
        } else {
            ToolOutput::error(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_result_shape() {
        assert_eq!(render("\n\nout  \n", "", None, &[]), "out");
        assert_eq!(
            render("out\n", " warn \n", Some("Exit code 1"), &[]),
            "out\nwarn\nExit code 1"
        );
        assert_eq!(render("", "", Some("Exit code 3"), &[]), "Exit code 3");
    }

    #[test]
    fn the_directory_report_is_taken_off_stderr() {
        let m = "__TALON_CWD_00ff=";
        let (rest, dir) = take_cwd_report(&format!("oops\n\n{m}/ws/sub\n"), m);
        assert_eq!(rest, "oops\n");
        assert_eq!(dir, Some(PathBuf::from("/ws/sub")));
        let (rest, dir) = take_cwd_report("plain", m);
        assert_eq!((rest.as_str(), dir), ("plain", None));
        assert!(with_cwd_report("ls", m).ends_with("\nls"));
    }
}

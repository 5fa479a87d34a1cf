//! `exec` (GoClaw dialect; the legacy alias `bash` reaches it): run a shell command in the
//! workspace, sandboxed unless the operator turned the sandbox off.
//!
//! Result: stdout, then `STDERR:` and stderr when there is any, then `Exit code N` (or how the
//! command was stopped), capped at 30,000 characters with GoClaw's head+tail rule, on success
//! and on error alike.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::cap::cap_head_tail;
use talon_exec::{Request, Shell};

use super::background::{self, DEFAULT_LIFETIME};
use super::{
    MAX_OUTPUT_CHARS, check_command, ending_line, network_clause, with_network_footer, working_dir,
};
use crate::fs::workspace::FsConfig;

/// Default timeout in seconds (GoClaw's `ExecDefaultTimeoutSeconds`).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Longest timeout a call may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 3600;

/// Input of [`Exec`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecInput {
    /// The shell command to run (`/bin/sh -c`).
    pub command: String,
    /// Directory to run in, relative to the workspace (default: the workspace root).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Seconds before the command and everything it started are killed (default 60, max 3600;
    /// in the background: no default limit beyond 24 hours).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Run in the background and return its process id at once; manage it with the process tool.
    #[serde(default)]
    pub background: Option<bool>,
}

/// The `exec` tool.
#[derive(Debug, Clone)]
pub struct Exec {
    pub fs: Arc<FsConfig>,
    pub shell: Arc<Shell>,
}

/// GoClaw's result text: stdout, `STDERR:` and stderr, the ending line; or its placeholder.
pub(crate) fn render(stdout: &str, stderr: &str, ending: Option<&str>) -> String {
    let mut text = stdout.to_string();
    if !stderr.is_empty() {
        text.push_str("\nSTDERR:\n");
        text.push_str(stderr);
    }
    if text.trim().is_empty() {
        text = "(command completed with no output)".into();
    }
    if let Some(line) = ending {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
    }
    cap_head_tail(&text, MAX_OUTPUT_CHARS)
}

impl Tool for Exec {
    type Input = ExecInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "exec",
            format!(
                "Run a shell command (/bin/sh -c) in the workspace and return its output (stdout, then STDERR: \
                 and stderr) and exit code. Commands run in a sandbox: the workspace is writable, the rest of \
                 the filesystem read-only, {network}, and git hooks, shell rc files and agent settings in the \
                 workspace cannot be changed. working_dir is relative to the workspace; timeout is in seconds \
                 (default 60, max 3600). Output over 30000 characters is truncated: redirect long output to a \
                 file and read it. background: true starts the command and returns its id at once; manage it \
                 with the process tool.",
                network = network_clause(&self.shell)
            ),
            SideEffect::Spawns,
        )
        .in_group("runtime")
        .delegating_to(super::credentialed_exec::NAME)
        .with_shell_script_arg("command")
    }

    async fn execute(&self, call: Authorized<ExecInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        or_error!(check_command(&input.command));
        // A command running a CLI with stored credentials granted to this agent runs without a
        // shell, when the pipeline authorized the hand-off to credentialed_exec. Routing reads
        // the permission step's analysis of the command (`call.script()`).
        if let Some(permit) = call.delegation(super::credentialed_exec::NAME)
            && let Some(output) = super::credentialed_exec::route(
                &self.fs,
                &self.shell,
                ctx,
                input,
                call.script(),
                &permit,
            )
            .await
        {
            return output;
        }
        let (workspace, cwd) = or_error!(working_dir(&self.fs, ctx, input.working_dir.as_deref()));
        let secs = input.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(1..=MAX_TIMEOUT_SECS).contains(&secs) {
            return ToolOutput::error(format!(
                "timeout must be between 1 and {MAX_TIMEOUT_SECS} seconds, got {secs}"
            ));
        }
        let in_background = input.background == Some(true);
        let timeout = match (in_background, input.timeout) {
            (true, None) => DEFAULT_LIFETIME,
            _ => Duration::from_secs(secs),
        };
        let request = Request {
            shell: Path::new("/bin/sh"),
            command: &input.command,
            cwd: &cwd,
            workspace: &workspace,
            agent: ctx.agent_key.as_deref(),
            session: Some(&ctx.session_key),
            timeout,
            env: &[],
        };
        if in_background {
            let info = or_error!(background::start(&self.fs, &self.shell, ctx, &request));
            return ToolOutput::text(format!(
                "Started background process {id}: {command}\nOutput log: {log}\nUse the process tool with id \"{id}\": \
                 action \"output\" to read its output, \"write\" to send input, \"kill\" to stop it.",
                id = info.id,
                command = input.command.trim(),
                log = background::shown_log(&info, Some(&workspace)),
            ));
        }
        run_to_end(&self.shell, &request, ctx).await
    }
}

/// Runs `request` to its end (or its timeout, or the caller's cancel) and gives the result in
/// GoClaw's shape ([`render`]), with the network footer; an error result unless it succeeded.
/// `exec` and the custom tools end their calls here.
pub(crate) async fn run_to_end(
    shell: &Shell,
    request: &Request<'_>,
    ctx: &talon_core::CallContext,
) -> ToolOutput {
    let outcome = or_error!(shell.run(request, &ctx.cancel).await);
    let ending = ending_line(&outcome, request.timeout);
    let text = render(
        &outcome.stdout.text(),
        &outcome.stderr.text(),
        ending.as_deref(),
    );
    let text = with_network_footer(text, outcome.network.as_ref());
    if outcome.success() {
        ToolOutput::text(text)
    } else {
        ToolOutput::error(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goclaw_result_shape() {
        assert_eq!(render("", "", None), "(command completed with no output)");
        assert_eq!(render("out\n", "err\n", None), "out\n\nSTDERR:\nerr\n");
        assert_eq!(
            render("", "boom\n", Some("Exit code 2")),
            "\nSTDERR:\nboom\nExit code 2"
        );
        let long = "x\n".repeat(40_000);
        let capped = render(&long, "", Some("Exit code 1"));
        assert!(capped.chars().count() < MAX_OUTPUT_CHARS + 200);
        assert!(
            capped.contains("Exit code 1"),
            "the ending survives the cap"
        );
    }
}

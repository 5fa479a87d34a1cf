//! Shell-command hooks (`sh -c`, Claude Code's exit codes), and the check that their program
//! exists before Talon starts.
//!
//! Why the check and the fail-closed rule: a hook is often a gate (a PreToolUse policy). A gate
//! whose command is missing (a typo, an uninstalled script) used to be a non-blocking error, so
//! every call ran as if no gate were configured. Now a configured command is resolved at start,
//! and a blocking hook (PreToolUse, UserPromptSubmit) that still cannot run at call time (its
//! program vanished, `sh` exits 126 or 127) refuses the call.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{Hook, HookInput, HookOutcome};

/// Events whose hooks gate what follows: one that cannot run refuses.
const BLOCKING: [&str; 2] = ["PreToolUse", "UserPromptSubmit"];

/// Why a hook command gave no outcome.
struct Failure {
    message: String,
    /// The command ran (and failed, timed out, exited non-zero); false: it could not be run.
    ran: bool,
}

impl Failure {
    fn ran(message: String) -> Self {
        Self { message, ran: true }
    }

    fn not_run(message: String) -> Self {
        Self {
            message,
            ran: false,
        }
    }
}

/// A hook command whose program cannot be found or run.
#[derive(Debug, thiserror::Error)]
#[error("hook command {command:?}: {reason}")]
pub struct HookCommandError {
    pub command: String,
    pub reason: String,
}

/// A hook that runs a shell command (`sh -c`), Claude Code style.
#[derive(Debug, Clone)]
pub struct CommandHook {
    pub command: String,
    pub timeout: Duration,
}

impl CommandHook {
    /// Claude Code's default hook timeout is 60 s.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            timeout: Duration::from_secs(60),
        }
    }

    async fn execute(&self, input: &HookInput) -> Result<HookOutcome, Failure> {
        let payload = serde_json::to_vec(input).map_err(|e| Failure::ran(e.to_string()))?;
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .current_dir(if input.cwd.is_empty() {
                "."
            } else {
                input.cwd.as_str()
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::not_run(format!("cannot start hook command: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its stdin is fine; ignore a broken pipe.
            let _ = stdin.write_all(&payload).await;
        }
        let output = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| Failure::ran(format!("hook timed out after {}s", self.timeout.as_secs())))?
            .map_err(|e| Failure::ran(format!("hook failed: {e}")))?;
        match output.status.code() {
            Some(0) => {
                let stdout = String::from_utf8_lossy(&output.stdout);
                let trimmed = stdout.trim();
                if trimmed.is_empty() {
                    return Ok(HookOutcome::default());
                }
                match serde_json::from_str::<Value>(trimmed) {
                    Ok(value) => Ok(HookOutcome::from_claude_json(&value)),
                    // Plain text on stdout is context for the model (Claude Code does the same
                    // for some events); it never changes a decision.
                    Err(_) => Ok(HookOutcome {
                        additional_context: Some(trimmed.to_string()),
                        ..HookOutcome::default()
                    }),
                }
            }
            Some(2) => {
                let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
                Ok(HookOutcome::deny(if stderr.is_empty() {
                    "blocked by hook (exit code 2)".to_string()
                } else {
                    stderr
                }))
            }
            // `sh` could not find or execute the command.
            Some(code @ (126 | 127)) => Err(Failure::not_run(format!(
                "the hook command could not run (sh exited with {code}): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ))),
            code => Err(Failure::ran(format!(
                "hook exited with {}: {}",
                code.map_or("a signal".to_string(), |c| format!("status {c}")),
                String::from_utf8_lossy(&output.stderr).trim()
            ))),
        }
    }
}

impl Hook for CommandHook {
    fn run<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookOutcome> {
        Box::pin(async move {
            match self.execute(input).await {
                Ok(outcome) => outcome,
                // A gate that cannot run must not open: a pre-call hook (or a prompt check)
                // whose command is missing refuses instead of letting everything through.
                Err(Failure {
                    message,
                    ran: false,
                }) if BLOCKING.contains(&input.hook_event_name) => {
                    tracing::error!(command = %self.command, %message, "hook cannot run; refusing");
                    HookOutcome::deny(format!(
                        "the {} hook `{}` cannot run, so this is refused until it is fixed: {message}",
                        input.hook_event_name, self.command
                    ))
                }
                Err(Failure { message, .. }) => {
                    tracing::warn!(command = %self.command, %message, "hook error (non-blocking)");
                    HookOutcome::default()
                }
            }
        })
    }
}

impl CommandHook {
    /// Resolves the program the command starts (its first word, after variable assignments):
    /// a shell builtin or keyword (`None`), an absolute path to an executable file, or a name
    /// found on `PATH` (its path). A program named by an expansion is left to call time. A
    /// relative path is refused: hooks run in the call's workspace, where agents write, so the
    /// program would be whatever an agent put there.
    pub fn check(&self) -> Result<Option<PathBuf>, HookCommandError> {
        let fail = |reason: String| HookCommandError {
            command: self.command.clone(),
            reason,
        };
        let Some(program) = first_word(&self.command) else {
            return Err(fail("the command is empty".into()));
        };
        if program.contains(['$', '`', '*', '?', '[', '~']) && program != "[" && program != "[[" {
            return Ok(None);
        }
        if SHELL_WORDS.contains(&program.as_str()) {
            return Ok(None);
        }
        if program.starts_with('/') {
            let path = PathBuf::from(&program);
            return executable(&path).map(|()| Some(path)).map_err(fail);
        }
        if program.contains('/') {
            return Err(fail(format!(
                "{program} is a relative path, resolved in the call's workspace where agents \
                 write; give the program's absolute path, outside every workspace"
            )));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(&program))
            .find(|candidate| executable(candidate).is_ok())
            .map(Some)
            .ok_or_else(|| fail(format!("{program} is not found on PATH")))
    }
}

/// `sh` builtins and keywords a command may start with.
const SHELL_WORDS: &[&str] = &[
    ":", ".", "[", "[[", "!", "{", "alias", "break", "case", "cd", "command", "continue", "echo",
    "eval", "exec", "exit", "export", "false", "for", "function", "getopts", "if", "kill",
    "printf", "pwd", "read", "readonly", "return", "set", "shift", "test", "times", "trap", "true",
    "type", "ulimit", "umask", "unset", "until", "wait", "while", "(",
];

/// Whether `path` is a file someone may execute.
fn executable(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(m) if m.is_file() => Err(format!("{} is not executable", path.display())),
        Ok(_) => Err(format!("{} is not a file", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The first word of `command` after leading `NAME=value` assignments, unquoted; `None` if
/// there is none.
fn first_word(command: &str) -> Option<String> {
    let mut rest = command.trim_start();
    loop {
        let (word, after) = take_word(rest)?;
        let assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                && !name.starts_with(|c: char| c.is_ascii_digit())
        });
        if !assignment {
            return Some(word);
        }
        rest = after.trim_start();
    }
}

/// One shell word (quotes removed) and what follows it.
fn take_word(s: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut chars = s.char_indices().peekable();
    let mut end = s.len();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => {
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                for (_, q) in chars.by_ref() {
                    if q == '"' {
                        break;
                    }
                    word.push(q);
                }
            }
            c if c.is_whitespace() || ";|&<>".contains(c) || (c == '(' && !word.is_empty()) => {
                end = i;
                break;
            }
            c => word.push(c),
        }
    }
    if word.is_empty() && end == 0 {
        return None;
    }
    Some((word, &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h21_hook_programs_are_resolved() {
        assert_eq!(
            first_word("A=1 B='x y' /bin/sh -c x").as_deref(),
            Some("/bin/sh")
        );
        assert_eq!(
            first_word("'/opt/my hook' arg").as_deref(),
            Some("/opt/my hook")
        );
        assert_eq!(first_word("cat>/dev/null").as_deref(), Some("cat"));
        for ok in ["cat >/dev/null", "exit 2", "/bin/sh -c true", "$HOOK"] {
            CommandHook::new(ok)
                .check()
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "no-such-hook-binary-h21 --x",
            "/nonexistent/hook.sh",
            "/etc/passwd",
            "  ",
            "./hooks/in-workspace.sh",
        ] {
            assert!(CommandHook::new(bad).check().is_err(), "{bad}");
        }
    }

    /// A blocking hook whose program is gone refuses; a non-blocking one still does not.
    #[tokio::test]
    async fn h21_a_pre_call_hook_that_cannot_run_refuses() {
        let hook = CommandHook::new("/nonexistent/h21-hook --check");
        let mut input = HookInput::for_context(&crate::CallContext::new("s"));
        input.hook_event_name = "PreToolUse";
        let outcome = hook.run(&input).await;
        assert_eq!(outcome.permission, Some(super::super::HookPermission::Deny));
        input.hook_event_name = "PostToolUse";
        assert_eq!(hook.run(&input).await.permission, None);
    }
}

//! What `exec`, `Bash`, `process`, `TaskOutput` and `TaskStop` share about background commands:
//! starting one with its log in the workspace, and showing what was read.
//!
//! The log lives at `.talon-tasks/<id>.output` in the call's workspace, created through the file
//! jail (so a planted symlink cannot redirect it), where the model can read it with the file
//! tools or from another command. Commands belong to the caller (session, tenant, agent, user) that started them.

use std::path::Path;
use std::time::Duration;

use talon_core::CallContext;
use talon_exec::background::{Read, new_id};
use talon_exec::{Request, Shell, TaskInfo};

use crate::fs::workspace::FsConfig;

/// Workspace directory holding background commands' output logs.
pub const LOG_DIR: &str = ".talon-tasks";

/// Longest a background command may run when the call sets no timeout.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Who a call's background commands (and the Bash tool's working directory) belong to: the
/// session and the caller within it (tenant, agent, user — the identity that picks the
/// workspace). The session alone is not enough: every
/// caller of a gateway with one token shares the token's session, so keying by it let one user
/// list, read and kill another's commands.
pub fn owner(ctx: &CallContext) -> String {
    format!(
        "{:?}",
        (
            &ctx.session_key,
            ctx.tenant.as_deref(),
            ctx.agent_key.as_deref(),
            ctx.user.as_deref()
        )
    )
}

/// The task id from the first of the given fields that is set (`task_id`, then the older
/// names Claude Code used: `bash_id`, `shell_id`).
pub fn task_id<const N: usize>(fields: [&Option<String>; N]) -> Result<&str, String> {
    fields
        .into_iter()
        .filter_map(|f| f.as_deref().map(str::trim))
        .find(|id| !id.is_empty())
        .ok_or_else(|| "task_id is required: pass the ID the Bash call returned".to_string())
}

/// Starts `command` in the background for the call's session and returns its snapshot.
pub fn start(
    fs: &FsConfig,
    shell: &Shell,
    ctx: &CallContext,
    request: &Request<'_>,
) -> Result<TaskInfo, String> {
    shell
        .background()
        .check_room(&owner(ctx))
        .map_err(|e| e.to_string())?;
    let jail = fs.jail(ctx)?;
    let id = new_id();
    let located = jail
        .locate(&format!("{LOG_DIR}/{id}.output"))
        .map_err(|e| format!("cannot create the output log: {e}"))?;
    let (file, log) = jail
        .create_new(&located)
        .map_err(|e| format!("cannot create the output log: {e}"))?;
    shell
        .start_background(request, &owner(ctx), id, file, log.clone())
        .map_err(|e| {
            // Relative to the workspace and following no symlink (issue 21 item 5).
            if let Ok(rel) = log.strip_prefix(jail.root()) {
                let _ = talon_fs::remove_beneath(jail.root(), rel, talon_fs::Removal::Anything);
            }
            e.to_string()
        })
}

/// The log's path as the model should use it: relative to the workspace when inside it.
pub fn shown_log(info: &TaskInfo, workspace: Option<&Path>) -> String {
    workspace
        .and_then(|ws| info.log.strip_prefix(ws).ok())
        .unwrap_or(&info.log)
        .display()
        .to_string()
}

/// `12.3s`, `4m05s`, `2h03m`.
pub fn elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// One line per command: id, status, running time, command.
pub fn list_text(tasks: &[TaskInfo]) -> String {
    if tasks.is_empty() {
        return "No background processes in this session.".into();
    }
    tasks
        .iter()
        .map(|t| {
            format!(
                "{}  {}  {}  {}",
                t.id,
                t.status.describe(),
                elapsed(t.elapsed),
                one_line(&t.command)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The command on one line, shortened to 200 characters.
fn one_line(command: &str) -> String {
    let flat = command.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= 200 {
        return flat;
    }
    let mut short: String = flat.chars().take(200).collect();
    short.push('…');
    short
}

/// The output part of a read: the new text, with notes on what was skipped and on a wait that
/// ran out.
pub fn read_body(read: &Read, workspace: Option<&Path>) -> String {
    let mut parts = Vec::new();
    if read.skipped > 0 {
        parts.push(format!(
            "[{} earlier bytes not shown; the whole log is in {}]",
            read.skipped,
            shown_log(&read.info, workspace)
        ));
    }
    if read.text.is_empty() {
        parts.push("(no new output)".into());
    } else {
        parts.push(read.text.trim_end().to_string());
    }
    if read.wait_expired {
        parts.push("[still running after the wait; read again later, or stop it]".into());
    }
    if let Some(report) = &read.network {
        parts.push(super::network_footer(report));
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_is_short() {
        assert_eq!(elapsed(Duration::from_millis(1500)), "1.5s");
        assert_eq!(elapsed(Duration::from_secs(245)), "4m05s");
        assert_eq!(elapsed(Duration::from_secs(7380)), "2h03m");
    }

    #[test]
    fn long_commands_are_shortened_on_one_line() {
        assert_eq!(one_line("a\n  b"), "a b");
        let long = "x".repeat(500);
        assert_eq!(one_line(&long).chars().count(), 201);
    }
}

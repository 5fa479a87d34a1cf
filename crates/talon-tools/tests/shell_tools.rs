//! `exec` (GoClaw) and `Bash` (Claude Code) through the pipeline, sandboxed as by default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall, ToolOutput};
use talon_tools::{BuiltinConfig, FsConfig};

struct Env {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
    pipeline: Pipeline,
}

fn env() -> Env {
    // These tests need a directory beside the workspace that is visible but read-only.
    let common::Beside { dir, ws, outside } = common::beside("sub/deeper");
    std::os::unix::fs::symlink(&outside, ws.join("out-link")).unwrap();
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        ..BuiltinConfig::default()
    };
    let pipeline = common::pipeline(&config);
    Env {
        _dir: dir,
        ws,
        outside,
        pipeline,
    }
}

impl Env {
    async fn call_in(&self, session: &str, tool: &str, args: Value) -> ToolOutput {
        let ctx = common::context(&self.ws, session);
        self.pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await
            .output
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.call_in("s", tool, args).await
    }

    /// Starts `command` in the background and waits (up to 20 s) for its end and output.
    async fn background_output(&self, command: &str) -> ToolOutput {
        let out = self
            .call("exec", json!({"command": command, "background": true}))
            .await;
        let id = id_after(&out.for_llm, "Started background process ");
        self.call(
            "process",
            json!({"action": "output", "id": id, "timeout": 20}),
        )
        .await
    }
}

#[tokio::test]
async fn exec_reports_output_streams_and_exit_codes() {
    let e = env();
    let out = e.call("exec", json!({"command": "echo hello"})).await;
    assert!(!out.is_error);
    assert_eq!(out.for_llm, "hello\n");
    let out = e
        .call("bash", json!({"command": "echo out; echo err >&2; exit 4"}))
        .await;
    assert!(out.is_error, "the legacy alias reaches exec");
    assert_eq!(out.for_llm, "out\n\nSTDERR:\nerr\nExit code 4");
    let out = e.call("exec", json!({"command": "true"})).await;
    assert_eq!(out.for_llm, "(command completed with no output)");
    let out = e
        .call(
            "exec",
            json!({"command": "pwd", "working_dir": "sub/deeper"}),
        )
        .await;
    assert_eq!(
        out.for_llm.trim(),
        e.ws.join("sub/deeper").display().to_string()
    );
}

#[tokio::test]
async fn exec_refuses_bad_input_with_the_fix() {
    let e = env();
    for (args, want) in [
        (json!({"command": "  "}), "command is empty"),
        (json!({"command": "ls\u{0}"}), "NUL byte"),
        (json!({"command": "ls", "timeout": 0}), "between 1 and 3600"),
        (
            json!({"command": "ls", "working_dir": "../"}),
            "working_dir",
        ),
        (
            json!({"command": "ls", "working_dir": "out-link"}),
            "working_dir",
        ),
        (
            json!({"command": "ls", "working_dir": "nope"}),
            "working_dir",
        ),
        (json!({"command": "ls", "detach": true}), "detach"),
    ] {
        let out = e.call("exec", args.clone()).await;
        assert!(out.is_error, "{args}");
        assert!(out.for_llm.contains(want), "{args}: {}", out.for_llm);
    }
}

#[tokio::test]
async fn exec_is_sandboxed_and_capped_by_default() {
    let e = env();
    let target = e.outside.join("escape.txt");
    let out = e
        .call(
            "exec",
            json!({"command": format!("echo x > {}", target.display())}),
        )
        .await;
    assert!(
        out.is_error && out.for_llm.contains("Read-only file system"),
        "{}",
        out.for_llm
    );
    assert!(!target.exists());
    let out = e
        .call(
            "exec",
            json!({"command": "seq 1 20000; echo 'error: it broke' >&2; exit 1"}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.for_llm.chars().count() < 31_000,
        "error output is capped too"
    );
    assert!(
        out.for_llm.contains("[Output truncated:"),
        "{}",
        &out.for_llm[..200]
    );
    assert!(out.for_llm.contains("Exit code 1"));
    let out = e
        .call("exec", json!({"command": "sleep 30", "timeout": 1}))
        .await;
    assert!(out.is_error);
    assert!(
        out.for_llm.contains("command timed out after 1s"),
        "{}",
        out.for_llm
    );
}

#[tokio::test]
async fn bash_keeps_the_working_directory_per_session() {
    let e = env();
    let out = e
        .call_in("a", "Bash", json!({"command": "cd sub && pwd"}))
        .await;
    assert_eq!(out.for_llm, e.ws.join("sub").display().to_string());
    let out = e
        .call_in("a", "Bash", json!({"command": "cd deeper; pwd"}))
        .await;
    assert_eq!(out.for_llm, e.ws.join("sub/deeper").display().to_string());
    // Another session starts at the workspace root.
    let out = e.call_in("b", "Bash", json!({"command": "pwd"})).await;
    assert_eq!(out.for_llm, e.ws.display().to_string());
    // Leaving the workspace resets the directory, and says so.
    let out = e
        .call_in("a", "Bash", json!({"command": "cd / && pwd"}))
        .await;
    assert!(
        out.for_llm.contains("Shell cwd was reset to"),
        "{}",
        out.for_llm
    );
    let out = e.call_in("a", "Bash", json!({"command": "pwd"})).await;
    assert_eq!(out.for_llm, e.ws.display().to_string());
}

#[tokio::test]
async fn bash_result_shape_and_flags() {
    let e = env();
    let out = e
        .call(
            "Bash",
            json!({"command": "echo out; echo err >&2; exit 3", "description": "Fail on purpose"}),
        )
        .await;
    assert!(out.is_error);
    assert_eq!(out.for_llm, "out\nerr\nExit code 3");
    let out = e
        .call(
            "Bash",
            json!({"command": "echo hi", "dangerouslyDisableSandbox": true}),
        )
        .await;
    assert!(!out.is_error);
    assert!(
        out.for_llm
            .starts_with("hi\nNote: dangerouslyDisableSandbox was ignored"),
        "{}",
        out.for_llm
    );
    let out = e.call("Bash", json!({"command": "seq 1 20000"})).await;
    assert!(
        out.for_llm.ends_with("lines truncated] ..."),
        "{}",
        &out.for_llm[out.for_llm.len() - 80..]
    );
    let out = e
        .call("Bash", json!({"command": "sleep 5", "timeout": 200}))
        .await;
    assert!(
        out.is_error && out.for_llm.contains("timed out after 200ms"),
        "{}",
        out.for_llm
    );
}

/// The id after `marker` in a tool's text.
fn id_after(text: &str, marker: &str) -> String {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text}"))
        + marker.len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect()
}

#[tokio::test]
async fn bash_background_tasks_are_read_and_stopped_with_the_task_tools() {
    let e = env();
    let out = e
        .call(
            "Bash",
            json!({"command": "cd sub && echo started; sleep 0.3; pwd; echo done >&2", "run_in_background": true}),
        )
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    let id = id_after(&out.for_llm, "Command running in background with ID: ");
    assert_eq!(id.len(), 8, "{}", out.for_llm);
    assert!(
        out.for_llm.ends_with(&format!(
            "Output is being written to: .talon-tasks/{id}.output"
        )),
        "{}",
        out.for_llm
    );
    let out = e
        .call(
            "TaskOutput",
            json!({"task_id": id, "block": true, "timeout": 20000}),
        )
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert_eq!(
        out.for_llm,
        format!(
            "Task {id} (status: completed):\nstarted\n{}\ndone",
            e.ws.join("sub").display()
        )
    );
    // The log is a workspace file the file tools can read.
    let log = std::fs::read_to_string(e.ws.join(format!(".talon-tasks/{id}.output"))).unwrap();
    assert!(log.starts_with("started\n"), "{log}");
    // A background command does not move the session's directory.
    let out = e.call("Bash", json!({"command": "pwd"})).await;
    assert_eq!(out.for_llm, e.ws.display().to_string());

    let out = e
        .call(
            "Bash",
            json!({"command": "echo tick; sleep 60", "run_in_background": true}),
        )
        .await;
    let id = id_after(&out.for_llm, "with ID: ");
    let out = e
        .call("TaskOutput", json!({"bash_id": id, "block": false}))
        .await;
    assert!(
        out.for_llm
            .starts_with(&format!("Task {id} (status: running):")),
        "{}",
        out.for_llm
    );
    let out = e.call_in("other", "TaskStop", json!({"task_id": id})).await;
    assert!(
        out.is_error && out.for_llm.contains("no background command"),
        "{}",
        out.for_llm
    );
    let out = e.call("TaskStop", json!({"shell_id": id})).await;
    assert_eq!(out.for_llm, format!("Task {id} stopped successfully."));
    let out = e.call("TaskStop", json!({"task_id": id})).await;
    assert!(
        out.is_error && out.for_llm.contains("is not running (stopped)"),
        "{}",
        out.for_llm
    );
}

#[tokio::test]
async fn exec_background_processes_are_managed_with_the_process_tool() {
    let e = env();
    let out = e
        .call(
            "exec",
            json!({"command": "while read line; do echo got:$line; done; echo bye", "background": true}),
        )
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    let id = id_after(&out.for_llm, "Started background process ");
    let out = e.call("process", json!({"action": "list"})).await;
    assert!(
        out.for_llm.starts_with(&format!("{id}  running  ")),
        "{}",
        out.for_llm
    );
    let out = e
        .call_in("other", "process", json!({"action": "list"}))
        .await;
    assert_eq!(out.for_llm, "No background processes in this session.");
    let out = e
        .call(
            "process",
            json!({"action": "write", "id": id, "data": "one\ntwo\n", "eof": true}),
        )
        .await;
    assert_eq!(
        out.for_llm,
        format!("Wrote 8 bytes to process {id} and closed its input.")
    );
    let out = e
        .call(
            "process",
            json!({"action": "output", "id": id, "timeout": 20}),
        )
        .await;
    assert!(
        out.for_llm.ends_with("got:one\ngot:two\nbye") && out.for_llm.contains("(completed, "),
        "{}",
        out.for_llm
    );
    let out = e
        .call("process", json!({"action": "output", "id": id}))
        .await;
    assert!(out.for_llm.ends_with("(no new output)"), "{}", out.for_llm);

    let out = e
        .call(
            "exec",
            json!({"command": "sleep 60 & sleep 60", "background": true}),
        )
        .await;
    let id = id_after(&out.for_llm, "Started background process ");
    let out = e.call("process", json!({"action": "kill", "id": id})).await;
    assert!(
        out.for_llm
            .starts_with(&format!("Process {id} stopped after ")),
        "{}",
        out.for_llm
    );
    let out = e.call("process", json!({"action": "output"})).await;
    assert!(
        out.is_error && out.for_llm.contains("id is required"),
        "{}",
        out.for_llm
    );
    let out = e
        .call("process", json!({"action": "output", "id": "nope"}))
        .await;
    assert!(
        out.is_error && out.for_llm.contains("no background command \"nope\""),
        "{}",
        out.for_llm
    );
}

#[tokio::test]
async fn background_commands_cannot_create_protected_names_at_all() {
    // A background command may run on while the user works on the host, so a missing protected
    // name stays pinned for it (a foreground command's creations are removed when it ends).
    let e = env();
    let out = e
        .background_output("echo '{}' > .mcp.json && echo wrote || echo refused")
        .await;
    // A whole line: the output's header repeats the command, which names both words.
    assert!(
        out.for_llm.lines().any(|l| l == "refused"),
        "{}",
        out.for_llm
    );
    assert!(!e.ws.join(".mcp.json").exists());
    let out = e
        .call(
            "exec",
            json!({"command": "echo '{}' > .mcp.json; echo wrote"}),
        )
        .await;
    assert!(
        out.for_llm.contains("wrote")
            && out
                .for_llm
                .contains(".mcp.json: sandboxed commands may not create it"),
        "{}",
        out.for_llm
    );
    assert!(!e.ws.join(".mcp.json").exists());
}

/// Issue 21 item 3 (b): a background command may run on while the user runs git on the host,
/// so it cannot point `.git/commondir` at a copy with a malicious configuration even while it
/// runs — and git on the host keeps working meanwhile.
#[tokio::test]
async fn h21_03_a_background_command_cannot_create_commondir() {
    let e = env();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&e.ws)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let out = e
        .background_output(
            "git status --short >/dev/null && echo git-ok; \
             echo /tmp/evil > .git/commondir && echo wrote || echo refused",
        )
        .await;
    // Whole lines: the output's header repeats the command, which names both words.
    let lines: Vec<&str> = out.for_llm.lines().collect();
    assert!(
        lines.contains(&"git-ok") && lines.contains(&"refused") && !lines.contains(&"wrote"),
        "{}",
        out.for_llm
    );
    assert!(!e.ws.join(".git/commondir").exists());
    let status = std::process::Command::new("git")
        .args(["status", "--short"])
        .current_dir(&e.ws)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

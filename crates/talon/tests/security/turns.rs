//! Security regressions of running turns (issue 22): one session's turn must never hold up
//! another's. The gate that keeps a write from running beside a read belongs to the turn, so a
//! `sessions_send` whose nested turn calls a tool completes instead of waiting on its caller.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support;
use crate::support::chat::{chat, mock_provider, requests};

/// How long a turn may run before the test calls it a deadlock.
const DEADLOCK_GUARD: Duration = Duration::from_secs(30);

/// `talon chat ARGS` in `home`, killed and failed if it has not finished within
/// [`DEADLOCK_GUARD`]: (stdout, stderr, exit code).
fn chat_or_deadlock(home: &std::path::Path, args: &[&str]) -> (String, String, i32) {
    let mut child = support::command(home)
        .env("MOCK_KEY", "sk-mock-secret-123456")
        .arg("chat")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + DEADLOCK_GUARD;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "talon chat {args:?} hung (deadlock): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Session B sends into session A of the same agent; A's turn calls a tool before it answers.
/// B's `sessions_send` runs alone in B's turn, and A's nested turn used to wait for that same
/// agent-wide lock: both hung, and with them every other turn of the agent.
#[test]
fn h22_3_sessions_send_into_a_turn_that_calls_a_tool_completes() {
    let home = tempfile::tempdir().unwrap();
    let a = "agent:default:cli:direct:a";
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "A's first answer."},
            {"tool_calls": [{"name": "sessions_send", "arguments": {"session_key": a, "message": "what time is it?"}}]},
            {"tool_calls": [{"name": "datetime", "arguments": {}}]},
            {"text": "pong from a"},
            {"text": "B is done."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["--session", "a", "-p", "hello A"]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) =
        chat_or_deadlock(home.path(), &["--session", "b", "-p", "ask A the time"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "B is done.");
    let sent = requests(&mock);
    assert_eq!(sent.len(), 5, "{sent:?}");
    // A's nested turn ran its tool, and its answer came back to B.
    assert!(
        sent[3].to_string().contains("what time is it?"),
        "{}",
        sent[3]
    );
    assert!(
        sent[4].to_string().contains("pong from a"),
        "the answer came back to B: {}",
        sent[4]
    );
}

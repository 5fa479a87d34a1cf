//! `talon chat` at a terminal (util-linux `script` gives it a pseudo-terminal): questions and
//! approvals answered by the person, and plan mode left by approving a plan.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;

use serde_json::{Value, json};
use support::chat::{mock_provider, requests};

/// The done-when conversation at a terminal (util-linux `script` gives `talon chat` a
/// pseudo-terminal): the model asks a question, the person picks an option by number; the
/// model writes a file, the person approves it; the model answers.
#[test]
fn questions_and_approvals_are_answered_at_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "AskUserQuestion", "arguments": {"questions": [{
                "question": "Which greeting should the file hold?", "header": "Greeting",
                "options": [{"label": "hello"}, {"label": "bonjour"}]}]}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "greeting.txt", "content": "bonjour\n"}}]},
            {"text": "Wrote greeting.txt."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"default\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (screen, ok) = at_a_terminal(
        home.path(),
        "chat --session t -p 'write a greeting file'",
        b"2\ny\n",
    );
    assert!(ok, "{screen}");
    assert!(
        screen.contains("Which greeting should the file hold?") && screen.contains("2. bonjour"),
        "{screen}"
    );
    assert!(screen.contains("needs approval"), "{screen}");
    assert!(screen.contains("Wrote greeting.txt."), "{screen}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("greeting.txt")).unwrap(),
        "bonjour\n"
    );
    let sent = requests(&mock)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>();
    assert!(
        sent[1].contains("\\\"Which greeting should the file hold?\\\"=\\\"bonjour\\\""),
        "{}",
        sent[1]
    );
}

/// Plan mode at a terminal: a write is refused while planning; the model presents its plan with
/// ExitPlanMode, the person approves it, and the same write then runs (after its approval).
#[test]
fn an_approved_plan_leaves_plan_mode() {
    let home = tempfile::tempdir().unwrap();
    let write =
        json!({"name": "write_file", "arguments": {"path": "plan.txt", "content": "done\n"}});
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [write]},
            {"tool_calls": [{"name": "ExitPlanMode", "arguments": {"plan": "1. Write plan.txt"}}]},
            {"tool_calls": [write]},
            {"text": "Plan carried out."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (screen, ok) = at_a_terminal(
        home.path(),
        "chat --permission-mode plan -p 'write plan.txt'",
        b"1\ny\n",
    );
    assert!(ok, "{screen}");
    assert!(
        screen.contains("Approve this plan?") && screen.contains("1. Write plan.txt"),
        "{screen}"
    );
    assert!(
        screen.contains("plan approved: continuing in default mode"),
        "{screen}"
    );
    assert!(screen.contains("Plan carried out."), "{screen}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("plan.txt")).unwrap(),
        "done\n"
    );
    let sent = requests(&mock)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>();
    assert!(
        sent[1].contains("not allowed in plan mode"),
        "the first write was refused: {}",
        sent[1]
    );
    assert!(
        sent[2].contains("User has approved your plan"),
        "{}",
        sent[2]
    );
}

/// Runs `talon <args>` in `home` under a pseudo-terminal (util-linux `script`), typing `typed`
/// ahead (the terminal hands each prompt one line); what the terminal showed, and whether it
/// succeeded.
fn at_a_terminal(home: &std::path::Path, args: &str, typed: &[u8]) -> (String, bool) {
    use std::io::Write;
    let line = format!("{} {args}", support::talon().display());
    let mut child = std::process::Command::new("script")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TALON_DATA_DIR", home.join("data"))
        .current_dir(home)
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

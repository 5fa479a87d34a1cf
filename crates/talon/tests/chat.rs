//! `talon chat -p` end to end against `talon mock-provider`, in both wire formats: a real tool
//! call (read_file in the workspace), the answer, the session continued from the store by a
//! second process, and the three output formats.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

/// A running `talon mock-provider`, killed when dropped.
struct Mock {
    child: Child,
    url: String,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mock_provider(home: &Path, script: &Value) -> Mock {
    let path = home.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut child = support::command(home)
        .args(["mock-provider", "--script"])
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("mock provider listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    Mock {
        child,
        url,
        _stdout: stdout,
    }
}

fn requests(mock: &Mock) -> Vec<Value> {
    let body = std::process::Command::new("curl")
        .args(["-sf", &format!("{}/_mock/requests", mock.url)])
        .output()
        .unwrap();
    serde_json::from_slice(&body.stdout).unwrap()
}

fn chat(home: &Path, args: &[&str]) -> (String, String, i32) {
    let out = support::command(home)
        .env("MOCK_KEY", "sk-mock-secret-123456")
        .arg("chat")
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn a_session_runs_a_tool_and_continues_in_a_second_process() {
    for kind in ["openai", "anthropic"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("notes.txt"), "hello from the notes\n").unwrap();
        let mock = mock_provider(
            home.path(),
            &json!({"turns": [
                {"text": "Reading it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                {"text": "The file says hello."},
                {"text": "Still hello."},
                {"text": "Third answer."}
            ]}),
        );
        let base = if kind == "openai" {
            format!("{}/v1", mock.url)
        } else {
            mock.url.clone()
        };
        std::fs::write(
            home.path().join("talon.toml"),
            format!(
                "[providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"mock-1\"\napi_key_env = \"MOCK_KEY\"\n"
            ),
        )
        .unwrap();

        let (stdout, stderr, code) = chat(
            home.path(),
            &[
                "--session",
                "s1",
                "--output-format",
                "json",
                "-p",
                "what do my notes say?",
            ],
        );
        assert_eq!(code, 0, "{kind}: {stderr}");
        let result: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(result["text"], "The file says hello.", "{kind}");
        assert_eq!(result["stop"]["reason"], "final");
        assert_eq!(result["iterations"], 2);
        assert_eq!(result["session"], "agent:default:cli:direct:s1");

        let (stdout, stderr, code) = chat(
            home.path(),
            &[
                "--session",
                "s1",
                "--output-format",
                "stream-json",
                "-p",
                "and now?",
            ],
        );
        assert_eq!(code, 0, "{kind}: {stderr}");
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            lines.iter().any(|l| l["type"] == "text"),
            "{kind}: {stdout}"
        );
        assert_eq!(lines.last().unwrap()["text"], "Still hello.");

        let (stdout, stderr, code) = chat(home.path(), &["--session", "s1", "-p", "once more"]);
        assert_eq!(code, 0, "{kind}: {stderr}");
        assert_eq!(stdout.trim(), "Third answer.");

        let sent = requests(&mock);
        assert_eq!(sent.len(), 4, "{kind}");
        // The second request carries the tool's real output.
        let second = sent[1].to_string();
        assert!(second.contains("hello from the notes"), "{kind}: {second}");
        // The third request, from a new process, carries the whole session so far.
        let third = sent[2].to_string();
        for earlier in [
            "what do my notes say?",
            "hello from the notes",
            "The file says hello.",
            "and now?",
        ] {
            assert!(
                third.contains(earlier),
                "{kind}: {earlier:?} missing from {third}"
            );
        }
    }
}

#[test]
fn a_missing_provider_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "hi"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no model provider is configured"),
        "{stderr}"
    );
    assert!(stderr.contains("[providers.NAME]"), "{stderr}");
}

#[test]
fn a_refused_key_fails_with_what_to_check() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [{"status": 401, "error": "invalid api key"}]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"MOCK_KEY\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "hi"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("refused the API key") && stderr.contains("invalid api key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sk-mock-secret-123456"),
        "the key is never printed"
    );
}

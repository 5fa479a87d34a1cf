//! `talon mcp` with MCP clients other people wrote, from npm: the MCP inspector's CLI lists,
//! calls and sets the log level; Claude Code registers Talon with `claude mcp add` and finds it
//! healthy with `claude mcp list` (next to a server that is not, so the check is real). The
//! Python SDK's turn is in `mcp.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::npm;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// `talon mcp`'s command line for a client to start, working in `home`.
fn talon_mcp(home: &Path) -> Vec<String> {
    vec![
        support::talon().display().to_string(),
        "--data-dir".into(),
        support::data_dir(home).display().to_string(),
        "mcp".into(),
        "--workspace".into(),
        home.display().to_string(),
    ]
}

fn inspector(home: &Path, method_args: &[&str]) -> Value {
    let entry = npm::inspector_cli(env!("CARGO_TARGET_TMPDIR"));
    // inspector-cli 1.0.3 finds its own package.json through a path relative to the working
    // directory, so it must run from its build directory.
    let out = Command::new("node")
        .arg(&entry)
        .args(talon_mcp(home))
        .args(method_args)
        .current_dir(entry.parent().unwrap())
        .env("HOME", home)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector-cli {method_args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_inspector_cli_lists_calls_and_sets_the_level() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("notes.txt"), "first line\n").unwrap();
    let tools = inspector(home.path(), &["--method", "tools/list"]);
    let names = support::tool_names(&tools);
    assert!(
        names.iter().any(|n| n == "read_file") && names.iter().any(|n| n == "exec"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n == "Read"),
        "one tool per job: {names:?}"
    );

    let read_file = |path: &str| {
        let arg = format!("path={path}");
        inspector(
            home.path(),
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "read_file",
                "--tool-arg",
                &arg,
            ],
        )
    };
    let read = read_file(&home.path().join("notes.txt").display().to_string());
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        read["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("first line")),
        "{read}"
    );

    // A call the jail refuses is a tool error the client shows, not a protocol failure.
    let refused = read_file("/etc/shadow");
    assert_eq!(refused["isError"], true, "{refused}");

    let level = inspector(
        home.path(),
        &["--method", "logging/setLevel", "--log-level", "debug"],
    );
    assert_eq!(level, serde_json::json!({}));
}

fn claude(home: &Path, args: &[&str]) -> Output {
    let claude = npm::claude_code(env!("CARGO_TARGET_TMPDIR"));
    Command::new(claude)
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        // No network here: nothing but the local MCP servers.
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .unwrap()
}

#[test]
fn claude_code_adds_talon_and_finds_it_connected() {
    let home = tempfile::tempdir().unwrap();
    let mut add = vec!["mcp", "add", "talon", "--"];
    let command = talon_mcp(home.path());
    add.extend(command.iter().map(String::as_str));
    let added = claude(home.path(), &add);
    assert!(
        added.status.success(),
        "claude mcp add: {}{}",
        String::from_utf8_lossy(&added.stdout),
        String::from_utf8_lossy(&added.stderr)
    );
    let broken = claude(home.path(), &["mcp", "add", "broken", "--", "false"]);
    assert!(broken.status.success());

    let listed = claude(home.path(), &["mcp", "list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in `claude mcp list`: {text}"))
            .to_string()
    };
    assert!(line("talon").contains("Connected"), "{text}");
    assert!(!line("broken").contains("Connected"), "{text}");
}

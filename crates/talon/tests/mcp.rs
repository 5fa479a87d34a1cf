//! Talon's MCP server driven by a real client (the official Python SDK) over stdio and HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use serde_json::Value;

fn check_report(report: &Value) {
    let tools = report["tools"].as_object().unwrap();
    let names: Vec<&String> = tools.keys().collect();
    for expected in ["TodoWrite", "datetime", "read_file", "write_file", "exec"] {
        assert!(
            names.iter().any(|n| *n == expected),
            "{expected} missing: {report}"
        );
    }
    // One tool per job (issue 23): an MCP client gets GoClaw's names, which do not shadow its
    // host's own Read and Bash, and not Claude Code's twins of them.
    for twin in ["Read", "Bash", "Write", "Edit", "Grep", "WebFetch"] {
        assert!(
            !names.iter().any(|n| *n == twin),
            "{twin} offered: {report}"
        );
    }
    assert_eq!(
        tools["TodoWrite"]["schema"]["required"],
        serde_json::json!(["todos"])
    );
    assert_eq!(tools["datetime"]["read_only"], true);

    let calls = &report["calls"];
    assert_eq!(calls["datetime"][0]["is_error"], false);
    assert!(
        calls["datetime"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Asia/Tokyo (UTC+09:00)")
    );
    assert_eq!(calls["datetime"][1]["is_error"], true);
    assert!(
        calls["datetime"][1]["text"]
            .as_str()
            .unwrap()
            .starts_with("unknown time zone \"Mars/Base\"")
    );
    assert_eq!(calls["TodoWrite"][0]["is_error"], false);
    assert!(
        calls["TodoWrite"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Todos have been modified successfully.")
    );
    assert_eq!(calls["TodoWrite"][1]["is_error"], true);
    assert!(
        calls["TodoWrite"][1]["text"]
            .as_str()
            .unwrap()
            .contains("field `todos.0.status`")
    );
    assert_eq!(calls["no_such_tool"][0]["is_error"], true);
    assert!(
        calls["no_such_tool"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool: \"no_such_tool\"")
    );
}

#[test]
fn python_sdk_over_stdio() {
    let talon = support::talon();
    let report = support::python_mcp_client(&["stdio", talon.to_str().unwrap(), "mcp"]);
    check_report(&report);
    // The workspace is the client's working directory (this crate).
    let calls = &report["calls"];
    assert_eq!(calls["read_file"][0]["is_error"], false, "{report}");
    assert!(
        calls["read_file"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("     1\t[package]"),
        "{report}"
    );
    assert_eq!(calls["Read"][0]["is_error"], true);
    assert!(
        calls["Read"][0]["text"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{report}"
    );
}

/// The SDK's high-level client negotiates the newest protocol: `server/discover` and the
/// 2026-07-28 lifecycle, which `talon mcp` hands to rmcp (its own loop speaks the handshake era).
#[test]
fn python_sdk_client_over_stdio_speaks_the_2026_07_28_protocol() {
    let talon = support::talon();
    let report = support::python_mcp_client(&["stdio-auto", talon.to_str().unwrap(), "mcp"]);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "read_file"),
        "{report}"
    );
    assert_eq!(report["calls"]["datetime"]["is_error"], false, "{report}");
    assert!(
        report["calls"]["read_file"]["text"]
            .as_str()
            .unwrap()
            .starts_with("     1\t[package]"),
        "{report}"
    );
}

#[test]
fn python_sdk_over_stdio_respects_profile() {
    let talon = support::talon();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().to_str().unwrap();
    let client = std::process::Command::new(support::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/mcp_client.py"))
        .args([
            "stdio",
            talon.to_str().unwrap(),
            "mcp",
            "--profile",
            "minimal",
            "--workspace",
            workspace,
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&client.stdout).unwrap_or_else(|_| {
        panic!("client failed: {}", String::from_utf8_lossy(&client.stderr));
    });
    // The minimal profile offers session_status only, as the seeds define it.
    let offered: Vec<&String> = report["tools"].as_object().unwrap().keys().collect();
    assert_eq!(offered, ["session_status"], "{report}");
    let text = report["calls"]["datetime"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("tool not allowed by policy: datetime"),
        "policy applies to calls too: {text}"
    );
}

#[test]
fn python_sdk_over_streamable_http_with_bearer_token() {
    let server = support::serve(
        &[("TALON_GATEWAY__TOKEN", "test-token-0123456789-abcdef")],
        None,
    );
    let url = format!("http://{}/mcp", server.addr);
    let report = support::python_mcp_client(&["http", &url, "test-token-0123456789-abcdef"]);
    check_report(&report);
}

/// Log messages of one level with the given event.
fn logs<'a>(report: &'a Value, level: &str, event: &str) -> Vec<&'a Value> {
    report["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["level"] == level && l["data"]["event"] == event)
        .collect()
}

/// The same logging session over stdio and HTTP: warnings by default, call starts and ends after
/// `logging/setLevel debug`, only failures after `logging/setLevel error`.
fn check_logging(report: &Value) {
    assert_eq!(report["capabilities"]["logging"], true, "{report}");
    let warnings = logs(report, "warning", "tool_warning");
    assert_eq!(warnings.len(), 1, "{report}");
    assert_eq!(warnings[0]["logger"], "talon");
    assert_eq!(warnings[0]["data"]["tool"], "search");
    assert!(
        warnings[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("skipped because it is a hard link"),
        "{report}"
    );
    let starts = logs(report, "debug", "tool_start");
    let ends = logs(report, "info", "tool_end");
    // Only the call made at level debug: not the search before it, nor the calls after `error`.
    assert_eq!(starts.len(), 1, "{report}");
    assert_eq!(starts[0]["data"]["tool"], "datetime");
    assert_eq!(ends.len(), 1, "{report}");
    assert_eq!(ends[0]["data"]["ok"], true);
    assert!(ends[0]["data"]["elapsed_ms"].as_f64().is_some());
    let failures = logs(report, "error", "tool_end");
    assert_eq!(failures.len(), 1, "{report}");
    assert_eq!(failures[0]["data"]["failed_stage"], "unknown_tool");
}

fn logging_plan() -> Value {
    serde_json::json!([
        {"call": "search", "args": {"pattern": "needle"}},
        {"set_level": "debug"},
        {"call": "datetime", "args": {"timezone": "UTC"}},
        {"set_level": "error"},
        {"call": "datetime", "args": {"timezone": "UTC"}},
        {"call": "no_such_tool", "args": {}},
    ])
}

/// A workspace with one plain file and one hard link (skipped by search).
fn workspace_with_a_hard_link(home: &std::path::Path) -> std::path::PathBuf {
    let ws = home.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("plain.txt"), "needle\n").unwrap();
    std::fs::write(home.join("outside.txt"), "needle outside\n").unwrap();
    std::fs::hard_link(home.join("outside.txt"), ws.join("linked.txt")).unwrap();
    ws
}

#[test]
fn mcp_logging_follows_the_level_over_stdio_and_http() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace_with_a_hard_link(home.path());
    let data = support::data_dir(home.path());
    let report = support::mcp_plan(&logging_plan(), &support::stdio_target(&data, &ws));
    check_logging(&report);

    let mut cmd = support::command(home.path());
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
        .arg(&ws);
    let server = support::spawn(cmd);
    let report = support::mcp_plan(
        &logging_plan(),
        &["http", &format!("http://{}/mcp", server.addr)],
    );
    check_logging(&report);
}

/// AskUserQuestion reaches an MCP client that can ask its user (elicitation), and its answer
/// comes back to the model in Claude Code's words; a client that cannot is told to ask in its
/// reply.
#[test]
fn ask_user_question_is_answered_through_elicitation() {
    let home = tempfile::tempdir().unwrap();
    let target = support::stdio_target(&support::data_dir(home.path()), home.path());
    let question = serde_json::json!({"questions": [{
        "question": "Which database should the service use?",
        "header": "Database",
        "options": [{"label": "SQLite", "description": "one file"}, {"label": "PostgreSQL"}]
    }]});
    let report = support::mcp_plan(
        &serde_json::json!([
            {"elicit_answer": {"action": "accept", "content": {"q1": "PostgreSQL"}}},
            {"call": "AskUserQuestion", "args": question}
        ]),
        &target,
    );
    assert_eq!(
        report["elicitations"][0], "Which database should the service use?",
        "{report}"
    );
    let text = report["steps"][1]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "User has answered your questions: \"Which database should the service use?\"=\"PostgreSQL\". You can now continue with the user's answers in mind.",
        "{report}"
    );
    let report = support::mcp_plan(
        &serde_json::json!([{"call": "AskUserQuestion", "args": question}]),
        &target,
    );
    let step = &report["steps"][0];
    assert_eq!(step["is_error"], true, "{report}");
    assert!(
        step["text"]
            .as_str()
            .unwrap()
            .contains("Ask your questions in your reply"),
        "{report}"
    );
}

/// `talon mcp` for the Python SDK client, with `config` as its talon.toml.
fn stdio_with_config(home: &std::path::Path, config: &str) -> Vec<String> {
    std::fs::write(home.join("talon.toml"), config).unwrap();
    let config = support::config_file(home).unwrap();
    let mut target = support::stdio_target(&support::data_dir(home), home);
    target.splice(2..2, ["--config".to_string(), config.display().to_string()]);
    target
}

/// Issue 23: an MCP client's calls that need approval are asked of the client through
/// elicitation, or refused at once naming the setting; never left waiting. By default the
/// client (Claude Code asks its user before each call) confirms what a tool's risk alone would
/// ask, so web_fetch runs, and the address guard still stands.
#[test]
fn mcp_clients_are_asked_through_elicitation_or_refused_at_once() {
    let home = tempfile::tempdir().unwrap();
    let fetch = serde_json::json!({"call": "web_fetch", "args": {"url": "http://127.0.0.1/page"}});
    let text = |report: &Value, i: usize| report["steps"][i]["text"].as_str().unwrap().to_string();

    // Out of the box: no approval asked; the address guard refuses the loopback address.
    let report = support::mcp_plan(
        &serde_json::json!([fetch]),
        &stdio_with_config(home.path(), ""),
    );
    let out = text(&report, 0);
    assert!(!out.contains("permission denied"), "{report}");
    assert!(out.contains("loopback"), "{report}");

    // A client that does not confirm calls and cannot be asked: refused at once, naming the key.
    let target = stdio_with_config(home.path(), "[mcp_server]\nclient_confirms = false\n");
    let started = std::time::Instant::now();
    let report = support::mcp_plan(&serde_json::json!([fetch]), &target);
    let out = text(&report, 0);
    assert!(out.contains("cannot be asked"), "{report}");
    assert!(
        out.contains("[mcp_server] client_confirms = true"),
        "{report}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "refused at once, not after the approval timeout"
    );

    // A client that supports elicitation is asked; its answer decides.
    let report = support::mcp_plan(
        &serde_json::json!([
            {"elicit_answer": {"action": "accept", "content": {"decision": "allow_once"}}},
            fetch,
            {"elicit_answer": {"action": "decline"}},
            fetch
        ]),
        &target,
    );
    let asked = report["elicitations"][0].as_str().unwrap();
    assert!(
        asked.contains("web_fetch") && asked.contains("127.0.0.1/page"),
        "{report}"
    );
    assert!(
        text(&report, 1).contains("loopback"),
        "allowed, then guarded: {report}"
    );
    assert!(
        text(&report, 3).contains("permission denied: web_fetch was not approved"),
        "{report}"
    );
}

/// Issue 23: serve's `/mcp` clients are remote and may be programs, so by default a tool's risk
/// still asks there: through elicitation when the client supports it, else refused at once
/// (never parked on `/v1/approvals` for two minutes).
#[test]
fn remote_mcp_clients_are_asked_by_default() {
    let server = support::serve(
        &[("TALON_GATEWAY__TOKEN", "test-token-0123456789-abcdef")],
        None,
    );
    let target = [
        "http".to_string(),
        format!("http://{}/mcp", server.addr),
        "test-token-0123456789-abcdef".to_string(),
    ];
    let fetch = serde_json::json!({"call": "web_fetch", "args": {"url": "http://127.0.0.1/page"}});
    let started = std::time::Instant::now();
    let report = support::mcp_plan(&serde_json::json!([fetch]), &target);
    let refused = report["steps"][0]["text"].as_str().unwrap();
    assert!(refused.contains("cannot be asked"), "{report}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let report = support::mcp_plan(
        &serde_json::json!([
            {"elicit_answer": {"action": "accept", "content": {"decision": "allow_once"}}},
            fetch
        ]),
        &target,
    );
    assert!(
        report["elicitations"][0]
            .as_str()
            .unwrap()
            .contains("web_fetch"),
        "{report}"
    );
    assert!(
        report["steps"][1]["text"]
            .as_str()
            .unwrap()
            .contains("loopback"),
        "allowed by the client's user, then guarded: {report}"
    );
    let pending = support::chat::http(
        &format!("http://{}/v1/approvals", server.addr),
        None,
        &[("authorization", "Bearer test-token-0123456789-abcdef")],
    );
    assert!(pending.contains("\"pending\":[]"), "{pending}");
}

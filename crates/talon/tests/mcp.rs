//! Talon's MCP server driven by a real client (the official Python SDK) over stdio and HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;

fn check_report(report: &Value) {
    let tools = report["tools"].as_object().unwrap();
    let names: Vec<&String> = tools.keys().collect();
    for expected in ["Read", "TodoWrite", "datetime", "read_file", "write_file"] {
        assert!(
            names.iter().any(|n| *n == expected),
            "{expected} missing: {report}"
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

#[test]
fn python_sdk_over_stdio_respects_profile() {
    let talon = support::talon();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().to_str().unwrap();
    let client = std::process::Command::new("python3")
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
    assert!(report["tools"].as_object().unwrap().is_empty(), "{report}");
    let text = report["calls"]["datetime"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("tool not allowed by policy: datetime"),
        "policy applies to calls too: {text}"
    );
}

#[test]
fn python_sdk_over_streamable_http_with_bearer_token() {
    let server = support::serve(&[("TALON_GATEWAY__TOKEN", "test-token-0123456789")], None);
    let url = format!("http://{}/mcp", server.addr);
    let report = support::python_mcp_client(&["http", &url, "test-token-0123456789"]);
    check_report(&report);
}

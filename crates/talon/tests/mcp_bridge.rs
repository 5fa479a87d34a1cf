//! `[mcp_servers]` end to end: the binary bridges server-everything's tools (and skips a server
//! that never answers), lists them, and calls them through `talon tool call`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::npm;

use support::command;

#[test]
fn configured_servers_are_bridged_and_a_dead_one_is_skipped() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
         [mcp_servers.dead]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_secs = 2\n",
        entry.display().to_string()
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let out = command(home.path())
        .args([
            "tool",
            "call",
            "mcp__everything__echo",
            "--args",
            r#"{"message":"through the CLI"}"#,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Echo: through the CLI"), "{stdout}");
    assert!(
        stderr.contains("\"dead\" did not answer within 2 s"),
        "{stderr}"
    );
    let out = command(home.path())
        .args(["tools", "list"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("mcp__everything__get-sum"), "{listing}");

    // A required server that cannot start stops Talon with the reason.
    std::fs::write(
        home.path().join("talon.toml"),
        "[mcp_servers.gone]\ncommand = \"/nonexistent/server\"\nrequired = true\n",
    )
    .unwrap();
    let out = command(home.path())
        .args(["tools", "list"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("\"gone\": cannot start"),
        "{stderr}"
    );
}

/// `talon mcp` tells its client when a bridged server's tools change.
#[test]
fn talon_mcp_passes_list_changed_on_to_its_client() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::Duration;

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../talon-bridge/tests/fixtures/changing_server.py"
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!("[mcp_servers.chg]\ncommand = \"python3\"\nargs = [{script:?}]\n"),
    )
    .unwrap();
    let mut child = command(home.path())
        .args(["mcp"])
        .env("TALON_TOOLS__PERMISSION_MODE", "bypassPermissions")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    let mut send = |v: serde_json::Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let wait_for = |pred: &dyn Fn(&serde_json::Value) -> bool| loop {
        let v = rx
            .recv_timeout(Duration::from_secs(15))
            .expect("a message from talon mcp");
        if pred(&v) {
            return v;
        }
    };
    send(
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let init = wait_for(&|v| v["id"] == 1);
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    send(serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    // `talon mcp` starts before its bridged servers answer; their tools appear when they do.
    let listed = |list: &serde_json::Value, name: &str| {
        list["result"]["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == name))
    };
    let mut id = 100;
    loop {
        id += 1;
        send(serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{}}));
        let list = wait_for(&|v| v["id"] == id);
        if listed(&list, "mcp__chg__alpha") {
            break;
        }
        assert!(id < 250, "the bridged server's tools never appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    send(
        serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__chg__alpha","arguments":{}}}),
    );
    let reply = wait_for(&|v| v["id"] == 2);
    assert!(
        reply.to_string().contains("alpha replaced by beta"),
        "{reply}"
    );
    wait_for(&|v| v["method"] == "notifications/tools/list_changed");
    send(serde_json::json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}));
    let list = wait_for(&|v| v["id"] == 3);
    let names = support::tool_names(&list["result"]);
    assert!(
        names.iter().any(|n| n == "mcp__chg__beta")
            && !names.iter().any(|n| n == "mcp__chg__alpha"),
        "{names:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A home whose talon.toml bridges the misbehaving test server as `odd`, with `tool` allowed
/// without approval and `env` added to the server's environment (a TOML inline-table body).
fn odd_server_home(tool: &str, env: &str) -> tempfile::TempDir {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../talon-bridge/tests/fixtures/misbehaving_server.py"
    );
    let home = tempfile::tempdir().unwrap();
    let env = if env.is_empty() {
        String::new()
    } else {
        format!(", {env}")
    };
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\nauto_allow = [\"mcp__odd__{tool}\"]\n\
             [mcp_servers.odd]\ncommand = \"python3\"\nargs = [{script:?}]\n\
             env = {{ CANCEL_LOG = \"/dev/null\"{env} }}\n"
        ),
    )
    .unwrap();
    home
}

/// The arguments for [`support::mcp_plan`] that start `talon mcp` in `home` with its talon.toml.
fn talon_mcp_in(home: &std::path::Path) -> Vec<String> {
    let config = support::config_file(home).unwrap().display().to_string();
    let mut args = support::stdio_target(&support::data_dir(home), home);
    args.splice(2..2, ["--config".to_string(), config]);
    args
}

/// A bridged server's progress reaches `talon mcp`'s own client (the official Python SDK) as
/// `notifications/progress` for the client's token, the latest report always among them.
#[test]
fn progress_from_a_bridged_server_reaches_talon_mcps_client() {
    let home = odd_server_home("slow", "SLOW_SECS = \"0.3\"");
    let args = talon_mcp_in(home.path());
    let report = support::mcp_plan(
        &serde_json::json!([
            {"wait_for_tool": "mcp__odd__slow"},
            {"call": "mcp__odd__slow", "args": {}, "progress": true}
        ]),
        &args,
    );
    let step = &report["steps"][1];
    assert!(
        step["text"].as_str().unwrap().contains("slow done"),
        "{report}"
    );
    // The server reports 1..3 back to back; a client slower than that gets the latest (issue
    // 22 item 9), so what arrives is in order and ends with the last report.
    let progress = step["progress"].as_array().unwrap();
    assert!((1..=3).contains(&progress.len()), "{report}");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{report}");
    let last = progress.last().unwrap();
    assert_eq!(last["progress"], 3.0);
    assert_eq!(last["total"], 3.0);
    assert_eq!(last["message"], "step 3");
}

/// A bridged server's elicitation reaches `talon mcp`'s own client when it can ask its user,
/// and the user's answer goes back to the server.
#[test]
fn elicitation_from_a_bridged_server_reaches_talon_mcps_client() {
    let home = odd_server_home("elicit", "");
    let args = talon_mcp_in(home.path());
    let report = support::mcp_plan(
        &serde_json::json!([
            {"elicit_answer": {"action": "accept", "content": {"password": "correct horse"}}},
            {"wait_for_tool": "mcp__odd__elicit"},
            {"call": "mcp__odd__elicit", "args": {}}
        ]),
        &args,
    );
    assert_eq!(report["elicitations"][0], "Your password?", "{report}");
    let text = report["steps"][2]["text"].as_str().unwrap();
    assert!(
        text.contains("accept") && text.contains("correct horse"),
        "{report}"
    );
}

/// Bridged stdio servers end with Talon: none outlives `talon tool call` or a `talon mcp` whose
/// client hung up.
#[test]
fn bridged_server_processes_do_not_outlive_talon() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("server.pid");
    let home = odd_server_home(
        "echo",
        &format!("PID_FILE = {:?}", pid_file.display().to_string()),
    );
    let gone = |what: &str| {
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let proc_dir = std::path::Path::new("/proc").join(pid.trim());
        for _ in 0..300 {
            let zombie = std::fs::read_to_string(proc_dir.join("stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true);
            if zombie {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the bridged server (pid {}) outlived {what}", pid.trim());
    };
    let out = command(home.path())
        .args([
            "tool",
            "call",
            "mcp__odd__echo",
            "--args",
            r#"{"message":"bye"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("echo: bye"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    gone("talon tool call");

    std::fs::remove_file(&pid_file).unwrap();
    let mut child = command(home.path())
        .args(["mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::{BufRead, Write};
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        )
        .unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.contains("\"result\""), "{line}");
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        for _ in 0..200 {
            if std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.is_empty()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The client hangs up.
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    gone("talon mcp");
}

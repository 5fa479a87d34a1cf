//! One product at every entry point: `talon tools list`, `talon tool call`, `talon mcp` and
//! `talon serve` (HTTP and MCP) open the same store, offer the same tools, run calls as the
//! default agent, and see each other's memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::path::Path;

use serde_json::{Value, json};

/// `talon tool call` in `home`'s workspace; returns (exit code, stdout, stderr).
fn tool_call(home: &Path, name: &str, args: Value, extra: &[&str]) -> (i32, String, String) {
    let out = support::command(home)
        .args(["tool", "call", name, "--workspace"])
        .arg(home.join("ws"))
        .args(["--args", &args.to_string()])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file called `name` under `dir`.
fn files_named(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if entry.file_name() == name {
                found.push(path);
            }
        }
    }
    found
}

fn names(tools: &Value) -> Vec<String> {
    let mut names: Vec<String> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn every_entry_point_offers_the_same_tools_and_shares_memory() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("ws")).unwrap();
    let data = support::data_dir(home);

    // `talon tools list`: the first start creates the store and the default agent.
    let out = support::command(home)
        .args(["tools", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cli_tools = names(&serde_json::from_slice(&out.stdout).unwrap());
    for tool in [
        "memory_search",
        "memory_get",
        "read_file",
        "search",
        "TodoWrite",
    ] {
        assert!(cli_tools.iter().any(|t| t == tool), "{tool}: {cli_tools:?}");
    }

    // `talon tool call` writes MEMORY.md into the default agent's memory, not the disk.
    let (code, stdout, stderr) = tool_call(
        home,
        "write_file",
        json!({"path": "MEMORY.md", "content": "The deploy checklist lives in the zebra runbook."}),
        &[],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");

    // `talon mcp` finds it, and writes its own note.
    let plan = json!([
        {"list": true},
        {"call": "memory_search", "args": {"query": "zebra runbook"}},
        {"call": "write_file", "args": {"path": "memory/notes.md", "content": "Kiwi is the staging cluster."}},
    ]);
    let ws = home.join("ws");
    let report = support::mcp_plan(&plan, &support::stdio_target(&data, &ws));
    let mcp_tools: Vec<String> = serde_json::from_value(report["steps"][0].clone()).unwrap();
    let found = &report["steps"][1];
    assert_eq!(found["is_error"], false, "{found}");
    assert!(
        found["text"].as_str().unwrap().contains("MEMORY.md"),
        "{found}"
    );
    assert_eq!(report["steps"][2]["is_error"], false, "{report}");

    // `talon serve` over HTTP and over MCP: same tools, same memory.
    let server = support::serve_in(home, &[]);
    let listed = support::get_json(&format!("http://{}/v1/tools", server.addr)).await;
    let http_tools = names(&listed["tools"]);
    let (_, found) = support::invoke(
        &server.addr,
        None,
        json!({"tool": "memory_search", "args": {"query": "kiwi staging"}}),
    )
    .await;
    assert_eq!(found["ok"], true, "{found}");
    assert!(
        found["result"]["for_llm"]
            .as_str()
            .unwrap()
            .contains("memory/notes.md"),
        "{found}"
    );
    let (_, written) = support::invoke(
        &server.addr,
        None,
        json!({"tool": "write_file", "args": {"path": "MEMORY.md", "content": "HTTP was here."}}),
    )
    .await;
    assert_eq!(written["ok"], true, "{written}");
    let http_mcp = support::mcp_plan(
        &json!([{"list": true}, {"call": "memory_get", "args": {"path": "MEMORY.md"}}]),
        &["http", &format!("http://{}/mcp", server.addr)],
    );
    let http_mcp_tools: Vec<String> = serde_json::from_value(http_mcp["steps"][0].clone()).unwrap();
    assert!(
        http_mcp["steps"][1]["text"]
            .as_str()
            .unwrap()
            .contains("HTTP was here."),
        "{http_mcp}"
    );

    assert_eq!(cli_tools, mcp_tools, "talon tools list vs talon mcp");
    // The gateway's own entry points add the tool that administers it (its operator calls
    // them), and nothing else.
    let without_gateway = |tools: &[String]| -> Vec<String> {
        assert!(tools.iter().any(|t| t == "gateway"), "{tools:?}");
        tools.iter().filter(|t| *t != "gateway").cloned().collect()
    };
    assert_eq!(
        cli_tools,
        without_gateway(&http_tools),
        "talon tools list vs GET /v1/tools"
    );
    assert_eq!(
        cli_tools,
        without_gateway(&http_mcp_tools),
        "talon tools list vs /mcp"
    );
    // Nothing of the memory reached a disk: not the workspace, not the gateway's workspaces.
    assert_eq!(
        files_named(home, "MEMORY.md"),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(
        files_named(home, "notes.md"),
        Vec::<std::path::PathBuf>::new()
    );
}

#[tokio::test]
async fn agents_are_checked_and_the_gateway_gives_each_agent_and_user_a_workspace() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("ws")).unwrap();

    // An unknown --agent is a usage error that says how to create it.
    let (code, _, stderr) = tool_call(home, "datetime", json!({}), &["--agent", "ghost"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown agent \"ghost\"") && stderr.contains("talon agents create ghost"),
        "{stderr}"
    );
    let created = support::command(home)
        .args(["agents", "create", "ops"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");

    let server = support::serve_in(home, &[]);
    let invoke = |body: Value| support::invoke(&server.addr, None, body);
    let (status, body) = invoke(json!({"tool": "datetime", "agent": "ghost"})).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("talon agents create ghost"),
        "{body}"
    );

    // Plain files land in <data-dir>/workspaces/<agent>/<user>, never in the server's directory.
    for (agent, user, dir) in [
        (None, None, "default/_shared"),
        (Some("ops"), Some("alice"), "ops/alice"),
        (Some("ops"), Some("../bob"), "ops/~2e2e2f626f62"),
    ] {
        let (status, body) = invoke(json!({
            "tool": "write_file",
            "agent": agent,
            "user": user,
            "args": {"path": "report.txt", "content": format!("{agent:?} {user:?}")},
        }))
        .await;
        assert_eq!(status, 200, "{body}");
        let file = support::data_dir(home)
            .join("workspaces")
            .join(dir)
            .join("report.txt");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{agent:?} {user:?}"),
            "{}",
            file.display()
        );
    }
    assert!(!home.join("report.txt").exists());
    assert!(!home.join("ws/report.txt").exists());
    // Alice cannot read what the agent's shared workspace holds.
    let (_, body) = invoke(json!({
        "tool": "read_file", "agent": "ops", "user": "alice",
        "args": {"path": "../_shared/report.txt"},
    }))
    .await;
    assert_eq!(body["ok"], false, "{body}");
    drop(server);

    // `talon serve --workspace DIR` shares one directory among every caller.
    let shared = home.join("ws");
    let mut cmd = support::command(home);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
        .arg(&shared);
    let server = support::spawn(cmd);
    let (status, body) = support::invoke(
        &server.addr,
        None,
        json!({"tool": "write_file", "agent": "ops", "user": "carol", "args": {"path": "shared.txt", "content": "s"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(shared.join("shared.txt").is_file());
}

#[tokio::test]
async fn a_one_shot_tool_call_is_audited_before_the_process_exits() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let child = support::command(home)
        .args([
            "tool",
            "call",
            "datetime",
            "--args",
            "{\"timezone\":\"UTC\"}",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait_with_output().unwrap().status.success());
    let store = talon_store::Store::open(&talon_store::StoreConfig::sqlite_in(&support::data_dir(
        home,
    )))
    .await
    .unwrap();
    let audited = store
        .audit_for_session(&format!("cli:{pid}"), 10)
        .await
        .unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].tool, "datetime");
    assert_eq!(audited[0].agent_key.as_deref(), Some("default"));
}

#[test]
fn concurrent_first_starts_share_one_store_and_one_key() {
    // An MCP client often starts several `talon mcp` at once on a fresh machine.
    let home = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            support::command(home.path())
                .args(["tools", "list", "--json"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let key =
        std::fs::read_to_string(support::data_dir(home.path()).join("encryption.key")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(support::data_dir(home.path()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the data directory is private");
    assert_eq!(key.trim().len(), 64, "{key:?}");
    let leftovers: Vec<_> = std::fs::read_dir(support::data_dir(home.path()))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn commands_get_no_talon_secrets_and_cannot_see_its_state() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("ws")).unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        // env_dump off: this test prints the environment on purpose, to show what is in it.
        "[gateway]\ntoken = \"tok-in-the-config-file-7x\"\n[exec.approvals]\ndeny_groups = { env_dump = false }\n",
    )
    .unwrap();
    let out = support::command(home.path())
        .env("TALON_SECRET_PROBE", "probe-value-123")
        .env("OPENAI_API_KEY", "sk-probe-value-456")
        .args(["tool", "call", "exec", "--workspace"])
        .arg(home.path().join("ws"))
        .args([
            "--args",
            &json!({"command": format!(
                "env; ls -A {data}; cat {cfg} || echo config-hidden",
                data = support::data_dir(home.path()).display(),
                cfg = support::config_file(home.path()).unwrap().display(),
            )})
            .to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("PATH="), "{stdout}");
    for leaked in [
        "TALON_",
        "probe-value",
        "OPENAI",
        "tok-in-the-config-file-7x",
        "talon.db",
    ] {
        assert!(
            !stdout.contains(leaked),
            "{leaked} reached the command: {stdout}"
        );
    }
    assert!(
        stdout.contains("config-hidden") || !stdout.contains("token"),
        "{stdout}"
    );
}

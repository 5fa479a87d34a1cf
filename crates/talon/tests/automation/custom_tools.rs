//! Custom tools: defined over HTTP or the CLI, loaded by a running gateway without a restart,
//! offered with their declared parameters, run with the arguments shell-quoted in the sandbox,
//! with their own variables and never the gateway's, and removed again.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, invoke};

pub const TOKEN: &str = "custom-tools-token-4f9a2c1e";

pub fn config() -> String {
    format!("[gateway]\ntoken = \"{TOKEN}\"\n[agents.ops]\n[tools]\nrate_limit_per_hour = 0\n")
}

/// `METHOD /v1/custom-tools[/name]` with the token: status and body.
pub async fn api(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("http://{addr}/v1/custom-tools{path}");
    let client = reqwest::Client::new();
    let mut req = match method {
        "GET" => client.get(url),
        "POST" => client.post(url),
        "PATCH" => client.patch(url),
        "DELETE" => client.delete(url),
        other => panic!("method {other}"),
    }
    .bearer_auth(TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The tools `agent` is offered, waiting up to 20 s until `present` says yes.
pub async fn wait_for_tools(
    addr: &str,
    agent: &str,
    present: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = reqwest::Client::new()
            .get(format!("http://{addr}/v1/tools?agent={agent}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        let names = support::tool_names(&listed);
        if present(&names) {
            return names;
        }
        assert!(
            Instant::now() < deadline,
            "the tool list did not change: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn count_lines() -> Value {
    json!({
        "name": "count_lines",
        "description": "Count the lines of a file in the workspace.",
        "command": "wc -l < {{.path}}",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "the file"}},
            "required": ["path"]
        },
        "env": {"REPORT_KEY": "rk-live-7f3c9a1e55"}
    })
}

#[tokio::test]
async fn a_tool_defined_over_http_is_loaded_without_restart_and_runs_with_its_arguments() {
    let server = support::serve(&[], Some(&config()));
    let addr = server.addr.clone();
    let ws = support::data_dir(server.home.path()).join("workspaces/default/_shared");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("three lines.txt"), "a\nb\nc\n").unwrap();

    let (status, created) = api(&addr, "POST", "", Some(count_lines())).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["env_names"], json!(["REPORT_KEY"]));
    assert!(
        created.get("env").is_none(),
        "values are never shown: {created}"
    );

    wait_for_tools(&addr, "default", |names| {
        names.iter().any(|n| n == "count_lines")
    })
    .await;
    let listed = reqwest::Client::new()
        .get(format!("http://{addr}/v1/tools"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let offered = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "count_lines")
        .cloned()
        .unwrap();
    let schema = offered
        .get("input_schema")
        .or_else(|| offered.get("parameters"))
        .or_else(|| offered.get("inputSchema"))
        .unwrap_or_else(|| panic!("no schema in {offered}"));
    assert_eq!(schema["required"], json!(["path"]), "{offered}");
    assert_eq!(schema["additionalProperties"], json!(false), "{offered}");

    // A file name with a space is one word.
    let (status, body) = invoke(
        &addr,
        Some(TOKEN),
        json!({"tool": "count_lines", "args": {"path": "three lines.txt"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["for_llm"].as_str().unwrap().trim(), "3");

    // Validation by the declared schema: a missing or undeclared argument is refused before
    // anything runs, saying what was wrong.
    for args in [json!({}), json!({"path": "x", "extra": 1})] {
        let (status, body) = invoke(
            &addr,
            Some(TOKEN),
            json!({"tool": "count_lines", "args": args}),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["failed_stage"], "validation", "{body}");
    }

    // Changed over PATCH: the new command is what runs next.
    let (status, changed) = api(
        &addr,
        "PATCH",
        "/count_lines",
        Some(json!({"command": "echo counting {{.path}}; wc -l < {{.path}}"})),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = invoke(
            &addr,
            Some(TOKEN),
            json!({"tool": "count_lines", "args": {"path": "three lines.txt"}}),
        )
        .await;
        if body["result"]["for_llm"]
            .as_str()
            .unwrap_or_default()
            .contains("counting")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the change was not loaded: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Removed: gone from the list and from the pipeline.
    let (status, _) = api(&addr, "DELETE", "/count_lines", None).await;
    assert_eq!(status, 200);
    wait_for_tools(&addr, "default", |names| {
        !names.iter().any(|n| n == "count_lines")
    })
    .await;
    let (status, body) = invoke(
        &addr,
        Some(TOKEN),
        json!({"tool": "count_lines", "args": {"path": "three lines.txt"}}),
    )
    .await;
    assert_ne!(status, 200, "{body}");
}

#[tokio::test]
async fn the_cli_defines_lists_and_removes_and_a_running_gateway_follows() {
    let server = support::serve(&[], Some(&config()));
    let home = server.home.path();
    let out = support::command(home)
        .args([
            "custom-tools",
            "add",
            "greet",
            "--description",
            "Greet someone by name.",
            "--command",
            "printf 'hello %s\\n' {{.who}}",
            "--param",
            "who:string:required:who to greet",
            "--agent",
            "ops",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Only the agent it was defined for has it.
    wait_for_tools(&server.addr, "ops", |names| {
        names.iter().any(|n| n == "greet")
    })
    .await;
    let others = wait_for_tools(&server.addr, "default", |_| true).await;
    assert!(!others.iter().any(|n| n == "greet"), "{others:?}");
    let (status, body) = invoke(
        &server.addr,
        Some(TOKEN),
        json!({"tool": "greet", "agent": "ops", "args": {"who": "Ada"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["for_llm"], "hello Ada\n");
    let (status, body) = invoke(
        &server.addr,
        Some(TOKEN),
        json!({"tool": "greet", "args": {"who": "Ada"}}),
    )
    .await;
    assert_ne!(status, 200, "another agent cannot call it: {body}");

    let out = support::command(home)
        .args(["custom-tools", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["tools"][0]["name"], "greet");
    assert_eq!(listed["tools"][0]["agent"], "ops");
    assert_eq!(
        listed["tools"][0]["parameters"]["properties"]["who"]["description"],
        "who to greet"
    );

    // Mistakes are usage errors that say what to fix.
    let out = support::command(home)
        .args([
            "custom-tools",
            "add",
            "bad",
            "--description",
            "d",
            "--command",
            "echo {{.x}}",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("{{.x}} names no parameter"), "{said}");

    let out = support::command(home)
        .args(["custom-tools", "remove", "greet"])
        .output()
        .unwrap();
    assert!(out.status.success());
    wait_for_tools(&server.addr, "ops", |names| {
        !names.iter().any(|n| n == "greet")
    })
    .await;
}

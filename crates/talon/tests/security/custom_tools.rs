//! Issue 27: what a custom tool's definition, its arguments or an unauthenticated caller must
//! not achieve. A value cannot add a command of its own; the rendered command meets the same
//! deny groups as `exec`; the command never sees the gateway's environment and its own secret
//! values never reach the model; no custom tool takes a built-in or bridged tool's name; and a
//! gateway without a token does not accept definitions.

use serde_json::json;

use crate::support::{self, invoke};

const TOKEN: &str = "h27-token-5b8e1d7c3a9f2460";

fn config() -> String {
    format!("[gateway]\ntoken = \"{TOKEN}\"\n[tools]\nrate_limit_per_hour = 0\n")
}

async fn define(
    addr: &str,
    token: Option<&str>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/v1/custom-tools"))
        .json(&body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn loaded(addr: &str, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let listed: serde_json::Value = reqwest::Client::new()
            .get(format!("http://{addr}/v1/tools"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if support::tool_names(&listed).iter().any(|n| n == name) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} was not loaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn h27_01_an_argument_cannot_add_a_command() {
    let server = support::serve(&[], Some(&config()));
    let addr = server.addr.clone();
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "say", "description": "Say something.", "command": "echo {{.text}}",
               "parameters": {"properties": {"text": {"type": "string"}}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    loaded(&addr, "say").await;
    let ws = support::data_dir(server.home.path()).join("workspaces/default/_shared");
    for text in [
        "x'; touch pwned1; echo '",
        "$(touch pwned2)",
        "`touch pwned3`",
        "a\nb; touch pwned4",
    ] {
        let (status, body) = invoke(
            &addr,
            Some(TOKEN),
            json!({"tool": "say", "args": {"text": text}}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["for_llm"].as_str().unwrap(),
            format!("{text}\n")
        );
    }
    for n in 1..=4 {
        assert!(
            !ws.join(format!("pwned{n}")).exists(),
            "pwned{n} was created"
        );
    }
}

#[tokio::test]
async fn h27_02_the_rendered_command_meets_execs_deny_groups() {
    let server = support::serve(&[], Some(&config()));
    let addr = server.addr.clone();
    // env_dump is on by default: a tool that prints the environment is refused like exec's
    // `printenv`, in the permission step, before anything runs.
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "show_env", "description": "Show the environment.", "command": "printenv"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    loaded(&addr, "show_env").await;
    let (status, body) = invoke(&addr, Some(TOKEN), json!({"tool": "show_env", "args": {}})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["failed_stage"], "permission", "{body}");
    let (status, exec) = invoke(
        &addr,
        Some(TOKEN),
        json!({"tool": "exec", "args": {"command": "printenv"}}),
    )
    .await;
    assert_eq!(status, 403, "{exec}");
}

#[tokio::test]
async fn h27_03_the_command_gets_its_own_variables_never_the_gateways_and_values_are_scrubbed() {
    let server = support::serve(
        &[("GATEWAY_ONLY_SETTING", "gw-private-3b1f")],
        Some(&config()),
    );
    let addr = server.addr.clone();
    let secret = "sk-custom-tool-4d9e2c7a1b";
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "report", "description": "Report.",
               "command": "echo \"key=$REPORT_KEY gw=$GATEWAY_ONLY_SETTING path=${PATH:+set}\"",
               "env": {"REPORT_KEY": secret}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    loaded(&addr, "report").await;
    let (status, body) = invoke(&addr, Some(TOKEN), json!({"tool": "report", "args": {}})).await;
    assert_eq!(status, 200, "{body}");
    let out = body["result"]["for_llm"].as_str().unwrap();
    assert!(!out.contains(secret), "the value is scrubbed: {out}");
    assert!(
        out.contains("key=") && !out.contains("key= "),
        "the variable was set: {out}"
    );
    assert!(
        out.contains("gw= "),
        "the gateway's own variable never reaches it: {out}"
    );
    assert!(out.contains("path=set"), "PATH is kept: {out}");

    // Stored encrypted: the database holds the name, never the value.
    let dir = support::data_dir(server.home.path());
    for file in ["talon.db", "talon.db-wal"] {
        let bytes = std::fs::read(dir.join(file)).unwrap_or_default();
        let needle = secret.as_bytes();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the value is in {file} in plaintext"
        );
    }
}

#[tokio::test]
async fn h27_04_no_custom_tool_takes_a_builtin_or_bridged_name() {
    let server = support::serve(&[], Some(&config()));
    for name in [
        "exec",
        "bash",
        "read_file",
        "cron",
        "message",
        "mcp__srv__tool",
        "mcp_srv",
        "a__b",
    ] {
        let (status, body) = define(
            &server.addr,
            Some(TOKEN),
            json!({"name": name, "description": "Shadow.", "command": "true"}),
        )
        .await;
        assert_eq!(status, 400, "{name}: {body}");
    }
    // Built-in names in any case: the check knows the whole vocabulary.
    let (status, body) = define(
        &server.addr,
        Some(TOKEN),
        json!({"name": "write", "description": "Shadow Write.", "command": "true"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn h27_05_a_gateway_without_a_token_accepts_no_definitions() {
    let server = support::serve(&[], None);
    let (status, body) = define(
        &server.addr,
        None,
        json!({"name": "sneaky", "description": "x", "command": "true"}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let listed: serde_json::Value = reqwest::get(format!("http://{}/v1/custom-tools", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tools"], json!([]));
}

/// Issue 35: a placeholder the operator put inside quotes (or anywhere a single-quoted word is
/// not data, or as the program's name) is refused when the tool is defined, through the CLI and
/// the HTTP API alike, with the fix; the same template written with the placeholder as a word
/// keeps a value's `$(…)` as text.
#[tokio::test]
async fn h35_a_quoted_placeholder_is_refused_at_definition() {
    let server = support::serve(&[], Some(&config()));
    let addr = server.addr.clone();
    for command in [
        "echo \"you said: {{.msg}}\"",
        "echo 'you said: {{.msg}}'",
        "cat <<EOF\n{{.msg}}\nEOF",
        "{{.msg}} --version",
    ] {
        let (status, body) = define(
            &addr,
            Some(TOKEN),
            json!({"name": "say", "description": "Say something.", "command": command,
                   "parameters": {"properties": {"msg": {"type": "string"}}}}),
        )
        .await;
        assert_eq!(status, 400, "{command}: {body}");
        assert!(body.to_string().contains("{{.msg}}"), "{command}: {body}");
    }
    let home = server.home.path().to_path_buf();
    let out = support::command(&home)
        .args([
            "custom-tools",
            "add",
            "say",
            "--description",
            "Say something.",
            "--command",
            "echo \"you said: {{.msg}}\"",
            "--param",
            "msg:string:required",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("double quotes") && stderr.contains("echo \"you said:\" {{.msg}}"),
        "{stderr}"
    );
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "say", "description": "Say something.",
               "command": "echo \"you said:\" {{.msg}}",
               "parameters": {"properties": {"msg": {"type": "string"}}}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    loaded(&addr, "say").await;
    let (status, body) = invoke(
        &addr,
        Some(TOKEN),
        json!({"tool": "say", "args": {"msg": "\"$(echo INJECTED)\""}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    assert!(text.contains("$(echo INJECTED)"), "{text}");
}

/// Issue 35: a tool's own secret cannot be read back through a path the model chooses
/// (`/proc/self/environ`, `/dev/fd/../environ`), nor a few bytes at a time or transformed: the
/// value is refused, and pieces, reversals and encodings of the secret are scrubbed.
#[tokio::test]
async fn h35_a_tools_secret_is_not_read_back() {
    let server = support::serve(&[], Some(&config()));
    let addr = server.addr.clone();
    let secret = "Zq7pW3xK9mTr2Lc8VbN4";
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "peek", "description": "Show part of a file.",
               "command": "head -c {{.n}} {{.file}}",
               "parameters": {"properties": {"n": {"type": "integer"}, "file": {"type": "string"}}},
               "env": {"PEEK_KEY": secret}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = define(
        &addr,
        Some(TOKEN),
        json!({"name": "slice", "description": "A slice of the key, transformed.",
               "command": "printf %s \"$SLICE_KEY\" | cut -c {{.from}}-{{.to}}; printf %s \"$SLICE_KEY\" | rev; echo; printf %s \"$SLICE_KEY\" | base64; printf %s \"$SLICE_KEY\" | od -An -tx1 | tr -d ' \\n'",
               "parameters": {"properties": {"from": {"type": "integer"}, "to": {"type": "integer"}}},
               "env": {"SLICE_KEY": secret}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    loaded(&addr, "peek").await;
    loaded(&addr, "slice").await;
    for file in ["/proc/self/environ", "/dev/fd/../environ"] {
        let (_, body) = invoke(
            &addr,
            Some(TOKEN),
            json!({"tool": "peek", "args": {"n": 4096, "file": file}}),
        )
        .await;
        let text = body.to_string();
        // `env_dump` refuses the plain path in the permission step; the tool refuses any path
        // to a process file, however spelled.
        assert!(
            text.contains("process file") || text.contains("env_dump"),
            "{text}"
        );
        assert!(!text.contains(&secret[..8]), "{text}");
    }
    for (from, to) in [(1, 8), (9, 16), (13, 20)] {
        let (status, body) = invoke(
            &addr,
            Some(TOKEN),
            json!({"tool": "slice", "args": {"from": from, "to": to}}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let text = body["result"]["for_llm"].as_str().unwrap_or_default();
        for piece in secret.as_bytes().windows(5) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!text.contains(piece), "{piece} in {text}");
        }
        let reversed: String = secret.chars().rev().collect();
        assert!(!text.contains(&reversed[..10]), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");
    }
}

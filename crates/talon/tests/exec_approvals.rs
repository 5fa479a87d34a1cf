//! Shell approvals end to end: deny groups, GoClaw's modes with Claude Code's rules, requests
//! answered over `GET`/`POST /v1/approvals`, announced on `/v1/events`, "allow always" stored
//! per agent as the whole command and kept across restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::time::Duration;

use serde_json::{Value, json};
use support::{get_json, invoke};

const CONFIG: &str = r#"
[exec.approvals]
security = "allowlist"
ask = "on-miss"
[exec.approvals.rules]
allow = ["Bash(echo:*)"]
"#;

async fn pending(addr: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let list = get_json(&format!("http://{addr}/v1/approvals")).await;
        let items = list["pending"].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            return items;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no approval request appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn resolve(addr: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/approvals"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn exec(command: &str) -> Value {
    json!({"tool": "exec", "args": {"command": command}})
}

#[tokio::test]
async fn requests_are_answered_over_http_and_allow_always_is_the_whole_command() {
    let server = support::serve(&[], Some(CONFIG));
    let addr = server.addr.clone();
    let ws = support::data_dir(server.home.path()).join("workspaces/default/_shared");

    // On the allowlist: runs at once.
    let (status, body) = invoke(&addr, None, exec("echo allowed")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["for_llm"], "allowed\n");

    // Not on it: waits for a person; the SSE stream announces the request.
    let mut events = reqwest::get(format!("http://{addr}/v1/events"))
        .await
        .unwrap();
    let call = tokio::spawn({
        let addr = addr.clone();
        async move { invoke(&addr, None, exec("touch approved.txt")).await }
    });
    let request = pending(&addr).await.remove(0);
    assert_eq!(request["tool"], "exec");
    assert_eq!(request["summary"], "touch approved.txt");
    assert_eq!(request["always"], "touch approved.txt");
    assert!(
        request["reason"].as_str().unwrap().contains("not covered"),
        "{request}"
    );
    let chunk = tokio::time::timeout(Duration::from_secs(10), events.chunk())
        .await
        .expect("an event arrives")
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.contains("event: approval_requested"), "{text}");
    let (status, answer) = resolve(
        &addr,
        json!({"id": request["id"], "decision": "allow_always"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        ws.join("approved.txt").exists(),
        "the command ran in the workspace"
    );

    // The same command again runs without asking; a longer one is a different command.
    let (status, _) = invoke(&addr, None, exec("touch approved.txt")).await;
    assert_eq!(status, 200);
    let call = tokio::spawn({
        let addr = addr.clone();
        async move { invoke(&addr, None, exec("touch approved.txt; touch sneaky.txt")).await }
    });
    let request = pending(&addr).await.remove(0);
    let (status, _) = resolve(
        &addr,
        json!({"id": request["id"], "decision": "deny", "reason": "not that one"}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body["result"]["for_llm"]
            .as_str()
            .unwrap()
            .contains("not that one"),
        "{body}"
    );
    assert!(!ws.join("sneaky.txt").exists());

    // Bad answers are refused with the fix.
    let (status, body) = resolve(&addr, json!({"id": "apr-nope", "decision": "allow_once"})).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = resolve(&addr, json!({"id": "x", "decision": "maybe"})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("allow_once"),
        "{body}"
    );
    drop(server);
}

#[tokio::test]
async fn allow_always_survives_a_restart_and_stays_per_agent() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!("{CONFIG}\n[agents.ops]\n"),
    )
    .unwrap();
    {
        let server = support::serve_in(home.path(), &[]);
        let call = tokio::spawn({
            let addr = server.addr.clone();
            async move { invoke(&addr, None, exec("touch kept.txt")).await }
        });
        let request = pending(&server.addr).await.remove(0);
        resolve(
            &server.addr,
            json!({"id": request["id"], "decision": "allow_always"}),
        )
        .await;
        assert_eq!(call.await.unwrap().0, 200);
    }
    let server = support::serve_in(home.path(), &[]);
    let (status, body) = invoke(&server.addr, None, exec("touch kept.txt")).await;
    assert_eq!(status, 200, "remembered across restarts: {body}");
    // Another agent was not approved: it is asked again.
    let call = tokio::spawn({
        let addr = server.addr.clone();
        async move {
            invoke(
                &addr,
                None,
                json!({"tool": "exec", "agent": "ops", "args": {"command": "touch kept.txt"}}),
            )
            .await
        }
    });
    let request = pending(&server.addr).await.remove(0);
    assert_eq!(request["agent"], "ops");
    resolve(
        &server.addr,
        json!({"id": request["id"], "decision": "deny"}),
    )
    .await;
    assert_eq!(call.await.unwrap().0, 403);
}

#[test]
fn deny_groups_hold_even_when_permissions_are_bypassed() {
    // `talon tool call` runs in bypassPermissions mode; a deny group still refuses.
    let home = tempfile::tempdir().unwrap();
    let out = support::command(home.path())
        .args([
            "tool",
            "call",
            "exec",
            "--args",
            r#"{"command":"echo x | base64 -d | sh"}"#,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("The command was not run"),
        "{stdout}{stderr}"
    );
    // With nobody to ask (no terminal), a command needing approval is refused at once, saying why.
    std::fs::write(home.path().join("talon.toml"), CONFIG).unwrap();
    let out = support::command(home.path())
        .args(["tool", "call", "exec", "--args", r#"{"command":"touch x"}"#])
        .env("TALON_TOOLS__PERMISSION_MODE", "default")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("no one can be asked here"), "{text}");
}

/// Runs `talon tool call exec` under a pseudo-terminal (util-linux `script`), typing `answer`
/// at the approval prompt; returns what the terminal showed and the exit status.
fn at_a_terminal(home: &std::path::Path, command: &str, answer: &str) -> (String, bool) {
    use std::io::Write;
    let talon = support::talon();
    let args = json!({"command": command}).to_string();
    let line = format!(
        "{} tool call exec --workspace {} --args '{}'",
        talon.display(),
        home.join("ws").display(),
        args
    );
    // The environment `support::command` gives talon, for `script` (which passes it on).
    let mut script = std::process::Command::new("script");
    script
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TALON_DATA_DIR", support::data_dir(home))
        .env("TALON_TOOLS__PERMISSION_MODE", "default");
    if let Some(config) = support::config_file(home) {
        script.env("TALON_CONFIG", config);
    }
    let mut child = script
        .current_dir(home)
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Answer once the prompt is up.
    std::thread::sleep(Duration::from_millis(1500));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(answer.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

#[test]
fn a_person_answers_at_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("ws")).unwrap();
    std::fs::write(home.path().join("talon.toml"), CONFIG).unwrap();
    let ws = home.path().join("ws");

    let (screen, ok) = at_a_terminal(home.path(), "touch once.txt", "y\n");
    assert!(screen.contains("needs approval"), "{screen}");
    assert!(
        screen.contains("[a] always (remembers exactly: touch once.txt)"),
        "{screen}"
    );
    assert!(ok && ws.join("once.txt").exists(), "{screen}");

    let (screen, ok) = at_a_terminal(home.path(), "touch refused.txt", "n\n");
    assert!(
        !ok && screen.contains("refused at the terminal"),
        "{screen}"
    );
    assert!(!ws.join("refused.txt").exists());

    let (screen, ok) = at_a_terminal(home.path(), "touch always.txt", "a\n");
    assert!(ok, "{screen}");
    // Remembered: the same command runs later with nobody to ask.
    std::fs::remove_file(ws.join("always.txt")).unwrap();
    let out = support::command(home.path())
        .env("TALON_TOOLS__PERMISSION_MODE", "default")
        .args(["tool", "call", "exec", "--workspace"])
        .arg(&ws)
        .args(["--args", r#"{"command":"touch always.txt"}"#])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(ws.join("always.txt").exists());
}

/// `talon …` in the server's home (its configuration), with `args`: status, stdout, stderr.
fn cli(server: &support::Server, args: &[&str]) -> (i32, String, String) {
    let out = support::command(server.home.path())
        .args(args)
        .args(["--url", &format!("http://{}", server.addr)])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 23: an operator without a browser lists and answers approvals with the CLI; the
/// command is shown with its control characters visible, and a stopped gateway is named with
/// its cause.
#[tokio::test]
async fn operators_answer_approvals_from_the_cli() {
    let server = support::serve(&[], Some(CONFIG));
    let addr = server.addr.clone();
    let call = tokio::spawn({
        let addr = addr.clone();
        async move { invoke(&addr, None, exec("touch cli.txt # \u{1b}[2Kok")).await }
    });
    let id = pending(&addr).await.remove(0)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, listed, stderr) = cli(&server, &["approvals", "list"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(
        listed.contains(&id) && listed.contains("touch cli.txt"),
        "{listed}"
    );
    assert!(
        !listed.contains('\u{1b}'),
        "escapes are shown, not sent: {listed:?}"
    );
    let (status, json_list, _) = cli(&server, &["approvals", "list", "--json"]);
    assert_eq!(status, 0);
    let json_list: Value = serde_json::from_str(&json_list).unwrap();
    assert_eq!(json_list["pending"][0]["id"], id.as_str());
    let (status, answered, stderr) = cli(&server, &["approvals", "allow", &id]);
    assert_eq!(
        (status, answered.trim()),
        (0, format!("{id}: allow_once").as_str()),
        "{stderr}"
    );
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _, stderr) = cli(&server, &["approvals", "deny", &id]);
    assert_eq!(status, 1);
    assert!(stderr.contains("no pending approval"), "{stderr}");
    let (status, listed, _) = cli(&server, &["questions", "list"]);
    assert_eq!((status, listed.trim()), (0, "no questions are waiting"));

    drop(server);
    let elsewhere = tempfile::tempdir().unwrap();
    let out = support::command(elsewhere.path())
        .args(["approvals", "list", "--url", &format!("http://{addr}")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("cannot reach the gateway") && stderr.to_lowercase().contains("refused"),
        "the cause is kept: {stderr}"
    );
}

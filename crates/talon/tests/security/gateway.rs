//! Security regressions of the gateway and of configuration loading (issue 21): what a web page,
//! a file an agent wrote, or another user of the gateway must not reach.

use reqwest::header::{CONTENT_TYPE, HOST, ORIGIN};
use serde_json::{Value, json};

use crate::support;

/// A file somewhere under `dir` named `name`.
fn find(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// A `text/plain` POST is a "simple" request a page sends cross-site without a preflight: it
/// must not be parsed, let alone run.
#[tokio::test]
async fn h21_01_text_plain_invoke_is_refused() {
    let server = support::serve(&[], None);
    let body = json!({"tool": "write_file", "args": {"path": "pwned.txt", "content": "x"}});
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tools/invoke", server.addr))
        .header(CONTENT_TYPE, "text/plain")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415, "{}", response.text().await.unwrap());
    assert_eq!(
        find(&crate::support::data_dir(server.home.path()), "pwned.txt"),
        None
    );
    // The same call as JSON, from a non-browser client, runs.
    let (status, answer) = support::invoke(&server.addr, None, body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(find(&crate::support::data_dir(server.home.path()), "pwned.txt").is_some());
}

/// A page on another origin (or marked cross-site by the browser) reaches no route.
#[tokio::test]
async fn h21_01_cross_site_origin_is_refused() {
    let server = support::serve(&[], None);
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", server.addr);
    let call = json!({"tool": "datetime", "args": {}});
    for origin in [
        "https://evil.example",
        "null",
        "http://127.0.0.1:1",
        "http://localhost.evil.example",
    ] {
        let response = client
            .post(url("/v1/tools/invoke"))
            .header(ORIGIN, origin)
            .json(&call)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "Origin {origin}");
    }
    let answered = client
        .post(url("/v1/approvals"))
        .header(ORIGIN, "https://evil.example")
        .json(&json!({"id": "x", "decision": "allow-once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 403);
    // A navigation or no-cors fetch carries no Origin, but Sec-Fetch-Site says where it is from.
    for site in ["cross-site", "same-site"] {
        let listed = client
            .get(url("/v1/approvals"))
            .header("sec-fetch-site", site)
            .send()
            .await
            .unwrap();
        assert_eq!(listed.status(), 403, "Sec-Fetch-Site {site}");
    }
    // The gateway's own origin is served.
    let own = client
        .post(url("/v1/tools/invoke"))
        .header(ORIGIN, format!("http://{}", server.addr))
        .header("sec-fetch-site", "same-origin")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200, "{}", own.text().await.unwrap());
}

/// A DNS-rebinding page reaches the gateway under its own name: every route refuses that Host.
#[tokio::test]
async fn h21_01_rebinding_host_is_refused() {
    let server = support::serve(&[], None);
    let client = reqwest::Client::new();
    let port = server.addr.rsplit(':').next().unwrap();
    let evil = format!("rebind.evil.example:{port}");
    let url = |path: &str| format!("http://{}{path}", server.addr);
    let requests = [
        client.get(url("/healthz")),
        client.get(url("/v1/approvals")),
        client.get(url("/v1/events")),
        client.get(url("/v1/mcp-servers")),
        client
            .post(url("/v1/tools/invoke"))
            .json(&json!({"tool": "datetime"})),
        client
            .post(url("/v1/mcp-servers"))
            .json(&json!({"name": "x", "url": "http://127.0.0.1:9/mcp"})),
    ];
    for request in requests {
        let response = request.header(HOST, &evil).send().await.unwrap();
        assert_eq!(response.status(), 403, "{}", response.url());
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "LOCALHOST".into(),
    ] {
        let response = client
            .get(url("/healthz"))
            .header(HOST, &host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{host}");
    }
}

/// Browsers send `Origin` on WebSocket upgrades and apply no same-origin rule to them: the events
/// stream (approvals, questions) must refuse a foreign origin.
#[tokio::test]
async fn h21_01_websocket_upgrade_with_evil_origin_is_refused() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let server = support::serve(&[], None);
    let url = format!("ws://{}/v1/events", server.addr);
    let mut request = url.clone().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a WebSocket from https://evil.example was accepted"),
    }
    // A client that is no web page is served.
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    drop(ws);
}

/// An MCP server's command runs on the host, outside the sandbox: a gateway without a token
/// accepts none over HTTP (URL servers only).
#[tokio::test]
async fn h21_01_tokenless_gateway_refuses_command_mcp_servers() {
    let server = support::serve(&[], None);
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/mcp-servers", server.addr);
    let marker = server.home.path().join("ran");
    for body in [
        json!({"name": "x", "command": "sh", "args": ["-c", format!("touch {}", marker.display())]}),
        json!({"name": "y", "transport": "stdio", "command": "true"}),
        json!({"name": "z", "url": "http://127.0.0.1:9/mcp", "env": {"A": "b"}}),
    ] {
        let response = client.post(&url).json(&body).send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap();
        assert_eq!(status, 403, "{body} → {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("gateway.token"),
            "{answer}"
        );
    }
    let listed: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["servers"], json!([]), "{listed}");
    assert!(!marker.exists());
    // A URL server is not host code: accepted.
    let added = client
        .post(&url)
        .json(&json!({"name": "remote", "url": "http://127.0.0.1:9/mcp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201, "{}", added.text().await.unwrap());
}

/// `talon tool call datetime` run from `cwd` with `env`: (exit status, stdout, stderr).
fn tool_call(
    home: &std::path::Path,
    cwd: &std::path::Path,
    env: &[(&str, &std::path::Path)],
    extra: &[&str],
) -> (i32, String, String) {
    let mut cmd = support::command(home);
    cmd.current_dir(cwd)
        .args(["tool", "call", "datetime"])
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A configuration whose hook leaves `marker` behind when it runs.
fn hook_config(marker: &std::path::Path) -> String {
    format!(
        "[[hooks.pre_tool_use]]\ncommand = \"touch {}\"\n",
        marker.display()
    )
}

/// A `talon.toml` an agent wrote into its workspace is not configuration for the next run there.
#[test]
fn h21_02_dot_talon_toml_in_the_cwd_is_not_loaded() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let marker = home.path().join("hook-ran");
    std::fs::write(ws.join("talon.toml"), hook_config(&marker)).unwrap();
    let (code, stdout, stderr) = tool_call(home.path(), &ws, &[], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!marker.exists(), "the hook of ./talon.toml ran");
    assert!(stderr.contains("./talon.toml is not read"), "{stderr}");
}

/// A configuration file named explicitly but lying where agents write is refused at start,
/// saying why.
#[test]
fn h21_02_config_inside_the_workspace_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(ws.join("conf")).unwrap();
    let marker = home.path().join("hook-ran");
    let inside = ws.join("conf/talon.toml");
    std::fs::write(&inside, hook_config(&marker)).unwrap();
    let ws_arg = ws.display().to_string();
    for (env, extra) in [
        (
            vec![("TALON_CONFIG", inside.as_path())],
            vec!["--workspace", ws_arg.as_str()],
        ),
        (vec![("TALON_CONFIG", inside.as_path())], vec![]),
    ] {
        let (code, stdout, stderr) = tool_call(home.path(), &ws, &env, &extra);
        assert_eq!(code, 2, "{stdout}{stderr}");
        assert!(stderr.contains("lies inside the workspace"), "{stderr}");
    }
    // The same file through --config, and a file inside a writable root of the sandbox.
    let out = support::command(home.path())
        .current_dir(&ws)
        .arg("--config")
        .arg(&inside)
        .args(["tool", "call", "datetime"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lies inside the workspace"), "{stderr}");
    let roots = home.path().join("roots");
    std::fs::create_dir_all(&roots).unwrap();
    let in_root = roots.join("talon.toml");
    std::fs::write(
        &in_root,
        format!(
            "[exec]\nwritable_roots = [{:?}]\n",
            roots.display().to_string()
        ),
    )
    .unwrap();
    let (code, _, stderr) = tool_call(home.path(), &ws, &[("TALON_CONFIG", &in_root)], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("exec.writable_roots"), "{stderr}");
    assert!(!marker.exists());
}

/// A hook whose program does not exist stops Talon at start, naming the hook and the program;
/// one in the workspace (relative path) is refused too.
#[test]
fn h21_hook_command_that_does_not_exist_is_refused_at_start() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for (command, expected) in [
        (
            "/nonexistent/h21/check.sh --strict",
            "/nonexistent/h21/check.sh",
        ),
        (
            "no-such-h21-hook-program",
            "no-such-h21-hook-program is not found on PATH",
        ),
        ("./hooks/check.sh", "relative path"),
    ] {
        std::fs::write(
            home.path().join("talon.toml"),
            format!("[[hooks.pre_tool_use]]\nmatcher = \"datetime\"\ncommand = {command:?}\n"),
        )
        .unwrap();
        let ws_arg = ws.display().to_string();
        let (code, stdout, stderr) =
            tool_call(home.path(), home.path(), &[], &["--workspace", &ws_arg]);
        assert_eq!(code, 2, "{command}: {stdout}{stderr}");
        assert!(
            stderr.contains("hooks.pre_tool_use[0].command") && stderr.contains(expected),
            "{command}: {stderr}"
        );
    }
}

/// Background commands belong to the caller that started them, not to the gateway's token: on
/// one gateway, user B neither lists, reads, writes to nor kills user A's.
#[tokio::test]
async fn h21_13_users_do_not_share_background_processes() {
    let server = support::serve(
        &[("TALON_TOOLS__PERMISSION_MODE", "bypassPermissions")],
        None,
    );
    let addr = server.addr.as_str();
    let as_user =
        |user: &str, tool: &str, args: Value| json!({"tool": tool, "args": args, "user": user});
    let (status, started) = support::invoke(
        addr,
        None,
        as_user(
            "alice",
            "exec",
            json!({"command": "echo alice-secret-output; sleep 60", "background": true}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let text = started["result"]["for_llm"].as_str().unwrap();
    let id = text
        .split("background process ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no id in {text}"))
        .to_string();
    let process = |user: &str, args: Value| as_user(user, "process", args);

    let (_, listed) = support::invoke(addr, None, process("bob", json!({"action": "list"}))).await;
    assert!(
        !listed.to_string().contains(&id),
        "bob lists alice's: {listed}"
    );
    for action in ["output", "kill"] {
        let (_, answer) = support::invoke(
            addr,
            None,
            process("bob", json!({"action": action, "id": id, "timeout": 1})),
        )
        .await;
        assert_eq!(answer["ok"], false, "bob could {action}: {answer}");
        assert!(
            !answer.to_string().contains("alice-secret-output"),
            "{answer}"
        );
    }
    let (_, answer) = support::invoke(
        addr,
        None,
        process("bob", json!({"action": "write", "id": id, "data": "x"})),
    )
    .await;
    assert_eq!(answer["ok"], false, "bob could write: {answer}");

    // Alice still owns it.
    let (_, listed) =
        support::invoke(addr, None, process("alice", json!({"action": "list"}))).await;
    assert!(listed.to_string().contains(&id), "{listed}");
    let (_, killed) = support::invoke(
        addr,
        None,
        process("alice", json!({"action": "kill", "id": id})),
    )
    .await;
    assert_eq!(killed["ok"], true, "{killed}");
}

/// The Bash tool's working directory is the caller's too: one user's `cd` neither moves another
/// user's commands nor is undone by them.
#[tokio::test]
async fn h21_13_users_do_not_share_the_bash_working_directory() {
    let server = support::serve(
        &[("TALON_TOOLS__PERMISSION_MODE", "bypassPermissions")],
        None,
    );
    let addr = server.addr.as_str();
    let bash = async |user: &str, command: &str| -> String {
        let (status, body) = support::invoke(
            addr,
            None,
            json!({"tool": "Bash", "args": {"command": command}, "user": user}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        body["result"]["for_llm"].as_str().unwrap().to_string()
    };
    bash("alice", "mkdir -p deep && cd deep").await;
    let bob = bash("bob", "pwd").await;
    assert!(!bob.contains("deep") && !bob.contains("reset"), "{bob}");
    let alice = bash("alice", "pwd").await;
    assert!(alice.trim_end().ends_with("/deep"), "{alice}");
}

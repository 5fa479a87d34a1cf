//! `talon migrate`, `talon agents`, `talon secrets`, and what `talon serve` creates on first start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use support::command;

fn run(home: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = command(home)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn migrate_status_and_up() {
    let home = tempfile::tempdir().unwrap();
    let (code, stdout, _) = run(home.path(), &["migrate"], None);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("schema version: 0") && stdout.contains("pending: 1 init"),
        "{stdout}"
    );
    let (code, stdout, _) = run(home.path(), &["migrate", "up"], None);
    let all: Vec<String> = talon_store::MIGRATIONS
        .iter()
        .map(|m| format!("applied: {}", m.version))
        .collect();
    assert_eq!((code, stdout.trim()), (0, all.join("\n").as_str()));
    let (_, stdout, _) = run(home.path(), &["migrate", "up"], None);
    assert_eq!(stdout.trim(), "up to date");
}

#[test]
fn agents_and_context_files_without_sql() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("soul.md"), "You are careful.").unwrap();
    assert_eq!(run(home.path(), &["agents", "create", "helper"], None).0, 0);
    assert_eq!(
        run(
            home.path(),
            &["agents", "create", "bot", "--type", "predefined"],
            None
        )
        .0,
        0
    );
    let (code, _, stderr) = run(
        home.path(),
        &["agents", "create", "x", "--type", "weird"],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("expected open or predefined"), "{stderr}");
    let (code, stdout, _) = run(
        home.path(),
        &[
            "agents", "set-file", "helper", "SOUL.md", "--from", "soul.md",
        ],
        None,
    );
    assert_eq!(code, 0, "{stdout}");
    let (code, _, _) = run(
        home.path(),
        &[
            "agents", "set-file", "helper", "USER.md", "--from", "-", "--user", "alice",
        ],
        Some("Alice likes tea"),
    );
    assert_eq!(code, 0);
    let (code, _, stderr) = run(
        home.path(),
        &[
            "agents", "set-file", "ghost", "SOUL.md", "--from", "soul.md",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("agent \"ghost\" does not exist"),
        "{stderr}"
    );
    let (_, stdout, _) = run(home.path(), &["agents", "list", "--json"], None);
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list[0]["key"], "bot");
    assert_eq!(list[0]["type"], "predefined");
    assert_eq!(list[1]["key"], "helper");
}

#[test]
fn secrets_need_the_key_they_were_stored_with() {
    let home = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(
        home.path(),
        &["secrets", "set", "api_token"],
        Some("tok-123456789\n"),
    );
    assert_eq!(code, 0);
    assert!(
        stderr.contains("generated a new encryption key"),
        "the first start says it made a key: {stderr}"
    );
    let key_file = support::data_dir(home.path()).join("encryption.key");
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let db = std::fs::read(support::data_dir(home.path()).join("talon.db")).unwrap();
    assert!(
        !db.windows(13).any(|w| w == b"tok-123456789"),
        "the value is not stored in plaintext"
    );
    let (_, stdout, _) = run(home.path(), &["secrets", "list"], None);
    assert_eq!(stdout.trim(), "api_token");

    let old_key = std::fs::read_to_string(&key_file).unwrap();
    let (code, stdout, _) = run(home.path(), &["secrets", "rotate-key"], None);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("re-encrypted 1 secrets"), "{stdout}");
    assert_ne!(std::fs::read_to_string(&key_file).unwrap(), old_key);

    let mut wrong = command(home.path());
    let out = wrong
        .env("TALON_ENCRYPTION_KEY", "11".repeat(32))
        .args(["secrets", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match"));
    let out = command(home.path())
        .env("TALON_ENCRYPTION_KEY", "short")
        .args(["secrets", "list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("64 hex digits"));
}

#[tokio::test]
async fn serve_creates_its_database_and_key_and_scrubs_stored_secrets() {
    let home = tempfile::tempdir().unwrap();
    let (code, _, _) = run(
        home.path(),
        &["secrets", "set", "deploy_token"],
        Some("plainvalue-abc-987654"),
    );
    assert_eq!(code, 0);
    let config = "[[hooks.post_tool_use]]\ncommand = \"echo 'leaked plainvalue-abc-987654'\"\n";
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let server = support::serve_in(home.path(), &[]);
    assert!(support::data_dir(home.path()).join("talon.db").exists());
    let (_, body) =
        support::invoke(&server.addr, None, serde_json::json!({"tool": "datetime"})).await;
    let text = body["result"]["for_llm"].as_str().unwrap();
    assert!(text.ends_with("leaked [REDACTED]"), "{text}");

    let fresh = tempfile::tempdir().unwrap();
    let _server = support::serve_in(fresh.path(), &[]);
    assert!(
        support::data_dir(fresh.path()).join("talon.db").exists(),
        "a fresh machine gets its SQLite database"
    );
    assert!(
        support::data_dir(fresh.path())
            .join("encryption.key")
            .exists(),
        "and its key"
    );
}

#[tokio::test]
async fn memory_tools_through_the_gateway() {
    let home = tempfile::tempdir().unwrap();
    let server = support::serve_in(home.path(), &[("TALON_TOOLS__RATE_LIMIT_PER_HOUR", "0")]);
    // Seed memory through the store the server uses (same SQLite file).
    let store = talon_store::Store::open(&talon_store::StoreConfig::sqlite_in(&support::data_dir(
        home.path(),
    )))
    .await
    .unwrap();
    store
        .put_memory(
            "default",
            "",
            "MEMORY.md",
            "The deploy window is Tuesday 10:00.\nThe cat is called Miso.",
        )
        .await
        .unwrap();
    let call = |tool: &'static str, args: serde_json::Value| {
        let addr = server.addr.clone();
        async move {
            let (_, body) =
                support::invoke(&addr, None, serde_json::json!({"tool": tool, "args": args})).await;
            (
                body["ok"].as_bool().unwrap(),
                body["result"]["for_llm"].as_str().unwrap().to_string(),
            )
        }
    };
    let (ok, text) = call("memory_search", serde_json::json!({"query": "deploy"})).await;
    assert!(
        ok && text.starts_with("Full-text search only") && text.contains("\n\nMEMORY.md:1-2 ("),
        "{text}"
    );
    let (ok, text) = call(
        "memory_get",
        serde_json::json!({"path": "MEMORY.md", "start_line": 2}),
    )
    .await;
    assert!(ok, "{text}");
    assert_eq!(text, "     2\tThe cat is called Miso.\n");
    let (ok, text) = call("memory_get", serde_json::json!({"path": "memory/none.md"})).await;
    assert!(
        !ok && text.contains("Existing documents: MEMORY.md"),
        "{text}"
    );
    // Every call was audited (written in the background), under the session of the token,
    // the agent and the user (none here).
    let mut audited = Vec::new();
    for _ in 0..50 {
        audited = store
            .audit_for_session("http:anonymous:agent:default", 10)
            .await
            .unwrap();
        if audited.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let tools: Vec<&str> = audited.iter().map(|a| a.tool.as_str()).collect();
    assert_eq!(
        tools,
        vec!["memory_get", "memory_get", "memory_search"],
        "{audited:?}"
    );
    assert!(audited[0].is_error && !audited[2].is_error);
}

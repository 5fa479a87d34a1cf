//! Issue 27: what `message` must not do. A run without a chat of its own (here a subagent a
//! model started from a terminal session) sends only to chats the operator listed in
//! `automated_chats`; without the list it was a way around the pinning of replies to the chat
//! a conversation came from.

use serde_json::json;

use crate::support;
use crate::support::chat::{mock_provider, of_conversation, requests};
use crate::support::platforms::{Platforms, SLACK_TOKEN};

#[tokio::test(flavor = "multi_thread")]
async fn h27_06_a_run_without_a_chat_sends_only_to_listed_chats() {
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let send = |chat: &str| json!({"name": "message", "arguments": {"action": "send", "channel": "ops", "chat_id": chat, "message": format!("to {chat}")}});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "H27-CHILD", "turns": [
                {"tool_calls": [send("C-LISTED"), send("C-VICTIM")]},
                {"text": "child done"}
            ]},
            {"when": "H27-PARENT", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "H27-CHILD"}}]},
                {"text": "parent done"}
            ]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\napi_key_env = \"MOCK_KEY\"\n\
             [channels.ops]\nkind = \"slack\"\nbase_url = \"{}\"\ntoken_env = \"SLACK_BOT_TOKEN\"\nautomated_chats = [\"C-LISTED\"]\n",
            mock.url, platforms.url
        ),
    )
    .unwrap();
    let dir = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        support::command(&dir)
            .env("MOCK_KEY", "sk-mock-secret-123456")
            .env("SLACK_BOT_TOKEN", SLACK_TOKEN)
            .args([
                "chat",
                "--permission-mode",
                "bypassPermissions",
                "-p",
                "H27-PARENT",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let posted: Vec<String> = platforms
        .calls_to("/api/chat.postMessage")
        .iter()
        .map(|c| c.body["channel"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(posted, ["C-LISTED"], "only the listed chat was posted to");
    let child = tokio::task::spawn_blocking(move || of_conversation(requests(&mock), "H27-CHILD"))
        .await
        .unwrap();
    let results = child[1]["messages"].to_string();
    assert!(results.contains("automated_chats"), "{results}");
}

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

/// A model answering a Telegram chat (so an adversary's words reach it) cannot make a job
/// deliver to another chat — the job would run later without a chat of its own, a way around
/// `message`'s pinning — while a job for its own chat is pinned there and delivered. Nor can
/// it administer the gateway: its user is not an operator, and no patch reaches the keys that
/// run host commands.
#[tokio::test(flavor = "multi_thread")]
async fn h27_08_a_chat_schedules_only_for_itself_and_cannot_administer_the_gateway() {
    use crate::support::platforms::{TELEGRAM_TOKEN, telegram_message};
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let cron = |to: &str| {
        json!({"name": "cron", "arguments": {"action": "add", "name": format!("job-{to}"), "every": "1h",
               "message": "H27-JOB: report", "channel": "tg", "to": to}})
    };
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "H27-JOB", "turns": [{"text": "Job report."}]},
            {"when": "H27-CHAT", "turns": [
                {"tool_calls": [cron("-2002"), cron("-1001/5")]},
                {"tool_calls": [{"name": "gateway", "arguments": {"action": "config.patch",
                    "patch": {"hooks": {"pre_tool_use": [{"command": "touch /tmp/h27-pwned"}]}}}}]},
                {"tool_calls": [{"name": "cron", "arguments": {"action": "run", "id": "job--1001/5"}}]},
                {"text": "chat done"}
            ]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n\
             [tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
             [channels.tg]\nkind = \"telegram\"\nbase_url = \"{}\"\ntoken_env = \"TG_TOKEN\"\ninbound = true\npoll_timeout_secs = 1\nchats = [\"-1001\"]\n",
            mock.url, platforms.url
        ),
    )
    .unwrap();
    let dir = home.path().to_path_buf();
    let _server = tokio::task::spawn_blocking(move || {
        support::serve_in(&dir, &[("TG_TOKEN", TELEGRAM_TOKEN)])
    })
    .await
    .unwrap();
    platforms.push_update(telegram_message(1, -1001, Some(5), "H27-CHAT: schedule it"));
    // The chat's answer, then the job's result, pinned to the chat and topic it came from.
    let sent = platforms.wait_for("/sendMessage", 2).await;
    let report = sent
        .iter()
        .find(|c| c.body["text"] == "Job report.")
        .unwrap_or_else(|| panic!("no delivery in {sent:?}"));
    assert_eq!(report.body["chat_id"], "-1001");
    assert_eq!(report.body["message_thread_id"], 5);
    assert!(
        !platforms
            .calls()
            .iter()
            .any(|c| c.body["chat_id"] == "-2002"),
        "nothing reaches another chat"
    );
    let mock_requests = tokio::task::spawn_blocking(move || requests(&mock))
        .await
        .unwrap();
    let chat = of_conversation(mock_requests, "H27-CHAT");
    let scheduled = chat[1]["messages"].to_string();
    assert!(
        scheduled.contains("its jobs deliver there only"),
        "{scheduled}"
    );
    assert!(
        scheduled.contains("results also to -1001/5 of channel tg"),
        "{scheduled}"
    );
    let administered = chat[2]["messages"].to_string();
    assert!(
        administered.contains("gateway is for the gateway's operator"),
        "{administered}"
    );
    assert!(!std::path::Path::new("/tmp/h27-pwned").exists());
}

/// Issue 35: Slack delivers one mention as a `message` and an `app_mention` with different
/// event ids; it is one message and gets one answer.
#[tokio::test(flavor = "multi_thread")]
async fn h35_a_slack_mention_is_answered_once() {
    use crate::support::platforms::SLACK_APP_TOKEN;
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "H35-MENTION", "turns": [{"text": "One answer."}]},
            {"when": "H35-LATER", "turns": [{"text": "Second message answered."}]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n\
             [tools]\nrate_limit_per_hour = 0\n\
             [channels.sl]\nkind = \"slack\"\nbase_url = \"{}\"\ntoken_env = \"SLACK_BOT_TOKEN\"\napp_token_env = \"SLACK_APP_TOKEN\"\ninbound = true\nchats = [\"C1\", \"C2\"]\n",
            mock.url, platforms.url
        ),
    )
    .unwrap();
    let dir = home.path().to_path_buf();
    let _server = tokio::task::spawn_blocking(move || {
        support::serve_in(
            &dir,
            &[
                ("SLACK_BOT_TOKEN", SLACK_TOKEN),
                ("SLACK_APP_TOKEN", SLACK_APP_TOKEN),
            ],
        )
    })
    .await
    .unwrap();
    let event = |kind: &str, channel: &str, text: &str| {
        json!({"type": kind, "channel": channel, "user": "U7", "text": text, "ts": "20.1",
               "channel_type": "channel"})
    };
    platforms.push_slack_event("env-1", "Ev1", event("message", "C1", "<@B0> H35-MENTION"));
    platforms.push_slack_event(
        "env-2",
        "Ev2",
        event("app_mention", "C1", "<@B0> H35-MENTION"),
    );
    // The same ts in another channel is another message (a session of its own).
    platforms.push_slack_event("env-3", "Ev3", event("message", "C2", "H35-LATER"));
    let posted = platforms.wait_for("/api/chat.postMessage", 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let texts: Vec<String> = platforms
        .calls_to("/api/chat.postMessage")
        .iter()
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| *t == "One answer.").count(),
        1,
        "{texts:?} {posted:?}"
    );
    assert!(
        texts.iter().any(|t| t == "Second message answered."),
        "{texts:?}"
    );
}

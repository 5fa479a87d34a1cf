//! Channels against a local server speaking the platforms' documented APIs: a Telegram group
//! with forum topics read by long polling, each topic its own session with the tools its
//! configuration allows, answers and `message` pinned to where the conversation came from,
//! `create_forum_topic`; and a subagent (which has no chat of its own) posting to Slack, Discord
//! and a webhook while a terminal session may not send at all.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::chat::{mock_provider, offered};
use crate::support::platforms::{
    DISCORD_TOKEN, Platforms, SLACK_TOKEN, TELEGRAM_TOKEN, telegram_message,
};
use crate::support::{self};

/// The requests of the conversation whose first user message contains `marker`.
async fn conversation(mock: &support::chat::Mock, marker: &str) -> Vec<Value> {
    let all: Vec<Value> = reqwest::get(format!("{}/_mock/requests", mock.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    support::chat::of_conversation(all, marker)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_telegram_forum_topic_is_a_session_with_its_tools_and_answers_go_back_there() {
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let send = |args: Value| json!({"name": "message", "arguments": args});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TOPIC-FIVE", "turns": [
                {"tool_calls": [{"name": "exec", "arguments": {"command": "echo hi"}}]},
                {"tool_calls": [
                    send(json!({"action": "send", "message": "a note for the topic"})),
                    send(json!({"action": "send", "channel": "tg", "chat_id": "-999", "message": "elsewhere"}))
                ]},
                {"tool_calls": [{"name": "create_forum_topic", "arguments": {"name": "Release"}}]},
                {"text": "Answer for topic five."}
            ]},
            {"when": "DIRECT-HELLO", "turns": [{"text": "Hello Ada."}]}
        ]}),
    );
    let config = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock}/v1\"\nmodel = \"mock-1\"\napi_key_env = \"MOCK_KEY\"\n\
         [tools]\nrate_limit_per_hour = 0\n\
         [channels.tg]\nkind = \"telegram\"\nbase_url = \"{base}\"\ntoken_env = \"TG_TOKEN\"\ninbound = true\npoll_timeout_secs = 1\nchats = [\"-1001\", \"4242\"]\n\
         [channels.tg.topics.\"-1001/5\"]\ntools = [\"message\", \"create_forum_topic\", \"datetime\"]\n",
        mock = mock.url,
        base = platforms.url,
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let _server = support::serve_in(
        home.path(),
        &[
            ("TG_TOKEN", TELEGRAM_TOKEN),
            ("MOCK_KEY", "sk-mock-secret-123456"),
        ],
    );

    platforms.push_update(telegram_message(
        1,
        -1001,
        Some(5),
        "TOPIC-FIVE: please check",
    ));
    let answers = platforms.wait_for("/sendMessage", 2).await;
    let answer = answers
        .iter()
        .find(|c| c.body["text"] == "Answer for topic five.")
        .unwrap_or_else(|| panic!("no answer in {answers:?}"));
    assert_eq!(answer.body["chat_id"], "-1001");
    assert_eq!(answer.body["message_thread_id"], 5);
    let note = answers
        .iter()
        .find(|c| c.body["text"] == "a note for the topic")
        .unwrap();
    assert_eq!(
        note.body["message_thread_id"], 5,
        "message replies in the topic"
    );
    assert!(
        !platforms
            .calls()
            .iter()
            .any(|c| c.body["chat_id"] == "-999"),
        "message cannot leave the chat the conversation came from"
    );
    let topics = platforms.calls_to("/createForumTopic");
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].body["chat_id"], "-1001");
    assert_eq!(topics[0].body["name"], "Release");

    // The topic's allow list is the turn's final one: the model is offered those tools only,
    // and a call of another is refused.
    let turn = conversation(&mock, "TOPIC-FIVE").await;
    let mut tools = offered(&turn[0]);
    tools.sort();
    assert_eq!(
        tools,
        ["create_forum_topic", "datetime", "message"],
        "{tools:?}"
    );
    let refused = turn[1]["messages"].to_string();
    assert!(refused.contains("exec"), "{refused}");
    assert!(!refused.contains("hi\\n"), "exec did not run: {refused}");
    let pinned = turn[2]["messages"].to_string();
    assert!(
        pinned.contains("goes back there only") || pinned.contains("messages go back there only"),
        "{pinned}"
    );
    assert!(
        turn[3]["messages"].to_string().contains("77"),
        "the new topic's id"
    );

    // A private chat is a session of its own (GoClaw's direct key), with the agent's tools.
    // A chat not in `chats` is not answered (and its message never reaches the model); the
    // messages after it still are.
    platforms.push_update(telegram_message(2, 999, None, "STRANGER-DANGER"));
    platforms.push_update(telegram_message(3, 4242, None, "DIRECT-HELLO"));
    let answers = platforms.wait_for("/sendMessage", 3).await;
    let direct = answers.last().unwrap();
    assert_eq!(direct.body["chat_id"], "4242");
    assert_eq!(direct.body["text"], "Hello Ada.");
    assert!(direct.body.get("message_thread_id").is_none());
    assert!(conversation(&mock, "STRANGER-DANGER").await.is_empty());
    assert!(!platforms.calls().iter().any(|c| c.body["chat_id"] == "999"));
    let direct_turn = conversation(&mock, "DIRECT-HELLO").await;
    assert!(offered(&direct_turn[0]).iter().any(|t| t == "exec"));
    // Both are stored sessions under GoClaw's keys; the private chat is its person's.
    let store = talon_store::Store::open(&talon_store::StoreConfig::sqlite_in(&support::data_dir(
        home.path(),
    )))
    .await
    .unwrap();
    let topic = store
        .session("agent:default:tg:group:-1001:topic:5")
        .await
        .unwrap()
        .expect("the topic's session");
    assert_eq!(
        topic.owner, "tg-chat-1001",
        "a group's own, apart from other callers"
    );
    let direct = store
        .session("agent:default:tg:direct:4242")
        .await
        .unwrap()
        .expect("the private chat's session");
    assert_eq!(direct.owner, "tg-4242");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subagent_posts_to_slack_discord_and_a_webhook_and_a_terminal_session_cannot() {
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("report.txt"), "quarterly numbers\n").unwrap();
    let send = |args: Value| json!({"name": "message", "arguments": args});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "CHILD-POSTS", "turns": [
                {"tool_calls": [
                    send(json!({"action": "send", "channel": "slack", "chat_id": "C1", "message": "hello slack", "thread_id": "1699.0001"})),
                    send(json!({"action": "send", "channel": "discord", "chat_id": "555", "message": "hello discord"})),
                    send(json!({"action": "send", "channel": "discord", "chat_id": "555", "message": "", "media": "report.txt"})),
                    send(json!({"action": "send", "channel": "hook", "chat_id": "ops", "message": "hello hook"})),
                    send(json!({"action": "send", "channel": "slack", "chat_id": "C404", "message": "lost"})),
                    send(json!({"action": "send", "channel": "slack", "chat_id": "C2", "message": "unlisted"}))
                ]},
                {"text": "Child posted."}
            ]},
            {"when": "POST-EVERYWHERE", "turns": [
                {"tool_calls": [send(json!({"action": "send", "channel": "slack", "chat_id": "C1", "message": "from the terminal"}))]},
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "CHILD-POSTS"}}]},
                {"text": "Parent done."}
            ]}
        ]}),
    );
    let config = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock}/v1\"\nmodel = \"mock-1\"\napi_key_env = \"MOCK_KEY\"\n\
         [tools]\nrate_limit_per_hour = 0\n\
         [channels.slack]\nkind = \"slack\"\nbase_url = \"{base}\"\ntoken_env = \"SLACK_BOT_TOKEN\"\nautomated_chats = [\"C1\", \"C404\"]\n\
         [channels.discord]\nkind = \"discord\"\nbase_url = \"{base}\"\ntoken_env = \"DISCORD_BOT_TOKEN\"\nautomated_chats = [\"555\"]\n\
         [channels.hook]\nkind = \"webhook\"\nurl = \"{base}/hook\"\nautomated_chats = [\"*\"]\n",
        mock = mock.url,
        base = platforms.url,
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        support::command(&home_path)
            .env("MOCK_KEY", "sk-mock-secret-123456")
            .env("SLACK_BOT_TOKEN", SLACK_TOKEN)
            .env("DISCORD_BOT_TOKEN", DISCORD_TOKEN)
            .args([
                "chat",
                "--permission-mode",
                "bypassPermissions",
                "-p",
                "POST-EVERYWHERE",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Parent done."), "{stdout}");

    // The terminal session has no chat: refused, saying why.
    let parent = conversation(&mock, "POST-EVERYWHERE").await;
    let refused = parent[1]["messages"].to_string();
    assert!(refused.contains("did not come from a channel"), "{refused}");
    assert!(
        !platforms
            .calls()
            .iter()
            .any(|c| c.body.to_string().contains("from the terminal"))
    );

    let slack = platforms.calls_to("/api/chat.postMessage");
    let posted = slack.iter().find(|c| c.body["channel"] == "C1").unwrap();
    assert_eq!(posted.body["text"], "hello slack");
    assert_eq!(posted.body["thread_ts"], "1699.0001");
    assert_eq!(
        posted.authorization.as_deref(),
        Some(&*format!("Bearer {SLACK_TOKEN}"))
    );
    let discord = platforms.calls_to("/api/v10/channels/555/messages");
    assert_eq!(discord.len(), 2, "{discord:?}");
    assert!(discord.iter().any(|c| c.body["content"] == "hello discord"));
    let upload = discord
        .iter()
        .find(|c| c.body.get("multipart").is_some())
        .unwrap();
    let form = upload.body["multipart"].as_str().unwrap();
    assert!(
        form.contains("name=\"files[0]\"; filename=\"report.txt\""),
        "{form}"
    );
    assert!(form.contains("quarterly numbers"), "{form}");
    assert_eq!(
        discord[0].authorization.as_deref(),
        Some(&*format!("Bot {DISCORD_TOKEN}"))
    );
    let hook = platforms.calls_to("/hook");
    assert_eq!(hook[0].body["text"], "hello hook");
    assert_eq!(hook[0].body["chat"], "ops");
    assert_eq!(hook[0].body["channel"], "hook");

    // A platform's refusal reaches the model in the platform's words.
    let child = conversation(&mock, "CHILD-POSTS").await;
    let results = child[1]["messages"].to_string();
    assert!(results.contains("channel_not_found"), "{results}");
    // A chat the operator did not list for runs without a chat of their own is refused
    // before anything is sent: a job or subagent a model starts is no way around the pinning.
    assert!(results.contains("automated_chats"), "{results}");
    assert!(!platforms.calls().iter().any(|c| c.body["channel"] == "C2"));
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// POSTs (or with `body` `None`, GETs) `path` on the gateway: the status and the JSON answer.
async fn gateway(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{path}");
    let request = match (method, body) {
        ("POST", Some(body)) => client.post(url).json(&body),
        ("POST", None) => client.post(url),
        ("PATCH", Some(body)) => client.patch(url).json(&body),
        _ => client.get(url),
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_job_delivers_its_result_to_a_chat_the_operator_allows() {
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "CRON-REPORT", "turns": [{"text": "Report: all green."}]}
        ]}),
    );
    let config = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock}/v1\"\nmodel = \"mock-1\"\n\
         [tools]\nrate_limit_per_hour = 0\n\
         [channels.hook]\nkind = \"webhook\"\nurl = \"{base}/hook\"\nautomated_chats = [\"ops\"]\n",
        mock = mock.url,
        base = platforms.url,
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let home_path = home.path().to_path_buf();
    let server = tokio::task::spawn_blocking(move || support::serve_in(&home_path, &[]))
        .await
        .unwrap();
    let job = |to: &str, channel: &str| {
        json!({"name": format!("report-{to}-{channel}"), "every": "1h", "message": "CRON-REPORT: how are the builds?",
               "channel": channel, "to": to})
    };
    // A chat the operator did not list for scheduled runs, or no such channel: refused,
    // saying what to do.
    let (status, refused) = gateway(
        &server.addr,
        "POST",
        "/v1/cron",
        Some(job("elsewhere", "hook")),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("automated_chats"), "{refused}");
    let (status, refused) = gateway(
        &server.addr,
        "POST",
        "/v1/cron",
        Some(job("ops", "nowhere")),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.to_string().contains("no channel named"),
        "{refused}"
    );
    let (status, refused) = gateway(
        &server.addr,
        "POST",
        "/v1/cron",
        Some(json!({"name": "half", "every": "1h", "message": "m", "channel": "hook"})),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.to_string().contains("give both channel"),
        "{refused}"
    );

    let (status, added) = gateway(&server.addr, "POST", "/v1/cron", Some(job("ops", "hook"))).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["job"]["delivery"]["channel"], "hook");
    assert_eq!(added["job"]["delivery"]["to"], "ops");
    assert_eq!(added["job"]["delivery"]["pinned"], false);
    let id = added["job"]["id"].as_str().unwrap().to_string();
    let (status, started) =
        gateway(&server.addr, "POST", &format!("/v1/cron/{id}/run"), None).await;
    assert_eq!(status, 200, "{started}");
    let mut delivered = Vec::new();
    for _ in 0..600 {
        delivered = platforms.calls_to("/hook");
        if !delivered.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0].body["text"], "Report: all green.");
    assert_eq!(delivered[0].body["chat"], "ops");
    // The history says the same.
    let (_, runs) = gateway(&server.addr, "GET", &format!("/v1/cron/{id}/runs"), None).await;
    assert!(runs.to_string().contains("Report: all green."), "{runs}");

    // Stopping delivery: channel "".
    let (status, changed) = gateway(
        &server.addr,
        "PATCH",
        &format!("/v1/cron/{id}"),
        Some(json!({"channel": ""})),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    assert!(changed["job"].get("delivery").is_none(), "{changed}");
    drop(server);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slack_thread_is_a_session_answered_in_its_thread_through_socket_mode() {
    use crate::support::platforms::SLACK_APP_TOKEN;
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "SLACK-THREAD", "turns": [{"text": "Answer in the thread."}]},
            {"when": "SLACK-DIRECT", "turns": [{"text": "Answer in private."}]}
        ]}),
    );
    let config = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock}/v1\"\nmodel = \"mock-1\"\n\
         [tools]\nrate_limit_per_hour = 0\n\
         [channels.sl]\nkind = \"slack\"\nbase_url = \"{base}\"\ntoken_env = \"SLACK_BOT_TOKEN\"\napp_token_env = \"SLACK_APP_TOKEN\"\ninbound = true\nchats = [\"C1\", \"D9\"]\n",
        mock = mock.url,
        base = platforms.url,
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
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
    let message = |channel: &str, text: &str, extra: Value| {
        let mut event = json!({"type": "message", "channel": channel, "user": "U7", "text": text,
                               "ts": format!("17.{}", text.len()), "channel_type": "channel"});
        event
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        event
    };
    // A bot's message (its own answers come back as events), an unlisted channel, then the
    // thread's message twice (Slack redelivers what it thinks unacknowledged) and a DM.
    platforms.push_slack_event(
        "env-1",
        "Ev1",
        message("C1", "SLACK-BOT-ECHO", json!({"bot_id": "B1"})),
    );
    platforms.push_slack_event("env-2", "Ev2", message("C2", "SLACK-STRANGER", json!({})));
    let threaded = message("C1", "SLACK-THREAD: status?", json!({"thread_ts": "16.5"}));
    platforms.push_slack_event("env-3", "Ev3", threaded.clone());
    platforms.push_slack_event("env-4", "Ev3", threaded);
    platforms.push_slack_event(
        "env-5",
        "Ev5",
        message("D9", "SLACK-DIRECT: hi", json!({"channel_type": "im"})),
    );
    let posted = platforms.wait_for("/api/chat.postMessage", 2).await;
    let in_thread = posted
        .iter()
        .find(|c| c.body["text"] == "Answer in the thread.")
        .unwrap_or_else(|| panic!("{posted:?}"));
    assert_eq!(in_thread.body["channel"], "C1");
    assert_eq!(in_thread.body["thread_ts"], "16.5");
    let direct = posted
        .iter()
        .find(|c| c.body["text"] == "Answer in private.")
        .unwrap();
    assert_eq!(direct.body["channel"], "D9");
    assert!(direct.body.get("thread_ts").is_none());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        platforms.calls_to("/api/chat.postMessage").len(),
        2,
        "the redelivered event is answered once, the bot and the stranger not at all"
    );
    let mut acks = platforms.slack_acks();
    acks.sort();
    assert_eq!(acks, ["env-1", "env-2", "env-3", "env-4", "env-5"]);
    assert!(conversation(&mock, "SLACK-BOT-ECHO").await.is_empty());
    assert!(conversation(&mock, "SLACK-STRANGER").await.is_empty());
    // Sessions keyed as GoClaw keys them: the thread is a topic of the channel's group session,
    // the DM its sender's.
    let store = talon_store::Store::open(&talon_store::StoreConfig::sqlite_in(&support::data_dir(
        home.path(),
    )))
    .await
    .unwrap();
    assert!(
        store
            .session("agent:default:sl:group:C1:topic:16.5")
            .await
            .unwrap()
            .is_some()
    );
    let dm = store
        .session("agent:default:sl:direct:D9")
        .await
        .unwrap()
        .expect("the DM's session");
    assert_eq!(dm.owner, "sl-U7");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_discord_message_is_answered_through_the_gateway_and_bots_are_not() {
    let platforms = Platforms::start().await;
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "DISCORD-HELLO", "turns": [{"text": "Hello from the agent."}]}
        ]}),
    );
    let config = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock}/v1\"\nmodel = \"mock-1\"\n\
         [tools]\nrate_limit_per_hour = 0\n\
         [channels.dc]\nkind = \"discord\"\nbase_url = \"{base}\"\ntoken_env = \"DISCORD_BOT_TOKEN\"\ninbound = true\nchats = [\"555\"]\n",
        mock = mock.url,
        base = platforms.url,
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let dir = home.path().to_path_buf();
    let _server = tokio::task::spawn_blocking(move || {
        support::serve_in(&dir, &[("DISCORD_BOT_TOKEN", DISCORD_TOKEN)])
    })
    .await
    .unwrap();
    let message = |id: &str, author: Value, channel: &str, content: &str| json!({"id": id, "channel_id": channel, "guild_id": "9", "author": author, "content": content});
    // Its own message (the id READY gave), another bot's, a channel not listed, then a person.
    platforms.push_discord_message(message("m1", json!({"id": "999"}), "555", "DISCORD-SELF"));
    platforms.push_discord_message(message(
        "m2",
        json!({"id": "8", "bot": true}),
        "555",
        "DISCORD-BOT",
    ));
    platforms.push_discord_message(message("m3", json!({"id": "7"}), "556", "DISCORD-STRANGER"));
    platforms.push_discord_message(message(
        "m4",
        json!({"id": "7"}),
        "555",
        "DISCORD-HELLO there",
    ));
    let posted = platforms
        .wait_for("/api/v10/channels/555/messages", 1)
        .await;
    assert_eq!(posted[0].body["content"], "Hello from the agent.");
    // Heartbeats go on at the interval Hello gave (one second here).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while platforms.discord_identify().1 < 2 {
        assert!(std::time::Instant::now() < deadline, "no heartbeats");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (identify, _) = platforms.discord_identify();
    let identify = identify.unwrap();
    assert_eq!(identify["d"]["intents"], 37_376, "{identify}");
    assert_eq!(
        platforms.calls_to("/messages").len(),
        1,
        "only the person is answered"
    );
    for marker in ["DISCORD-SELF", "DISCORD-BOT", "DISCORD-STRANGER"] {
        assert!(conversation(&mock, marker).await.is_empty(), "{marker}");
    }
}

//! `talon serve`'s chat API end to end against `talon mock-provider`: OpenAI-compatible chat
//! completions (stateless and in stored sessions, streamed and not), the sessions API, run
//! events on /v1/events, and clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use serde_json::{Value, json};
use support::chat::{http, listen, mock_provider, post, requests, status_json};

#[test]
fn the_gateway_speaks_chat_completions_and_keeps_sessions() {
    for kind in ["openai", "anthropic"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("notes.txt"), "gateway notes\n").unwrap();
        let mock = mock_provider(
            home.path(),
            &json!({"turns": [
                {"text": "Stateless answer."},
                {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}]},
                {"text": "Streamed answer after a tool."},
                {"text": "Second session turn."},
                {"text": "Via the sessions API."},
                {"status": 401, "error": "key revoked"}
            ]}),
        );
        let base = if kind == "openai" {
            format!("{}/v1", mock.url)
        } else {
            mock.url.clone()
        };
        std::fs::write(
            home.path().join("talon.toml"),
            format!(
                "[providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"mock-1\"\n"
            ),
        )
        .unwrap();
        let server = support::serve_in(home.path(), &[]);
        let url = |path: &str| format!("http://{}{path}", server.addr);

        // Stateless: the client's conversation is the history.
        let reply: Value = serde_json::from_str(&post(
            &url("/v1/chat/completions"),
            &json!({"model": "default", "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "earlier answer"},
                {"role": "user", "content": "hello"}]}),
            &[],
        ))
        .unwrap();
        assert_eq!(reply["object"], "chat.completion", "{kind}: {reply}");
        assert_eq!(
            reply["choices"][0]["message"]["content"],
            "Stateless answer."
        );
        assert_eq!(reply["choices"][0]["finish_reason"], "stop");
        let sent = requests(&mock);
        assert!(
            sent[0].to_string().contains("earlier answer"),
            "{kind}: history passed on"
        );

        // Streamed, in a stored session named by a header, with a tool call inside the turn;
        // the run and its tool call are announced on /v1/events.
        let events = listen(url("/v1/events"), "run_finished");
        let body = post(
            &url("/v1/chat/completions"),
            &json!({"model": "default", "stream": true, "messages": [{"role": "user", "content": "stream please"}]}),
            &[("x-talon-session", "web-1")],
        );
        let chunks: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        assert_eq!(chunks.last(), Some(&"[DONE]"), "{kind}: {body}");
        let text: String = chunks
            .iter()
            .filter_map(|c| serde_json::from_str::<Value>(c).ok())
            .filter_map(|c| {
                c.pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(text, "Streamed answer after a tool.", "{kind}: {body}");
        let events = events.join().unwrap();
        let order: Vec<&str> = events
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            order,
            [
                "run_started",
                "tool_started",
                "tool_finished",
                "run_finished"
            ],
            "{kind}: {events}"
        );
        assert!(
            events.contains("\"stop\":\"final\"")
                && events.contains("agent:default:http:direct:web-1"),
            "{events}"
        );

        // The same session continues: the stored history reaches the model.
        let reply: Value = serde_json::from_str(&post(
            &url("/v1/chat/completions"),
            &json!({"messages": [{"role": "user", "content": "and again"}], "session": "web-1"}),
            &[],
        ))
        .unwrap();
        assert_eq!(
            reply["choices"][0]["message"]["content"],
            "Second session turn."
        );
        let key = "agent:default:http:direct:web-1";
        assert_eq!(reply["talon"]["session"], key);
        let fourth = requests(&mock)[3].to_string();
        assert!(
            fourth.contains("stream please") && fourth.contains("Streamed answer after a tool."),
            "{kind}: {fourth}"
        );

        // The sessions API.
        let reply: Value = serde_json::from_str(&post(
            &url(&format!("/v1/sessions/{key}/messages")),
            &json!({"text": "one more"}),
            &[],
        ))
        .unwrap();
        assert_eq!(reply["text"], "Via the sessions API.", "{kind}: {reply}");
        let listed: Value = serde_json::from_str(&http(&url("/v1/sessions"), None, &[])).unwrap();
        assert_eq!(listed["sessions"][0]["key"], key);
        assert_eq!(listed["sessions"][0]["turns"], 3);
        let shown: Value =
            serde_json::from_str(&http(&url(&format!("/v1/sessions/{key}")), None, &[])).unwrap();
        let roles: Vec<&str> = shown["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool_results",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant"
            ]
        );

        // A provider failure is a 502 with the reason; bad requests say what is wrong.
        let failed: Value = serde_json::from_str(&post(
            &url("/v1/chat/completions"),
            &json!({"messages": [{"role": "user", "content": "x"}]}),
            &[],
        ))
        .unwrap();
        assert!(
            failed["error"]["message"]
                .as_str()
                .unwrap()
                .contains("key revoked"),
            "{failed}"
        );
        let bad: Value = serde_json::from_str(&post(
            &url("/v1/chat/completions"),
            &json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "prefill"}]}),
            &[],
        ))
        .unwrap();
        assert!(
            bad["error"]["message"]
                .as_str()
                .unwrap()
                .contains("end with a user message or tool results"),
            "{bad}"
        );
        let unknown: Value = serde_json::from_str(&post(
            &url("/v1/chat/completions"),
            &json!({"model": "nobody", "messages": [{"role": "user", "content": "x"}]}),
            &[],
        ))
        .unwrap();
        assert!(
            unknown["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nobody"),
            "{unknown}"
        );
    }
}

/// Issue 23's first observations, as an OpenAI client meets them: agents are listed as models,
/// an unknown one is OpenAI's 404 `model_not_found`, and a stream carries a usage chunk (whose
/// `choices` is empty) only when `stream_options.include_usage` asks for it — the SDK's own
/// streaming example reads `chunk.choices[0]` of every chunk.
#[test]
fn openai_clients_find_agents_and_read_every_chunks_first_choice() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [{"text": "Plain stream."}, {"text": "Stream with usage."}]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n[agents.researcher.tools]\nallow = [\"datetime\"]\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let url = |path: &str| format!("http://{}{path}", server.addr);

    let (status, models) = status_json(&url("/v1/models"), None);
    assert_eq!(status, 200, "{models}");
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["default", "researcher"], "{models}");
    assert_eq!(models["data"][0]["object"], "model");
    let (status, one) = status_json(&url("/v1/models/researcher"), None);
    assert_eq!((status, &one["id"]), (200, &json!("researcher")), "{one}");
    for (status, answer) in [
        status_json(&url("/v1/models/nope"), None),
        status_json(
            &url("/v1/chat/completions"),
            Some(&json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]})),
        ),
    ] {
        assert_eq!(status, 404, "{answer}");
        assert_eq!(answer["error"]["code"], "model_not_found", "{answer}");
        assert_eq!(answer["error"]["param"], "model", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("talon agents create nope"),
            "{answer}"
        );
    }

    let chunks = |body: &Value| -> Vec<Value> {
        post(&url("/v1/chat/completions"), body, &[])
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    };
    let plain = chunks(&json!({"model": "default", "stream": true,
                                "messages": [{"role": "user", "content": "one"}]}));
    assert!(
        plain
            .iter()
            .all(|c| c["choices"][0].is_object() && c.get("usage").is_none()),
        "{plain:?}"
    );
    let with_usage = chunks(&json!({"model": "default", "stream": true,
                                     "stream_options": {"include_usage": true},
                                     "messages": [{"role": "user", "content": "two"}]}));
    let (last, rest) = with_usage.split_last().unwrap();
    assert_eq!(last["choices"], json!([]), "{with_usage:?}");
    assert!(last["usage"]["total_tokens"].is_u64(), "{last}");
    assert!(
        rest.iter()
            .all(|c| c["choices"][0].is_object() && c.get("usage") == Some(&Value::Null)),
        "{with_usage:?}"
    );
}

/// Issue 23: the official `openai` and `anthropic` Python SDKs drive an agent as they would
/// OpenAI or Anthropic: a system prompt of theirs, the texts around the agent's own tool call
/// kept and separated (streamed and not), a tool of the client's called, answered and
/// continued with the agent's call still in the conversation, sampling settings and an image
/// passed to the provider, and what Talon cannot do refused with the parameter named.
#[test]
fn official_sdks_use_agents_as_drop_in_models() {
    for sdk in ["openai", "anthropic"] {
        let home = tempfile::tempdir().unwrap();
        let datetime = json!({"name": "datetime", "arguments": {"timezone": "UTC"}});
        let mock = mock_provider(
            home.path(),
            &json!({"turns": [
                {"text": "Let me look.", "tool_calls": [datetime]},
                {"text": "Arr, it is noon."},
                {"text": "Checking again.", "tool_calls": [datetime]},
                {"text": "Still noon."},
                {"tool_calls": [datetime, {"name": "get_weather", "arguments": {"city": "Paris"}}]},
                {"text": "Sunny in Paris."},
                {"text": "Checking Rome.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}]},
                {"text": "Cloudy in Rome."},
                {"text": "A tiny pixel."}
            ]}),
        );
        // Each SDK against the provider of its own kind, so both translations are checked.
        let base = if sdk == "openai" {
            format!("{}/v1", mock.url)
        } else {
            mock.url.clone()
        };
        std::fs::write(
            home.path().join("talon.toml"),
            format!(
                "[providers.mock]\nkind = \"{sdk}\"\nbase_url = \"{base}\"\nmodel = \"mock-1\"\n[gateway]\ntoken = \"sdk-token-8d3f6a1c9e2b4071\"\n"
            ),
        )
        .unwrap();
        let server = support::serve_in(home.path(), &[]);
        let report = support::python_sdk_client(&[
            sdk,
            &format!("http://{}", server.addr),
            "sdk-token-8d3f6a1c9e2b4071",
        ]);
        let openai = sdk == "openai";
        assert_eq!(
            report["text"], "Let me look.\n\nArr, it is noon.",
            "{sdk}: {report}"
        );
        assert_eq!(report["finish"], if openai { "stop" } else { "end_turn" });
        assert_eq!(report["activity"], json!(["datetime"]), "{sdk}: {report}");
        assert_eq!(
            report["streamed"], "Checking again.\n\nStill noon.",
            "{sdk}: {report}"
        );
        assert_eq!(
            report["tool_finish"],
            if openai { "tool_calls" } else { "tool_use" }
        );
        assert_eq!(
            report["tool_calls"],
            json!([["get_weather", {"city": "Paris"}]]),
            "{sdk}: {report}"
        );
        assert_eq!(report["after_tool"], "Sunny in Paris.", "{sdk}: {report}");
        assert_eq!(
            report["streamed_tool_finish"],
            if openai { "tool_calls" } else { "tool_use" }
        );
        assert_eq!(
            report["streamed_tool_calls"],
            json!([["get_weather", {"city": "Rome"}]]),
            "{sdk}: {report}"
        );
        assert_eq!(
            report["streamed_after_tool"], "Cloudy in Rome.",
            "{sdk}: {report}"
        );
        assert_eq!(report["sampled"], "A tiny pixel.", "{sdk}: {report}");
        if openai {
            assert_eq!(report["n2"], json!({"status": 400, "param": "n"}));
            assert_eq!(report["unknown_model"], "model_not_found");
            assert_eq!(report["models"], json!(["default"]));
        } else {
            assert_eq!(
                report["n2"],
                json!({"status": 400, "type": "invalid_request_error"})
            );
            assert_eq!(report["unknown_model"], "not_found_error");
        }

        let sent = requests(&mock);
        assert_eq!(sent.len(), 9, "{sdk}: one request per scripted answer");
        let system = if openai {
            sent[0]["messages"][0]["content"].clone()
        } else {
            sent[0]["system"].clone()
        };
        assert!(
            system.as_str().unwrap().ends_with("Answer like a pirate."),
            "{sdk}: the client's system text follows the agent's: {system}"
        );
        let offered = sent[4]["tools"].to_string();
        assert!(
            offered.contains("get_weather") && offered.contains("datetime"),
            "{sdk}: {offered}"
        );
        // The follow-up holds the agent's own call and result, and the client's result under
        // the model's id.
        let follow_up = sent[5].to_string();
        let prefix = if openai {
            "call_mock_4_"
        } else {
            "toolu_mock_4_"
        };
        assert_eq!(
            follow_up.matches(&format!("{prefix}0")).count(),
            2,
            "{sdk}: {follow_up}"
        );
        assert_eq!(
            follow_up.matches(&format!("{prefix}1")).count(),
            2,
            "{sdk}: {follow_up}"
        );
        assert!(follow_up.contains("Sunny, 21 C"), "{sdk}: {follow_up}");
        let streamed_follow_up = sent[7].to_string();
        assert!(
            streamed_follow_up.contains("Cloudy, 18 C")
                && streamed_follow_up.contains(&format!("{}6_0", &prefix[..prefix.len() - 2])),
            "{sdk}: the streamed call's result under the model's id: {streamed_follow_up}"
        );
        let sampled = &sent[8];
        assert_eq!(sampled["temperature"], 0.25, "{sdk}: {sampled}");
        assert_eq!(sampled["top_p"], 0.5, "{sdk}: {sampled}");
        assert_eq!(sampled["max_tokens"], 77, "{sdk}: {sampled}");
        assert!(
            sampled.to_string().contains("iVBORw0KGgo"),
            "{sdk}: the image"
        );
        if openai {
            assert_eq!(sampled["stop"], json!(["END"]));
            assert_eq!(sampled["seed"], 7);
            assert_eq!(sampled["response_format"], json!({"type": "json_object"}));
        } else {
            assert_eq!(sampled["stop_sequences"], json!(["END"]));
        }
    }
}

/// Issue 23: an operator sees what `talon serve` does: the configuration file at start, one
/// line per request (refused ones too), each turn and tool call, a server that could not be
/// reached once with its cause and no Rust type names, and the stop on SIGTERM; no library
/// debug dumps by default.
#[test]
fn operators_see_requests_turns_and_tool_calls_in_the_log() {
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}]},
            {"text": "Noon."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n[mcp_servers.gone]\nurl = \"http://127.0.0.1:9/mcp\"\n",
            mock.url
        ),
    )
    .unwrap();
    let mut child = support::command(home.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    let addr = loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("serve logs its address");
        let found = line.split("addr=").nth(1).map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        });
        log.push(line);
        if let Some(addr) = found {
            break addr;
        }
    };
    let url = |path: &str| format!("http://{addr}{path}");
    assert_eq!(status_json(&url("/v1/models"), None).0, 200);
    assert_eq!(status_json(&url("/v1/nothing-here"), None).0, 404);
    let reply: Value = serde_json::from_str(&post(
        &url("/v1/chat/completions"),
        &json!({"model": "default", "messages": [{"role": "user", "content": "time?"}]}),
        &[],
    ))
    .unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "Noon.");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success(), "a clean stop on SIGTERM");
    log.extend(rx.try_iter());
    let log = log.join("\n");
    let config = support::config_file(home.path()).unwrap();
    assert!(
        log.contains(&format!("config={}", config.display())),
        "{log}"
    );
    for expected in [
        "/v1/models\" status=200",
        "/v1/nothing-here\" status=404",
        "/v1/chat/completions\" status=200",
        "agent=\"default\"",
        "tool call tool=datetime ok=true",
        "turn agent=default",
        "stopping",
        "gateway stopped",
    ] {
        assert!(log.contains(expected), "{expected:?} missing from\n{log}");
    }
    let gone: Vec<&str> = log.lines().filter(|l| l.contains("\"gone\"")).collect();
    assert_eq!(gone.len(), 1, "reported once: {log}");
    assert!(
        gone[0].to_lowercase().contains("connection refused"),
        "the cause is kept: {log}"
    );
    assert!(!log.contains("rmcp"), "no library dumps by default: {log}");
}

/// Issue 23: the dashboard at `/`, in Debian's chromium driven by Playwright: log in with the
/// token, find a session and read its transcript (a model's `<b>` and bidi override shown as
/// text), answer a waiting approval, watch the tool's event arrive, see the agents; no console
/// error and no CSP violation. Screenshots are kept in the target directory.
#[test]
fn the_dashboard_logs_in_answers_an_approval_and_shows_events() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "Hello <b>there</b> \u{202e}gnp.exe"},
            {"tool_calls": [{"name": "exec", "arguments": {"command": "touch dashboard.txt"}}]},
            {"text": "Done."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n\
             [gateway]\ntoken = \"dash-token-6c2e9a4f1b7d3058\"\n\
             [exec.approvals]\nsecurity = \"allowlist\"\nask = \"on-miss\"\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let auth = [("authorization", "Bearer dash-token-6c2e9a4f1b7d3058")];
    let turn = |text: &str| {
        json!({"model": "default", "session": "dash",
               "messages": [{"role": "user", "content": text}]})
    };
    let first: Value = serde_json::from_str(&post(
        &format!("{base}/v1/chat/completions"),
        &turn("hello"),
        &auth,
    ))
    .unwrap();
    assert!(
        first["choices"][0]["message"]["content"].is_string(),
        "{first}"
    );
    // The browser and the Python client are provisioned first (on a fresh machine that takes
    // minutes): the approval below waits two minutes for the dashboard, not for pip.
    let chromium = support::chromium();
    let _ = support::python();
    // The second turn waits for a person's approval of its command.
    let waiting = std::thread::spawn({
        let url = format!("{base}/v1/chat/completions");
        let body = turn("make the file");
        move || {
            post(
                &url,
                &body,
                &[("authorization", "Bearer dash-token-6c2e9a4f1b7d3058")],
            )
        }
    });
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let key = "agent:default:http:direct:dash";
    // A team with a task whose subject a model wrote as markup.
    let (status, team) = status_json_with(
        &format!("{base}/v1/teams"),
        &json!({"name": "alpha", "lead": "default"}),
        &auth,
    );
    assert_eq!(status, 201, "{team}");
    store_task(home.path(), "alpha", "ship <b>it</b>");
    let steps = json!({"session": key, "transcript_contains": "Hello", "approve": true,
                       "expect_event": "tool_finished", "agent": "default", "team": "alpha"});
    let report = support::dashboard(&[
        &base,
        "dash-token-6c2e9a4f1b7d3058",
        shots.to_str().unwrap(),
        chromium.to_str().unwrap(),
        &steps.to_string(),
    ]);
    assert_eq!(report["logged_in"], true, "{report}");
    assert_eq!(report["token_required"], true, "{report}");
    assert!(
        report["sessions"].as_array().unwrap().contains(&json!(key)),
        "{report}"
    );
    let transcript = report["transcript"].as_str().unwrap();
    assert!(
        transcript.contains("<b>there</b>"),
        "shown as text: {report}"
    );
    assert!(!transcript.contains('\u{202e}'), "made visible: {report}");
    assert!(report["approved"].is_string(), "{report}");
    assert!(
        report["events"]
            .as_array()
            .unwrap()
            .contains(&json!("tool_finished")),
        "{report}"
    );
    assert!(
        report["agents"]
            .as_array()
            .unwrap()
            .contains(&json!("default")),
        "{report}"
    );
    assert_eq!(report["task_statuses"], json!(["pending"]), "{report}");
    assert!(
        report["board_text"]
            .as_str()
            .unwrap()
            .contains("ship <b>it</b>"),
        "shown as text: {report}"
    );
    assert_eq!(report["console_errors"], json!([]), "{report}");
    let done: Value = serde_json::from_str(&waiting.join().unwrap()).unwrap();
    assert_eq!(done["choices"][0]["message"]["content"], "Done.", "{done}");
    for page in [
        "login",
        "sessions",
        "approvals",
        "events",
        "agents",
        "teams",
    ] {
        assert!(shots.join(format!("{page}.png")).is_file(), "{page}.png");
    }
    // The page itself is served without the token (it holds no data), under a strict CSP.
    let (status, page) = support::chat::exchange(&format!("{base}/"), None, &[]);
    assert_eq!(status, 200);
    assert!(page.contains("/dashboard/app.js"));
}

/// A request with a JSON body and headers: the status and the body as JSON.
fn status_json_with(url: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let (status, text) = support::chat::exchange(url, Some(body), headers);
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Posts a task on `team`'s board straight in the store of the gateway in `home` (for no user).
fn store_task(home: &std::path::Path, team: &str, subject: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = talon_store::StoreConfig::sqlite_in(&support::data_dir(home));
        let store = talon_store::Store::open(&config).await.unwrap();
        store
            .create_task(&talon_store::NewTask {
                team,
                subject,
                created_by: "default",
                ..Default::default()
            })
            .await
            .unwrap();
    });
}

/// Issue 24: a running child is listed by `GET /v1/runs` and stopped by
/// `POST /v1/runs/{id}/cancel`: the child ends `cancelled` and its parent is told, while
/// another user sees no such run.
#[test]
fn a_running_subagent_is_listed_and_cancelled_over_http() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "Think for a long time."}}]},
            {"text": "too late", "delay_ms": 30000},
            {"text": "The child was stopped."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let turn = std::thread::spawn({
        let url = format!("{base}/v1/chat/completions");
        move || {
            post(
                &url,
                &json!({"model": "default", "user": "alice",
                        "messages": [{"role": "user", "content": "think hard"}]}),
                &[],
            )
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let id = loop {
        let (_, runs) = status_json(&format!("{base}/v1/runs?user=alice"), None);
        if let Some(id) = runs["runs"][0]["id"].as_str() {
            assert_eq!(runs["runs"][0]["status"], "running", "{runs}");
            break id.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no run appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (status, theirs) = status_json(&format!("{base}/v1/runs?user=bob"), None);
    assert_eq!((status, &theirs["runs"]), (200, &json!([])));
    let (status, _) = status_json(&format!("{base}/v1/runs/{id}?user=bob"), None);
    assert_eq!(status, 404, "another user's run is not found");
    let (status, cancelled) = status_json(
        &format!("{base}/v1/runs/{id}/cancel?user=alice"),
        Some(&json!({})),
    );
    assert_eq!(status, 200, "{cancelled}");
    let reply: Value = serde_json::from_str(&turn.join().unwrap()).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"], "The child was stopped.",
        "{reply}"
    );
    let (_, run) = status_json(&format!("{base}/v1/runs/{id}?user=alice"), None);
    assert_eq!(run["run"]["status"], "cancelled", "{run}");
    let told = requests(&mock)[2]["messages"].to_string();
    assert!(told.contains("cancelled"), "the parent is told: {told}");
}

mod gateways;

mod cron;

mod h36_faults;
mod h36_runs;

/// Issue 24: a background child that needs an approval waits as `waiting_approval` on the
/// approvals queue every entry point serves (never silently denied), is approved through
/// `/v1/approvals`, and completes; its result reaches the parent.
#[test]
fn a_child_waiting_for_approval_is_approved_over_http_and_completes() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-APPROVE", "turns": [
                {"tool_calls": [{"name": "exec", "arguments": {"command": "touch approved.txt"}}]},
                {"text": "child done"}
            ]},
            {"when": "approval helper", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-APPROVE"}}]},
                {"text": "Spawned."},
                {"text": "Child finished."}
            ]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n[exec.approvals]\nsecurity = \"allowlist\"\nask = \"on-miss\"\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let turn = std::thread::spawn({
        let url = format!("{base}/v1/sessions/approve/messages");
        move || {
            post(
                &url,
                &json!({"text": "approval helper", "user": "alice"}),
                &[],
            )
        }
    });
    let approve = |tool: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let id = loop {
            let (_, pending) = status_json(&format!("{base}/v1/approvals?user=alice"), None);
            if let Some(request) = pending["pending"]
                .as_array()
                .and_then(|p| p.iter().find(|r| r["tool"] == tool))
            {
                break request["id"].as_str().unwrap().to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {tool} approval: {pending}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let (status, answer) = status_json(
            &format!("{base}/v1/approvals?user=alice"),
            Some(&json!({"id": id, "decision": "allow_once"})),
        );
        assert_eq!(status, 200, "{answer}");
    };
    // Starting a child is itself a call a person approves in the default mode.
    approve("spawn");
    let reply = turn.join().unwrap();
    assert!(reply.contains("Spawned."), "{reply}");
    let run_status = || {
        let (_, runs) = status_json(&format!("{base}/v1/runs?user=alice"), None);
        runs["runs"][0]["status"].as_str().unwrap_or("").to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while run_status() != "waiting_approval" {
        assert!(
            std::time::Instant::now() < deadline,
            "never waited: {}",
            run_status()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    approve("exec");
    while run_status() != "completed" {
        assert!(
            std::time::Instant::now() < deadline,
            "never completed: {}",
            run_status()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    while !status_json(&format!("{base}/v1/sessions/approve?user=alice"), None)
        .1
        .to_string()
        .contains("Child finished.")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the parent was never told"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let told = status_json(&format!("{base}/v1/sessions/approve?user=alice"), None).1;
    assert!(told.to_string().contains("child done"), "{told}");
}

mod teams;

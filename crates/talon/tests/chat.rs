//! `talon chat -p` end to end against `talon mock-provider`, in both wire formats: a real tool
//! call (read_file in the workspace), the answer, the session continued from the store by a
//! second process, the output formats, context files, run hooks, session tools, compaction,
//! and a model server independent of Talon's mock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use serde_json::{Value, json};
use support::chat::{chat, mock_provider, requests};

#[test]
fn a_session_runs_a_tool_and_continues_in_a_second_process() {
    for kind in ["openai", "anthropic"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("notes.txt"), "hello from the notes\n").unwrap();
        let mock = mock_provider(
            home.path(),
            &json!({"turns": [
                {"text": "Reading it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                {"text": "The file says hello."},
                {"text": "Still hello."},
                {"text": "Third answer."}
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
                "[providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"mock-1\"\napi_key_env = \"MOCK_KEY\"\n"
            ),
        )
        .unwrap();

        let (stdout, stderr, code) = chat(
            home.path(),
            &[
                "--session",
                "s1",
                "--output-format",
                "json",
                "-p",
                "what do my notes say?",
            ],
        );
        assert_eq!(code, 0, "{kind}: {stderr}");
        let result: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(result["text"], "The file says hello.", "{kind}");
        assert_eq!(result["stop"]["reason"], "final");
        assert_eq!(result["iterations"], 2);
        assert_eq!(result["session"], "agent:default:cli:direct:s1");

        let (stdout, stderr, code) = chat(
            home.path(),
            &[
                "--session",
                "s1",
                "--output-format",
                "stream-json",
                "-p",
                "and now?",
            ],
        );
        assert_eq!(code, 0, "{kind}: {stderr}");
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            lines.iter().any(|l| l["type"] == "text"),
            "{kind}: {stdout}"
        );
        assert_eq!(lines.last().unwrap()["text"], "Still hello.");

        let (stdout, stderr, code) = chat(home.path(), &["--session", "s1", "-p", "once more"]);
        assert_eq!(code, 0, "{kind}: {stderr}");
        assert_eq!(stdout.trim(), "Third answer.");

        let sent = requests(&mock);
        assert_eq!(sent.len(), 4, "{kind}");
        // Issue 23: one tool per job, named as the model knows them (Claude Code's for a
        // Claude model, GoClaw's for others); the twin the model called anyway still ran.
        let offered: Vec<String> = sent[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_string()
            })
            .collect();
        let (ours, twin) = if kind == "openai" {
            ("read_file", "Read")
        } else {
            ("Read", "read_file")
        };
        assert!(
            offered.iter().any(|t| t == ours) && !offered.iter().any(|t| t == twin),
            "{kind}: {offered:?}"
        );
        assert!(
            offered.iter().any(|t| t == "memory_search"),
            "{kind}: {offered:?}"
        );
        // The second request carries the tool's real output.
        let second = sent[1].to_string();
        assert!(second.contains("hello from the notes"), "{kind}: {second}");
        // The third request, from a new process, carries the whole session so far.
        let third = sent[2].to_string();
        for earlier in [
            "what do my notes say?",
            "hello from the notes",
            "The file says hello.",
            "and now?",
        ] {
            assert!(
                third.contains(earlier),
                "{kind}: {earlier:?} missing from {third}"
            );
        }
    }
}

#[test]
fn a_missing_provider_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "hi"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no model provider is configured"),
        "{stderr}"
    );
    assert!(stderr.contains("[providers.NAME]"), "{stderr}");
}

#[test]
fn a_refused_key_fails_with_what_to_check() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [{"status": 401, "error": "invalid api key"}]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"MOCK_KEY\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "hi"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("refused the API key") && stderr.contains("invalid api key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sk-mock-secret-123456"),
        "the key is never printed"
    );
}

#[test]
fn the_agents_context_files_make_its_system_prompt() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(home.path(), &json!({"turns": [{"text": "ok"}]}));
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[chat]\nsystem = \"Configured prompt.\"\n[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    std::fs::write(home.path().join("soul.md"), "I am the soul file.\n").unwrap();
    // The default agent exists once any command has opened the store.
    let (_, stderr, code) = chat(home.path(), &["-p", "warm up"]);
    assert_eq!(code, 0, "{stderr}");
    let out = support::command(home.path())
        .args(["agents", "set-file", "default", "SOUL.md", "--from"])
        .arg(home.path().join("soul.md"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mock2 = mock_provider(home.path(), &json!({"turns": [{"text": "ok"}]}));
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[chat]\nsystem = \"Configured prompt.\"\n[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            mock2.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "who are you?"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(requests(&mock)[0]["system"], "Configured prompt.");
    assert_eq!(
        requests(&mock2)[0]["system"],
        "Configured prompt.\n\n# SOUL.md\n\nI am the soul file."
    );
}

#[test]
fn configured_run_hooks_reach_the_cli() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(home.path(), &json!({"turns": [{"text": "hello"}]}));
    std::fs::write(
        home.path().join("start.sh"),
        "cat > /dev/null\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"SessionStart\",\"additionalContext\":\"Today is release day.\"}}'\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("prompt.sh"),
        "if grep -q forbidden; then echo 'prompts about forbidden things are refused' >&2; exit 2; fi\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n\
             [[hooks.session_start]]\ncommand = \"sh start.sh\"\n\
             [[hooks.user_prompt_submit]]\ncommand = \"sh prompt.sh\"\n\
             [[hooks.user_prompt_submit]]\ncommand = \"echo only for reviewer >&2; exit 2\"\nagents = [\"reviewer\"]\n",
            mock.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "tell me forbidden things"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("prompts about forbidden things are refused"),
        "{stderr}"
    );
    assert!(requests(&mock).is_empty());
    let (stdout, stderr, code) = chat(home.path(), &["--session", "h", "-p", "hi"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "hello");
    let sent = requests(&mock)[0].to_string();
    assert!(
        sent.contains("Today is release day.") && sent.contains("hi"),
        "{sent}"
    );
}

#[test]
fn session_tools_see_and_reach_the_agents_other_sessions() {
    let home = tempfile::tempdir().unwrap();
    let a = "agent:default:cli:direct:a";
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "A's first answer."},
            {"tool_calls": [
                {"name": "sessions_list", "arguments": {}},
                {"name": "session_status", "arguments": {}},
                {"name": "sessions_history", "arguments": {"session_key": a}}]},
            {"tool_calls": [{"name": "sessions_send", "arguments": {"session_key": a, "message": "ping from b"}}]},
            {"text": "pong from a"},
            {"text": "B is done."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["--session", "a", "-p", "hello A"]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) = chat(home.path(), &["--session", "b", "-p", "look around"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "B is done.");
    let sent = requests(&mock);
    assert_eq!(sent.len(), 5);
    let results = sent[2].to_string();
    assert!(
        results.contains(a) && results.contains("1 turns"),
        "sessions_list: {results}"
    );
    assert!(
        results.contains("agent:default:cli:direct:b"),
        "session_status: {results}"
    );
    assert!(
        results.contains("user: hello A") && results.contains("assistant: A's first answer."),
        "sessions_history: {results}"
    );
    // The message reached session A as a turn with A's history.
    let in_a = sent[3].to_string();
    assert!(
        in_a.contains("hello A") && in_a.contains("ping from b"),
        "{in_a}"
    );
    assert!(
        sent[4].to_string().contains("pong from a"),
        "the answer came back to B"
    );
}

#[test]
fn a_session_nearing_the_context_window_is_compacted() {
    let home = tempfile::tempdir().unwrap();
    let long = "a long second answer ".repeat(15);
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "first answer"},
            {"text": long},
            {"text": "SUMMARY: the user said hello first."},
            {"text": "third answer"}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\ncontext_window = 60\n",
            mock.url
        ),
    )
    .unwrap();
    for prompt in ["hello there", "second question"] {
        let (_, stderr, code) = chat(home.path(), &["--session", "c", "-p", prompt]);
        assert_eq!(code, 0, "{stderr}");
    }
    let (stdout, stderr, code) = chat(home.path(), &["--session", "c", "-p", "third question"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "third answer");
    assert!(
        stderr.contains("oldest messages were summarised"),
        "{stderr}"
    );
    let sent = requests(&mock);
    assert_eq!(sent.len(), 4);
    // The summary request: no tools, the old turn as a transcript.
    assert!(
        sent[2]["system"]
            .as_str()
            .unwrap()
            .starts_with("You compact conversations")
    );
    assert!(sent[2].get("tools").is_none());
    assert!(sent[2].to_string().contains("user: hello there"));
    // The turn itself: the summary in the system prompt, the summarised turn gone.
    let turn = &sent[3];
    assert!(
        turn["system"]
            .as_str()
            .unwrap()
            .contains("SUMMARY: the user said hello first."),
        "{turn}"
    );
    let messages = turn["messages"].to_string();
    assert!(
        !messages.contains("hello there") && messages.contains("second question"),
        "{messages}"
    );
}

/// A model server written apart from Talon's mock (`support/independent_provider.py`, from the
/// APIs' documented streaming formats; OpenAI in Ollama's repeated-index form) drives the same
/// conversation in both formats: two reads in one batch, a write, the answer.
#[test]
fn an_independent_provider_drives_the_conversation() {
    for kind in ["openai", "anthropic"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(home.path().join("b.txt"), "beta\n").unwrap();
        let server = support::chat::independent_provider(home.path(), None);
        let base = if kind == "openai" {
            format!("{}/v1", server.url)
        } else {
            server.url.clone()
        };
        std::fs::write(
            home.path().join("talon.toml"),
            format!(
                "[tools]\npermission_mode = \"acceptEdits\"\n[providers.ind]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"independent\"\n"
            ),
        )
        .unwrap();
        let (stdout, stderr, code) = chat(
            home.path(),
            &[
                "--output-format",
                "stream-json",
                "-p",
                "read a.txt and b.txt, then write out.txt",
            ],
        );
        assert_eq!(code, 0, "{kind}: {stderr}");
        let events: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let started: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "tool_started")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            started,
            ["read_file", "read_file", "write_file"],
            "{kind}: {stdout}"
        );
        assert_eq!(
            events.last().unwrap()["text"].as_str().unwrap().trim(),
            // read_file numbers its lines.
            "Files said: 1\talpha / 1\tbeta. Done.",
            "{kind}"
        );
        assert_eq!(
            std::fs::read_to_string(home.path().join("out.txt")).unwrap(),
            "written by the model\n"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "{kind}");
        let second = requests[1].to_string();
        assert!(
            second.contains("ind_0") && second.contains("ind_1") && second.contains("alpha"),
            "{kind}: {second}"
        );
    }
}

/// Issue 23: `talon chat` as a person uses it: `-p -` reads the prompt from stdin; the texts of
/// a turn's model responses are kept apart; each tool call shows the first line of its result;
/// slash commands are the chat's own and never reach the model (an unknown one says so);
/// `/tools` shows the whole results, `/cost` the tokens; resuming a session shows its history.
#[test]
fn chat_is_usable_by_a_person() {
    let home = tempfile::tempdir().unwrap();
    let datetime = json!({"name": "datetime", "arguments": {"timezone": "UTC"}});
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"text": "Let me check.", "tool_calls": [datetime]},
            {"text": "It is noon."},
            {"text": "Hello there."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (stdout, stderr, code) = support::chat::chat_with_input(
        home.path(),
        &["--session", "person", "-p", "-"],
        "what time is it?\n",
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "Let me check.\n\nIt is noon.", "{stdout:?}");
    assert!(
        stderr.contains("✓ datetime (") && stderr.contains("): Current date and time:"),
        "the result's first line is shown: {stderr}"
    );
    assert_eq!(
        requests(&mock)[0]["messages"][0]["content"],
        "what time is it?\n"
    );

    let (stdout, stderr, code) = support::chat::chat_with_input(
        home.path(),
        &["--session", "person"],
        "/help\n/bogus\n/session\nhello\n/tools\n/cost\n/model\n/model gpt-priciest\n/exit\n",
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("you: what time is it?"),
        "history on resume: {stderr}"
    );
    assert!(stderr.contains("agent: It is noon."), "{stderr}");
    assert!(
        stderr.contains("/compact"),
        "/help lists the commands: {stderr}"
    );
    assert!(stderr.contains("unknown command /bogus"), "{stderr}");
    assert!(
        stderr.contains("agent:default:cli:direct:person"),
        "{stderr}"
    );
    assert!(stdout.contains("Hello there."), "{stdout}");
    assert!(
        stderr.contains("the last turn called no tools"),
        "/tools after a turn without tools: {stderr}"
    );
    assert!(
        stderr.contains("3 turns") || stderr.contains("2 turns"),
        "/cost: {stderr}"
    );
    assert!(stderr.contains("model m (the agent's)"), "/model: {stderr}");
    // A session's model is held to `[subagents.models]` here as for the `Config` tool (none
    // are listed: no session may change it), not stored and then silently ignored.
    assert!(
        stderr.contains("lets no session change its model"),
        "/model NAME: {stderr}"
    );
    assert!(
        !stderr.contains("later turns of this session use"),
        "{stderr}"
    );
    let sent = requests(&mock);
    assert_eq!(sent.len(), 3, "slash commands never reach the model");
    let last = sent[2]["messages"].to_string();
    assert!(
        !last.contains("/help") && !last.contains("/bogus"),
        "{last}"
    );
}

/// Issue 24: `subagents` with action "run" starts a child run on a task: the child is a run in
/// the store, starts fresh with only the task, has at most the parent's tools minus the
/// subagent deny lists (it cannot start children itself), and its answer reaches the parent
/// fenced as untrusted. Over a limit the model gets the seeds' words.
#[test]
fn a_subagent_runs_a_task_and_answers_its_parent() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "Count to three."}}]},
            {"text": "One, two, three."},
            {"text": "The child counted."},
            {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "Again."}}]},
            {"text": "No room."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (stdout, stderr, code) = chat(home.path(), &["-p", "count with a helper"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("The child counted."), "{stdout}");
    let sent = requests(&mock);
    let child = &sent[1];
    assert_eq!(
        child["messages"].as_array().unwrap().last().unwrap()["content"],
        "Count to three.",
        "the child starts with its task only: {child}"
    );
    let child_tools = child["tools"].to_string();
    for denied in ["\"subagents\"", "\"sessions_send\"", "\"memory_search\""] {
        assert!(
            !child_tools.contains(denied),
            "{denied} offered to a child: {child_tools}"
        );
    }
    assert!(child_tools.contains("read_file"), "{child_tools}");
    let answer = sent[2]["messages"].to_string();
    assert!(
        answer.contains("One, two, three.") && answer.contains("EXTERNAL_UNTRUSTED_CONTENT"),
        "the child's answer, fenced: {answer}"
    );
    assert!(answer.contains("completed"), "{answer}");
    // The run is in the store: `talon runs` lists and shows it; an ended run cannot be cancelled.
    let out = support::command(home.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["status"], "completed");
    assert_eq!(runs[0]["task"], "Count to three.");
    assert_eq!(runs[0]["origin"], "subagent");
    let id = runs[0]["id"].as_str().unwrap();
    let out = support::command(home.path())
        .args(["runs", "show", id])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("One, two, three."),
        "{out:?}"
    );
    let out = support::command(home.path())
        .args(["runs", "cancel", id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    // With no room for children, the refusal is the seeds' sentence.
    let config = std::fs::read_to_string(home.path().join("talon.toml")).unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!("{config}[subagents]\nmax_children_per_agent = 0\n"),
    )
    .unwrap();
    let (_, stderr, code) = chat(home.path(), &["-p", "again"]);
    assert_eq!(code, 0, "{stderr}");
    let refused = requests(&mock)[4]["messages"].to_string();
    assert!(
        refused.contains("Agent at capacity (0/0). Try a different agent or handle it yourself."),
        "{refused}"
    );
}

/// Issue 24: Claude Code's `Agent` (called by its old name `Task` here) over the same runs, for
/// an agent on an Anthropic provider: an Explore agent gets only the parent's read-only tools;
/// the parent is offered `Agent`, not GoClaw's `subagents`.
#[test]
fn claude_codes_agent_tool_runs_an_explore_agent_with_read_only_tools() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"turns": [
            {"tool_calls": [{"name": "Task", "arguments": {
                "description": "Find the config", "prompt": "Where is the configuration read?",
                "subagent_type": "Explore"}}]},
            {"text": "In config.rs."},
            {"text": "It is read in config.rs."}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\n",
            mock.url
        ),
    )
    .unwrap();
    let (stdout, stderr, code) = chat(home.path(), &["-p", "where is the config read?"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("It is read in config.rs."), "{stdout}");
    let sent = requests(&mock);
    let names = |request: &Value| -> Vec<String> {
        request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let parent = names(&sent[0]);
    assert!(
        parent.contains(&"Agent".to_string()) && !parent.contains(&"subagents".to_string()),
        "{parent:?}"
    );
    let child = names(&sent[1]);
    assert!(
        child.contains(&"Read".to_string()) && child.contains(&"Grep".to_string()),
        "{child:?}"
    );
    for writer in ["Write", "Edit", "Bash", "Agent"] {
        assert!(
            !child.contains(&writer.to_string()),
            "{writer} given to Explore: {child:?}"
        );
    }
    assert!(
        sent[1]
            .to_string()
            .contains("Where is the configuration read?"),
        "the child's task"
    );
    assert!(
        sent[2].to_string().contains("In config.rs."),
        "the answer reached the parent"
    );
}

mod runs;

mod teams;

//! Issue 36: the edges between run kinds, through `talon serve` as an operator runs it. A
//! waited-for child belongs to the run service: a turn whose client disconnects cancels it and
//! its row ends (no slot held, nothing resumed or announced later). A cancel reaches a run no
//! gateway holds. A run never administers the gateway nor hands the chat off. Each on one
//! SQLite gateway, and where `TALON_TEST_DATABASE_URL` is set also on two gateways sharing
//! PostgreSQL with one killed (`kill -9`).

use std::io::Write;

use super::*;

use support::pg::{Schema, database_url, until};

/// A home whose gateway talks to `mock`, with `extra` appended to its talon.toml.
pub(super) fn home_with(mock: &support::chat::Mock, extra: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n{extra}",
            mock.url
        ),
    )
    .unwrap();
    home
}

/// A run lease short enough to lapse within a test (a killed gateway's runs are taken over).
pub(super) const SHORT_LEASE: &str = "[subagents]\nlease_seconds = 1\n";

/// Where the next gateway of a pass starts once the first was killed: the same home restarted
/// on SQLite (its database is a file there), a home of its own sharing PostgreSQL.
pub(super) fn next_home(
    schema: Option<&Schema>,
    first: tempfile::TempDir,
    mock: &support::chat::Mock,
) -> tempfile::TempDir {
    match schema {
        None => first,
        Some(_) => home_with(mock, SHORT_LEASE),
    }
}

/// The engines a scenario runs on: SQLite, and PostgreSQL on `schema` where there is one.
pub(super) fn engines(schema: Option<&Schema>) -> Vec<(&'static str, Option<&Schema>)> {
    std::iter::once(("sqlite", None))
        .chain(schema.map(|s| ("postgres", Some(s))))
        .collect()
}

/// Alice's runs whose task starts with `task`, as gateway `base` shows them.
pub(super) fn runs_of(base: &str, task: &str) -> Vec<Value> {
    let (_, runs) = status_json(&format!("{base}/v1/runs?user=alice"), None);
    runs["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["task"].as_str().is_some_and(|t| t.starts_with(task)))
        .collect()
}

/// Whether the mock was asked by a conversation whose first user message holds `marker`.
pub(super) fn asked(mock: &support::chat::Mock, marker: &str) -> bool {
    !support::chat::of_conversation(requests(mock), marker).is_empty()
}

/// The model requests announcing ended runs (their newest user message) that hold `text`.
pub(super) fn announcements_with(mock: &support::chat::Mock, text: &str) -> Vec<Value> {
    requests(mock)
        .into_iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().rfind(|m| m["role"] == "user"))
                .is_some_and(|m| {
                    let said = m["content"].to_string();
                    said.contains("have ended") && said.contains(text)
                })
        })
        .collect()
}

/// Posts `text` as alice in session `session` of gateway `addr`, and hangs up without reading
/// the answer once `hang_up_when` holds.
fn post_then_disconnect(addr: &str, session: &str, text: &str, hang_up_when: impl FnMut() -> bool) {
    let body = json!({"text": text, "user": "alice"}).to_string();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    until("the turn reaches the point to hang up at", hang_up_when);
    drop(stream);
}

/// Break 1: eight turns whose clients disconnect while they wait for a child (`subagents run`)
/// took every slot for good. Now each child is cancelled with its turn and its row ends
/// `cancelled`: with two slots, three such disconnects in a row leave both free, nothing is
/// announced into the abandoned conversations, and a fourth turn's child runs.
#[test]
fn h36_1_a_disconnected_turn_cancels_and_ends_its_waited_for_child() {
    let scratch = tempfile::tempdir().unwrap();
    let run = |task: &str| json!({"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": task}}]});
    let mut conversations = vec![
        json!({"when": "TASK-HANG", "turns": [{"text": "never", "delay_ms": 60000}]}),
        json!({"when": "TASK-QUICK", "turns": [{"text": "quick result"}]}),
        json!({"when": "wait for a quick helper", "turns": [run("TASK-QUICK: go"), {"text": "Quick done."}]}),
    ];
    for i in 1..=3 {
        conversations.push(json!({"when": format!("wait for hanging helper {i}"),
            "turns": [run(&format!("TASK-HANG-{i}: wait")), {"text": "never seen"}]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    let home = home_with(
        &mock,
        "[subagents]\nmax_concurrent = 2\nlease_seconds = 2\n",
    );
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    for i in 1..=3 {
        let task = format!("TASK-HANG-{i}");
        post_then_disconnect(
            &server.addr,
            &format!("room-{i}"),
            &format!("wait for hanging helper {i}"),
            || asked(&mock, &task),
        );
        until("the abandoned child's row ends cancelled", || {
            runs_of(&base, &task)
                .first()
                .is_some_and(|r| r["status"] == "cancelled")
        });
    }
    // Both slots are free: a waited-for child runs and answers.
    let reply = post(
        &format!("{base}/v1/sessions/room-4/messages"),
        &json!({"text": "wait for a quick helper", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Quick done."), "{reply}");
    // Nothing was announced into the abandoned conversations, however long the gateway runs.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        !requests(&mock)
            .iter()
            .any(|r| r.to_string().contains("have ended")),
        "a cancelled waited-for child is never announced"
    );
    for r in runs_of(&base, "TASK-HANG") {
        assert_eq!(r["status"], "cancelled", "{r}");
    }
}

/// Break 1: a cancel of a run no gateway holds (its gateway was killed) used to be a flag
/// nobody watched. `talon runs cancel` (the operation `POST /v1/runs/{id}/cancel` calls too)
/// ends it at once, and the next gateway neither resumes it nor announces it. On SQLite, and on
/// PostgreSQL with another gateway started after.
#[test]
fn h36_1_a_cancel_ends_a_run_whose_gateway_was_killed() {
    let schema = database_url().map(|url| Schema::new(&url, "h36cancel"));
    let scratch = tempfile::tempdir().unwrap();
    let passes = engines(schema.as_ref());
    let mut conversations = Vec::new();
    for (pass, _) in &passes {
        conversations.push(json!({"when": format!("TASK-ORPHAN-{pass}"),
            "turns": [{"text": "never", "delay_ms": 60000}]}));
        conversations.push(json!({"when": format!("start an orphan {pass}"), "turns": [
            {"tool_calls": [{"name": "spawn", "arguments": {"task": format!("TASK-ORPHAN-{pass}: think")}}]},
            {"text": "Spawned it."},
            {"text": format!("never announced {pass}")}
        ]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    for (pass, schema) in passes {
        let task = format!("TASK-ORPHAN-{pass}");
        let env: Vec<(&str, &str)> = schema.map(|s| s.env().to_vec()).unwrap_or_default();
        let home_a = home_with(&mock, SHORT_LEASE);
        let mut a = support::serve_in(home_a.path(), &env);
        let base_a = format!("http://{}", a.addr);
        let reply = post(
            &format!("{base_a}/v1/sessions/orphans/messages"),
            &json!({"text": format!("start an orphan {pass}"), "user": "alice"}),
            &[],
        );
        assert!(reply.contains("Spawned it."), "{pass}: {reply}");
        until("the child asks its model", || asked(&mock, &task));
        let id = runs_of(&base_a, &task)[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // The operator's CLI, no gateway running (on PostgreSQL a gateway started now would
        // take the lapsed run over first).
        let out = support::command(home_a.path())
            .envs(env.iter().copied())
            .args(["runs", "cancel", &id])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{pass}: {said}");
        assert!(
            said.contains("1 no gateway held ended now"),
            "{pass}: {said}"
        );
        let home_c = next_home(schema, home_a, &mock);
        // A gateway started now finds it ended: not resumed, not announced.
        let c = support::serve_in(home_c.path(), &env);
        let run = &runs_of(&format!("http://{}", c.addr), &task)[0];
        assert_eq!(run["status"], "cancelled", "{pass}: {run}");
        let asked_before = support::chat::of_conversation(requests(&mock), &task).len();
        std::thread::sleep(std::time::Duration::from_secs(3));
        assert_eq!(
            support::chat::of_conversation(requests(&mock), &task).len(),
            asked_before,
            "{pass}: not resumed"
        );
        // The parent asked twice (the spawn, then its answer); an announcement would be a third.
        assert_eq!(
            support::chat::of_conversation(requests(&mock), &format!("start an orphan {pass}"))
                .len(),
            2,
            "{pass}: not announced"
        );
        drop(c);
    }
}

/// Break 2: a run — here a subagent with `bypassPermissions`, of a user the operator named —
/// is never offered `handoff` or `gateway`, and its calls of them are refused by the policy:
/// the configuration is untouched.
#[test]
fn h36_2_a_run_neither_hands_off_nor_administers_the_gateway() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "TASK-ESCAPE", "turns": [
                {"tool_calls": [
                    {"name": "handoff", "arguments": {"agent": "default", "reason": "take over"}},
                    {"name": "gateway", "arguments": {"action": "config.patch", "patch": {"chat": {"system": "obey the child"}}}}
                ]},
                {"text": "child done"}
            ]},
            {"when": "try to escape", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-ESCAPE: widen yourself"}}]},
                {"text": "Parent done."}
            ]}
        ]}),
    );
    let home = home_with(&mock, "[gateway]\noperators = [\"alice\"]\n");
    let before = std::fs::read_to_string(home.path().join("talon.toml")).unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let reply = post(
        &format!("{base}/v1/sessions/escape/messages"),
        &json!({"text": "try to escape", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Parent done."), "{reply}");
    let parent = support::chat::of_conversation(requests(&mock), "try to escape");
    assert!(
        support::chat::offered(&parent[0]).contains(&"gateway".to_string()),
        "the operator's own turn has the gateway tool"
    );
    let child = support::chat::of_conversation(requests(&mock), "TASK-ESCAPE");
    let offered = support::chat::offered(&child[0]);
    for tool in ["handoff", "gateway"] {
        assert!(!offered.contains(&tool.to_string()), "{tool}: {offered:?}");
    }
    let results = child[1]["messages"].to_string();
    assert_eq!(
        results.matches("tool not allowed by policy").count(),
        2,
        "{results}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("talon.toml")).unwrap(),
        before
    );
}

/// Break 7: with two gateways on one PostgreSQL, the other gateway's supervisor announced a
/// fresh result while the session's own turn still ran on the first, so two turns ran at once
/// and the history was out of order. The announcer now waits for the session's turn wherever
/// it runs (the store's turn lease): the announcement's turn sees the parent's answer before it.
#[test]
fn h36_7_an_announcement_on_another_gateway_waits_for_the_sessions_turn() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "h36announce");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Announced."}]},
            {"when": "TASK-FAST", "turns": [{"text": "fast result"}]},
            {"when": "spawn then think", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-FAST: hurry"}}]},
                {"text": "Parent finished.", "delay_ms": 5000}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home_with(&mock, SHORT_LEASE), home_with(&mock, SHORT_LEASE));
    let a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let reply = post(
        &format!("http://{}/v1/sessions/think/messages", a.addr),
        &json!({"text": "spawn then think", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Parent finished."), "{reply}");
    let announcements = || announcements_with(&mock, "");
    until("the result is announced", || !announcements().is_empty());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let made = announcements();
    assert_eq!(made.len(), 1, "announced once");
    let history = made[0]["messages"].to_string();
    assert!(
        history.contains("Parent finished."),
        "the announcement follows the session's own turn: {history}"
    );
    drop((a, b));
}

/// Break 8 (second half): a grandchild that ended after its parent run ended, or while that run
/// still worked and so waited for it, started a model turn in the ended run's session, for
/// nobody. Its result is now recorded delivered: the ended child's session gets no
/// announcement turn, in either order.
#[test]
fn h36_8_a_grandchild_ending_after_its_parent_run_starts_no_turn() {
    let scratch = tempfile::tempdir().unwrap();
    // `late`: the grandchild ends after the child; `early`: while the child still works.
    let orders = [("late", 1500, 0), ("early", 0, 2500)];
    let mut conversations = vec![
        json!({"when": "Runs you started in the background have ended",
        "last": true, "turns": [{"text": "Heard back."}]}),
    ];
    for (order, grand_delay, child_delay) in orders {
        conversations.push(json!({"when": format!("TASK-GRAND-{order}"),
            "turns": [{"text": "grand result", "delay_ms": grand_delay}]}));
        conversations.push(json!({"when": format!("TASK-CHILD-{order}"), "turns": [
            {"tool_calls": [{"name": "spawn", "arguments": {"task": format!("TASK-GRAND-{order}: dig")}}]},
            {"text": "child done", "delay_ms": child_delay}
        ]}));
        conversations.push(json!({"when": format!("nest two {order}"), "turns": [
            {"tool_calls": [{"name": "spawn", "arguments": {"task": format!("TASK-CHILD-{order}: delegate")}}]},
            {"text": "Spawned."}
        ]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    let home = home_with(&mock, "[subagents]\nmax_spawn_depth = 2\n");
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    for (order, _, _) in orders {
        let reply = post(
            &format!("{base}/v1/sessions/nest-{order}/messages"),
            &json!({"text": format!("nest two {order}"), "user": "alice"}),
            &[],
        );
        assert!(reply.contains("Spawned."), "{order}: {reply}");
        let (child, grand) = (format!("TASK-CHILD-{order}"), format!("TASK-GRAND-{order}"));
        until("both runs end", || {
            [&child, &grand].iter().all(|task| {
                runs_of(&base, task)
                    .first()
                    .is_some_and(|r| r["status"] == "completed")
            })
        });
        std::thread::sleep(std::time::Duration::from_secs(3));
        // The child's session: its two requests, no announcement turn after it ended.
        let asked = support::chat::of_conversation(requests(&mock), &child);
        assert_eq!(asked.len(), 2, "{order}: {asked:?}");
    }
}

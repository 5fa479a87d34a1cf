//! Issue 36's fault scenarios through `talon serve`: a gateway killed (`kill -9`) while a turn
//! waits for its child, mid-announcement, or while its run has a checkpoint; a gateway stalled
//! (`SIGSTOP`) and woken late; the database cut away. Each result still reaches its parent once.
//! On one SQLite gateway restarted, and where `TALON_TEST_DATABASE_URL` is set on two gateways
//! sharing PostgreSQL.

use std::io::Write;

use super::*;

use super::h36_runs::{
    SHORT_LEASE, announcements_with, asked, engines, home_with, next_home, runs_of,
};
use support::pg::{Schema, database_url, until};

/// Break 1 with `kill -9`: the gateway running a turn that waits for its child dies. Nobody
/// cancelled the child, so it is not lost: the next gateway (the same home restarted on SQLite,
/// a second gateway on PostgreSQL) takes the child over, finishes it, and its result reaches
/// the parent's conversation exactly once, as a background run's would.
#[test]
fn h36_1_a_waited_child_outlives_its_killed_gateway_and_is_announced_once() {
    let schema = database_url().map(|url| Schema::new(&url, "h36waitkill"));
    let scratch = tempfile::tempdir().unwrap();
    let passes = engines(schema.as_ref());
    let mut conversations = Vec::new();
    for (pass, _) in &passes {
        conversations.push(
            json!({"when": format!("waited result {pass}"), "last": true,
            "turns": [{"text": format!("Announced {pass}.")}]}),
        );
        conversations.push(
            json!({"when": format!("TASK-WAITKILL-{pass}"), "last": true,
            "turns": [{"text": format!("waited result {pass}"), "delay_ms": 2500}]}),
        );
        conversations.push(json!({"when": format!("wait then die {pass}"), "turns": [
            {"tool_calls": [{"name": "subagents", "arguments": {"action": "run",
                "task": format!("TASK-WAITKILL-{pass}: work")}}]},
            {"text": format!("Heard it {pass}.")}
        ]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    for (pass, schema) in passes {
        let task = format!("TASK-WAITKILL-{pass}");
        let parent = format!("wait then die {pass}");
        let env: Vec<(&str, &str)> = schema.map(|s| s.env().to_vec()).unwrap_or_default();
        let home_a = home_with(&mock, SHORT_LEASE);
        let mut a = support::serve_in(home_a.path(), &env);
        let addr = a.addr.clone();
        let waiting_turn = std::thread::spawn({
            let parent = parent.clone();
            move || {
                support::chat::exchange(
                    &format!("http://{addr}/v1/sessions/waitkill/messages"),
                    Some(&json!({"text": parent, "user": "alice"})),
                    &[],
                )
            }
        });
        until("the waited-for child asks its model", || {
            asked(&mock, &task)
        });
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        let _ = waiting_turn.join();
        let home_b = next_home(schema, home_a, &mock);
        let b = support::serve_in(home_b.path(), &env);
        let base_b = format!("http://{}", b.addr);
        until("the child is taken over and completes", || {
            runs_of(&base_b, &task)
                .first()
                .is_some_and(|r| r["status"] == "completed")
        });
        // The announcement's prompt carries the child's result (the waiting turn died unsaved,
        // so it may open the conversation).
        let result = format!("waited result {pass}");
        let announced = || announcements_with(&mock, &result).len();
        until("the result reaches the parent's conversation", || {
            announced() >= 1
        });
        std::thread::sleep(std::time::Duration::from_secs(3));
        assert_eq!(announced(), 1, "{pass}: announced exactly once");
        assert_eq!(
            runs_of(&base_b, &task).len(),
            1,
            "{pass}: one run, not a second started"
        );
        drop(b);
    }
}

/// Break 7 with `kill -9`: the gateway announcing a result dies while the announcement's turn
/// waits for its model. The claim lapses with it; the next gateway (the same home restarted on
/// SQLite, a second one on PostgreSQL) announces again, and the conversation holds the
/// announcement exactly once: the unfinished turn was never saved.
#[test]
fn h36_7_a_gateway_killed_mid_announcement_leaves_it_to_another_once() {
    let schema = database_url().map(|url| Schema::new(&url, "h36annkill"));
    let scratch = tempfile::tempdir().unwrap();
    let passes = engines(schema.as_ref());
    let mut conversations = Vec::new();
    for (pass, _) in &passes {
        conversations.push(
            json!({"when": format!("announced result {pass}"), "last": true,
            "turns": [{"text": format!("Announced {pass}."), "delay_ms": 3000}]}),
        );
        conversations.push(json!({"when": format!("TASK-ANNKILL-{pass}"), "last": true,
            "turns": [{"text": format!("announced result {pass}")}]}));
        conversations.push(json!({"when": format!("spawn for an announcement {pass}"), "turns": [
            {"tool_calls": [{"name": "spawn", "arguments": {"task": format!("TASK-ANNKILL-{pass}: go")}}]},
            {"text": "Spawned it."}
        ]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    for (pass, schema) in passes {
        let result = format!("announced result {pass}");
        let session = format!("annkill-{pass}");
        let env: Vec<(&str, &str)> = schema.map(|s| s.env().to_vec()).unwrap_or_default();
        let home_a = home_with(&mock, SHORT_LEASE);
        let mut a = support::serve_in(home_a.path(), &env);
        let reply = post(
            &format!("http://{}/v1/sessions/{session}/messages", a.addr),
            &json!({"text": format!("spawn for an announcement {pass}"), "user": "alice"}),
            &[],
        );
        assert!(reply.contains("Spawned it."), "{pass}: {reply}");
        let announcing = || announcements_with(&mock, &result).len();
        until("the announcement's turn asks its model", || {
            announcing() >= 1
        });
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        let home_b = next_home(schema, home_a, &mock);
        let b = support::serve_in(home_b.path(), &env);
        let history = || {
            let (_, shown) = status_json(
                &format!("http://{}/v1/sessions/{session}?user=alice", b.addr),
                None,
            );
            shown["messages"].to_string()
        };
        let answer = format!("Announced {pass}.");
        until("another gateway announces it", || {
            history().contains(&answer)
        });
        std::thread::sleep(std::time::Duration::from_secs(3));
        let history = history();
        assert_eq!(history.matches(&answer).count(), 1, "{pass}: {history}");
        assert_eq!(
            history.matches("have ended").count(),
            1,
            "{pass}: the announcement is in the conversation once: {history}"
        );
        drop(b);
    }
}

/// A stalled gateway (`SIGSTOP`) loses its run to another, which finishes and announces it;
/// woken (`SIGCONT`), the stalled one's late answer neither ends the run again nor announces
/// it: the parent hears the result once. Two gateways sharing PostgreSQL.
#[test]
fn h36_a_stalled_gateway_woken_late_neither_ends_nor_announces_twice() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "h36stall");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "stalled result", "last": true, "turns": [{"text": "Announced the stall."}]},
            {"when": "TASK-STALL", "last": true,
             "turns": [{"text": "stalled result", "delay_ms": 3000}]},
            {"when": "spawn then stall", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-STALL: go"}}]},
                {"text": "Spawned it."}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home_with(&mock, SHORT_LEASE), home_with(&mock, SHORT_LEASE));
    let a = support::serve_in(home_a.path(), &env);
    let reply = post(
        &format!("http://{}/v1/sessions/stall/messages", a.addr),
        &json!({"text": "spawn then stall", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Spawned it."), "{reply}");
    until("the child asks its model", || asked(&mock, "TASK-STALL"));
    let signal = |name: &str| {
        let sent = std::process::Command::new("kill")
            .args([name, &a.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {name}");
    };
    signal("-STOP");
    let b = support::serve_in(home_b.path(), &env);
    let base_b = format!("http://{}", b.addr);
    until(
        "another gateway takes the run over and completes it",
        || {
            runs_of(&base_b, "TASK-STALL")
                .first()
                .is_some_and(|r| r["status"] == "completed")
        },
    );
    let history = || {
        let (_, shown) = status_json(&format!("{base_b}/v1/sessions/stall?user=alice"), None);
        shown["messages"].to_string()
    };
    until("the result is announced", || {
        history().contains("Announced the stall.")
    });
    signal("-CONT");
    // The woken gateway's model answer arrives late; give it time to try to use it.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let runs = runs_of(&base_b, "TASK-STALL");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "completed", "{runs:?}");
    let history = history();
    assert_eq!(
        history.matches("have ended").count(),
        1,
        "announced once: {history}"
    );
    drop((a, b));
}

/// Break 9: a run taken over after its gateway died started again from its task, so the calls
/// it had made ran twice. It now continues from its turn's checkpoint: the call whose result
/// was kept (`datetime`) is not made again, and the call in flight at the `kill -9` (`exec`)
/// is reported to the model as interrupted, not silently repeated. On one SQLite gateway
/// restarted, and on a second gateway sharing PostgreSQL.
#[test]
fn h36_9_a_taken_over_run_resumes_from_its_checkpoint() {
    let schema = database_url().map(|url| Schema::new(&url, "h36resume"));
    let scratch = tempfile::tempdir().unwrap();
    let passes = engines(schema.as_ref());
    let mut conversations = Vec::new();
    for (pass, _) in &passes {
        conversations.push(json!({"when": format!("TASK-CKPT-{pass}"), "turns": [
            {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}]},
            {"tool_calls": [{"name": "exec", "arguments": {"command": "sleep 30"}}]},
            {"text": "resumed result"}
        ]}));
        conversations.push(json!({"when": format!("checkpointed helper {pass}"), "turns": [
            {"tool_calls": [{"name": "spawn", "arguments": {"task": format!("TASK-CKPT-{pass}: work")}}]},
            {"text": "Spawned it."},
            {"text": "Told."}
        ]}));
    }
    let mock = mock_provider(scratch.path(), &json!({ "conversations": conversations }));
    for (pass, schema) in passes {
        let task = format!("TASK-CKPT-{pass}");
        let env: Vec<(&str, &str)> = schema.map(|s| s.env().to_vec()).unwrap_or_default();
        let home_a = home_with(&mock, SHORT_LEASE);
        let mut a = support::serve_in(home_a.path(), &env);
        let reply = post(
            &format!("http://{}/v1/sessions/ckpt/messages", a.addr),
            &json!({"text": format!("checkpointed helper {pass}"), "user": "alice"}),
            &[],
        );
        assert!(reply.contains("Spawned it."), "{pass}: {reply}");
        // The child has its datetime result and runs `sleep 30`: kill its gateway there.
        until("the child starts its second call", || {
            support::chat::of_conversation(requests(&mock), &task).len() >= 2
        });
        std::thread::sleep(std::time::Duration::from_millis(800));
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        let home_b = next_home(schema, home_a, &mock);
        let b = support::serve_in(home_b.path(), &env);
        until("the run is resumed and completes", || {
            runs_of(&format!("http://{}", b.addr), &task)
                .first()
                .is_some_and(|r| r["status"] == "completed")
        });
        let asked = support::chat::of_conversation(requests(&mock), &task);
        // A leaf run keeps the shell: it spawns processes, not runs.
        let offered = support::chat::offered(&asked[0]);
        assert!(offered.contains(&"exec".to_string()), "{pass}: {offered:?}");
        assert_eq!(asked.len(), 3, "{pass}: no call made twice: {asked:?}");
        let resumed = asked[2]["messages"].to_string();
        assert!(
            resumed.contains("was interrupted") && resumed.contains("exec"),
            "{pass}: the call in flight is reported: {resumed}"
        );
        assert_eq!(
            resumed.matches("\"datetime\"").count(),
            1,
            "{pass}: the kept call is not made again: {resumed}"
        );
        drop(b);
    }
}

/// The raw answer (status line, headers and body) of `method path` with `body` on `addr`.
fn raw(addr: &str, method: &str, path: &str, body: Option<&Value>) -> String {
    use std::io::Read;
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// Break 10: with the database unreachable, `/healthz` said 200 and turns failed after 30 s with
/// a 500; a child whose turn ended during the outage was failed or left `running`. Now
/// `/readyz` answers 503 with `Retry-After` while the store is unreachable (200 again after), a
/// turn is refused 503 with `Retry-After`, and a child whose answer came during the outage
/// keeps its result: the turn's save and the run's end wait for the database, and the parent
/// is told once.
#[test]
fn h36_10_a_database_outage_neither_fails_nor_orphans_runs() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "h36outage");
    let relay = support::pg::Relay::to(&url);
    let relayed = relay.url(&url);
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Heard back."}]},
            {"when": "TASK-OUTAGE", "turns": [{"text": "outage result", "delay_ms": 2500}]},
            {"when": "helper through an outage", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-OUTAGE: work"}}]},
                {"text": "Spawned it."}
            ]}
        ]}),
    );
    let home = home_with(&mock, "[subagents]\nlease_seconds = 2\n");
    let server = support::serve_in(home.path(), &schema.env_at(&relayed));
    let base = format!("http://{}", server.addr);
    assert!(raw(&server.addr, "GET", "/readyz", None).starts_with("HTTP/1.1 200"));
    let reply = post(
        &format!("{base}/v1/sessions/outage/messages"),
        &json!({"text": "helper through an outage", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Spawned it."), "{reply}");
    until("the child asks its model", || asked(&mock, "TASK-OUTAGE"));
    // The database goes away while the child's model answers.
    relay.cut();
    let ready = raw(&server.addr, "GET", "/readyz", None);
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.to_lowercase().contains("retry-after: 5"), "{ready}");
    // The route needs no token: it names no database detail.
    assert!(
        !ready.contains("127.0.0.1") && !ready.contains("postgres"),
        "{ready}"
    );
    let refused = raw(
        &server.addr,
        "POST",
        "/v1/sessions/outage-2/messages",
        Some(&json!({"text": "hello", "user": "alice"})),
    );
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.to_lowercase().contains("retry-after"), "{refused}");
    assert!(refused.contains("try again shortly"), "{refused}");
    // The services' routes say the same, never a 400 blaming the request or a bare 500: their
    // operations answer typed errors.
    let cron = json!({"name": "n", "every": "1h", "message": "m", "session_key": "outage"});
    let grant = json!({"server": "gone", "agent": "helper"});
    for (method, path, body) in [
        ("POST", "/v1/cron?user=alice", Some(&cron)),
        ("POST", "/v1/mcp-grants", Some(&grant)),
        ("GET", "/v1/agent-links", None),
        ("GET", "/v1/custom-tools", None),
        ("GET", "/v1/models", None),
    ] {
        let answer = raw(&server.addr, method, path, body);
        assert!(answer.starts_with("HTTP/1.1 503"), "{path}: {answer}");
        assert!(
            answer.to_lowercase().contains("retry-after"),
            "{path}: {answer}"
        );
    }
    // Longer than the lease: the gateway must not take its own live run over afterwards.
    std::thread::sleep(std::time::Duration::from_secs(8));
    relay.restore();
    until("the store answers again", || {
        raw(&server.addr, "GET", "/readyz", None).starts_with("HTTP/1.1 200")
    });
    until("the child's end lands", || {
        runs_of(&base, "TASK-OUTAGE")
            .first()
            .is_some_and(|r| r["status"] != "running")
    });
    let run = &runs_of(&base, "TASK-OUTAGE")[0];
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["takeovers"], 0, "{run}");
    assert!(run["result"].to_string().contains("outage result"), "{run}");
    until("the parent is told", || {
        let (_, shown) = status_json(&format!("{base}/v1/sessions/outage?user=alice"), None);
        shown.to_string().contains("Heard back.")
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (_, shown) = status_json(&format!("{base}/v1/sessions/outage?user=alice"), None);
    assert_eq!(
        shown.to_string().matches("outage result").count(),
        1,
        "{shown}"
    );
}

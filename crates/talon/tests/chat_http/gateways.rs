//! Issue 24's fault tests: real `talon serve` processes on one PostgreSQL. A gateway killed
//! (`kill -9`) while it runs a child: another takes the run over when its lease runs out,
//! resumes it, and the result reaches the parent session exactly once. A cancel sent to one
//! gateway stops a run on another. Run where `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets
//! it).

use super::*;

use support::pg::{Schema, database_url, gateway_home as home, until};

/// The one run alice has, as gateway `base` shows it.
fn only_run(base: &str) -> Option<Value> {
    let (_, runs) = status_json(&format!("{base}/v1/runs?user=alice"), None);
    runs["runs"].as_array().and_then(|r| r.first()).cloned()
}

#[test]
fn a_child_of_a_killed_gateway_is_resumed_elsewhere_and_delivered_once() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "kill");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "TASK-SLOW", "turns": [
                {"text": "first attempt", "delay_ms": 60000},
                {"text": "slow result"}
            ]},
            {"when": "start a slow helper", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-SLOW: count the stars"}}]},
                {"text": "Spawned it."},
                {"text": "The helper reported."}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home(&mock), home(&mock));
    let mut a = support::serve_in(home_a.path(), &env);
    let base_a = format!("http://{}", a.addr);
    let reply = post(
        &format!("{base_a}/v1/sessions/stars/messages"),
        &json!({"text": "start a slow helper", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Spawned it."), "{reply}");
    // The child is waiting for its model on A: kill A there.
    until("the child asks its model", || {
        requests(&mock).iter().any(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                .is_some_and(|m| m["content"].to_string().contains("TASK-SLOW"))
        })
    });
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let run = only_run_from_store(&url, &schema.name);
    assert_eq!(run.0, "running", "A died holding it");
    let b = support::serve_in(home_b.path(), &env);
    let base_b = format!("http://{}", b.addr);
    until("B resumes and finishes the run", || {
        only_run(&base_b).is_some_and(|r| r["status"] == "completed")
    });
    let key = "stars";
    until("the parent is told", || {
        let (_, shown) = status_json(&format!("{base_b}/v1/sessions/{key}?user=alice"), None);
        shown.to_string().contains("The helper reported.")
    });
    let (_, shown) = status_json(&format!("{base_b}/v1/sessions/{key}?user=alice"), None);
    let text = shown.to_string();
    assert_eq!(text.matches("slow result").count(), 1, "once: {text}");
    assert!(!text.contains("first attempt"), "{text}");
    let run = only_run(&base_b).unwrap();
    assert_eq!(run["takeovers"], 1, "{run}");
    // Nothing is announced again, however long B runs.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (_, shown) = status_json(&format!("{base_b}/v1/sessions/{key}?user=alice"), None);
    assert_eq!(shown.to_string().matches("slow result").count(), 1);
    drop(b);
}

/// The status of the one run in `schema`, read straight from the database (A is dead).
fn only_run_from_store(url: &str, schema: &str) -> (String, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut config = talon_store::StoreConfig::url(url.to_string());
        config.schema = Some(schema.to_string());
        let store = talon_store::Store::connect(&config).await.unwrap();
        let runs = store.runs_of(Some("alice"), 10).await.unwrap();
        (runs[0].status.as_str().to_string(), runs[0].owner.clone())
    })
}

#[test]
fn a_cancel_sent_to_one_gateway_stops_a_run_on_another() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "cancel");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "TASK-LONG", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "start a long helper", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-LONG: think"}}]},
                {"text": "Spawned it."},
                {"text": "The helper was cancelled."}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home(&mock), home(&mock));
    let a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let reply = post(
        &format!("{base_a}/v1/sessions/long/messages"),
        &json!({"text": "start a long helper", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Spawned it."), "{reply}");
    let id = only_run(&base_a).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Bob cannot cancel alice's run, on either gateway.
    let (status, _) = status_json(
        &format!("{base_b}/v1/runs/{id}/cancel?user=bob"),
        Some(&json!({})),
    );
    assert_eq!(status, 404);
    let sent = std::time::Instant::now();
    let (status, body) = status_json(
        &format!("{base_b}/v1/runs/{id}/cancel?user=alice"),
        Some(&json!({})),
    );
    assert_eq!(status, 200, "{body}");
    until("A stops the run", || {
        only_run(&base_b).is_some_and(|r| r["status"] == "cancelled")
    });
    eprintln!(
        "cancel on B → run ended on A: {} ms",
        sent.elapsed().as_millis()
    );
    // The parent is told, in its session (on whichever gateway announces it).
    until("the parent is told", || {
        let (_, shown) = status_json(&format!("{base_b}/v1/sessions/long?user=alice"), None);
        shown.to_string().contains("The helper was cancelled.")
    });
    drop((a, b));
}

/// A run whose gateway died twice — the first owner, then the gateway that resumed it — is
/// ended `lost` by the third, and the parent is told (never left `running`).
#[test]
fn a_run_whose_resumption_died_too_ends_lost_and_the_parent_is_told() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "lost");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "TASK-DOOMED", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "start a doomed helper", "turns": [
                {"tool_calls": [{"name": "spawn", "arguments": {"task": "TASK-DOOMED: wait"}}]},
                {"text": "Spawned it."},
                {"text": "The helper was lost."}
            ]}
        ]}),
    );
    let env = schema.env();
    let child_requests = || {
        requests(&mock)
            .iter()
            .filter(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                    .is_some_and(|m| m["content"].to_string().contains("TASK-DOOMED"))
            })
            .count()
    };
    let homes = [home(&mock), home(&mock), home(&mock)];
    let mut a = support::serve_in(homes[0].path(), &env);
    let reply = post(
        &format!("http://{}/v1/sessions/doomed/messages", a.addr),
        &json!({"text": "start a doomed helper", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Spawned it."), "{reply}");
    until("the child asks its model on A", || child_requests() == 1);
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let mut b = support::serve_in(homes[1].path(), &env);
    until("B resumes the child", || child_requests() == 2);
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let c = support::serve_in(homes[2].path(), &env);
    let base_c = format!("http://{}", c.addr);
    until("C ends the run lost", || {
        only_run(&base_c).is_some_and(|r| r["status"] == "lost")
    });
    assert_eq!(child_requests(), 2, "not resumed a second time");
    until("the parent is told", || {
        let (_, shown) = status_json(&format!("{base_c}/v1/sessions/doomed?user=alice"), None);
        shown.to_string().contains("The helper was lost.")
    });
    let (_, shown) = status_json(&format!("{base_c}/v1/sessions/doomed?user=alice"), None);
    assert!(shown.to_string().contains("lost"), "{shown}");
    drop(c);
}

/// The tenant's limit on live runs (MaxConcurrent 8) holds across gateways: alice's 5 children
/// running on A and bob's 3 on B fill it, and the 9th — asked on B — is refused in the seeds'
/// words.
#[test]
fn the_ninth_concurrent_run_across_two_gateways_is_refused() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "ninth");
    let scratch = tempfile::tempdir().unwrap();
    let spawns = |n: usize| {
        (0..n)
            .map(|i| json!({"name": "spawn", "arguments": {"task": format!("TASK-HOLD {i}")}}))
            .collect::<Vec<_>>()
    };
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "TASK-HOLD", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "five on A", "turns": [{"tool_calls": spawns(5)}, {"text": "A spawned."}]},
            {"when": "four on B", "turns": [{"tool_calls": spawns(4)}, {"text": "B spawned."}]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home(&mock), home(&mock));
    let a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let reply = post(
        &format!("http://{}/v1/sessions/on-a/messages", a.addr),
        &json!({"text": "five on A", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("A spawned."), "{reply}");
    let reply = post(
        &format!("http://{}/v1/sessions/on-b/messages", b.addr),
        &json!({"text": "four on B", "user": "bob"}),
        &[],
    );
    assert!(reply.contains("B spawned."), "{reply}");
    assert_eq!(
        reply
            .matches(
                "Too many agent runs at once (8/8). Wait for one to finish or handle it yourself."
            )
            .count(),
        1,
        "exactly one of B's four is refused: {reply}"
    );
    let live = ["alice", "bob"]
        .iter()
        .map(|user| {
            let (_, runs) = status_json(&format!("http://{}/v1/runs?user={user}", a.addr), None);
            runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["status"] == "running")
                .count()
        })
        .sum::<usize>();
    assert_eq!(live, 8);
    drop((a, b));
}

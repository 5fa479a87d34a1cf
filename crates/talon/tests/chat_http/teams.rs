//! Issue 25: a team across two gateways on one PostgreSQL, managed over HTTP. The lead's
//! conversation on gateway A posts a task; a member works on it on A; A is killed (`kill -9`)
//! mid-task; gateway B sees the member's claim lapse, puts the task back on the board and gives
//! it to the other member, whose result reaches the lead's session once. Run where
//! `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets it).

use super::*;
use support::chat::method_json;
use support::pg::{Schema, database_url, gateway_home as home, until};

#[test]
fn a_task_of_a_killed_gateway_is_finished_by_another_member() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "team");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true, "turns": [{"text": "Noted."}]},
            {"when": "TASK-ONE", "turns": [
                {"text": "first attempt", "delay_ms": 60000},
                {"text": "the survey is done"}
            ]},
            {"when": "plan the work", "turns": [
                {"tool_calls": [{"name": "team_tasks", "arguments": {"action": "create", "subject": "survey", "description": "TASK-ONE survey the users"}}]},
                {"text": "Posted."}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home(&mock), home(&mock));
    let mut a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    for agent in ["ann", "bob"] {
        let out = support::command(home_a.path())
            .envs(env)
            .args(["agents", "create", agent])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // The team, over HTTP: created on A, its members added on B.
    let (status, created) = status_json(
        &format!("{base_a}/v1/teams"),
        Some(&json!({"name": "alpha", "lead": "default", "description": "research"})),
    );
    assert_eq!(status, 201, "{created}");
    let (status, unknown) = status_json(
        &format!("{base_a}/v1/teams"),
        Some(&json!({"name": "beta", "lead": "nobody"})),
    );
    assert_eq!(status, 400, "{unknown}");
    for member in ["ann", "bob"] {
        let (status, team) = method_json(
            "PUT",
            &format!("{base_b}/v1/teams/alpha/members/{member}"),
            &json!({"role": "researcher"}),
        );
        assert_eq!(status, 200, "{team}");
    }
    let (_, team) = status_json(&format!("{base_a}/v1/teams/alpha"), None);
    assert_eq!(
        team["team"]["members"].as_array().unwrap().len(),
        2,
        "{team}"
    );

    let reply = post(
        &format!("{base_a}/v1/sessions/plan/messages"),
        &json!({"text": "plan the work", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Posted."), "{reply}");
    let board = |base: &str, user: &str| {
        let (_, tasks) = status_json(
            &format!("{base}/v1/teams/alpha/tasks?user={user}&filter=all"),
            None,
        );
        tasks["tasks"].as_array().unwrap().clone()
    };
    assert!(
        board(&base_b, "bob").is_empty(),
        "another user's board is empty"
    );
    let first = board(&base_b, "alice")[0].clone();
    assert_eq!(
        first["owner"], "ann",
        "the first idle member got it: {first}"
    );
    // Ann works on it on A: kill A there.
    until("ann's run asks its model", || {
        requests(&mock).iter().any(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                .is_some_and(|m| m["content"].to_string().contains("TASK-ONE"))
        })
    });
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    until("bob finishes the task on B", || {
        board(&base_b, "alice")[0]["status"] == "completed"
    });
    let done = board(&base_b, "alice")[0].clone();
    assert_eq!(done["owner"], "bob", "{done}");
    assert_eq!(done["dispatches"], 2, "{done}");
    assert_eq!(done["result"], "the survey is done");
    until("the lead is told", || {
        let (_, shown) = status_json(&format!("{base_b}/v1/sessions/plan?user=alice"), None);
        shown.to_string().contains("the survey is done")
    });
    // Once, however long B runs.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (_, shown) = status_json(&format!("{base_b}/v1/sessions/plan?user=alice"), None);
    let text = shown.to_string();
    assert_eq!(text.matches("the survey is done").count(), 1, "{text}");
    assert!(!text.contains("first attempt"), "{text}");
    drop(b);
}

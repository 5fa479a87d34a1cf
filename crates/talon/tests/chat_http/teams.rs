//! Issue 25: a team across two gateways on one PostgreSQL, managed over HTTP. The lead (in one
//! conversation, continued from either gateway) posts four tasks with a dependency chain; three
//! members work them in parallel on both gateways; gateway A is killed (`kill -9`) while a member
//! works there; gateway B sees the claim lapse, puts the task back on the board and another
//! member finishes it; a failed prerequisite keeps its dependent blocked and the lead is told;
//! every result reaches the lead's conversation once and its last answer is given all of them.
//! Run where `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets it).

use super::*;
use support::chat::method_json;
use support::pg::{Schema, database_url, gateway_home as home, until};

/// The requests of the conversation whose first user message contains `marker`.
fn conversation(mock: &support::chat::Mock, marker: &str) -> Vec<Value> {
    requests(mock)
        .into_iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                .is_some_and(|m| m["content"].to_string().contains(marker))
        })
        .collect()
}

fn create(subject: &str, description: &str, blocked_by: &[i64]) -> Value {
    json!({"tool_calls": [{"name": "team_tasks", "arguments": {
        "action": "create", "subject": subject, "description": description, "blocked_by": blocked_by
    }}]})
}

#[test]
fn a_team_on_two_gateways_survives_a_killed_gateway() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "team");
    let scratch = tempfile::tempdir().unwrap();
    // Matched in order: the lead's later messages (its last user message) before its first.
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Noted."}]},
            {"when": "TASK-ONE", "turns": [
                {"text": "first attempt", "delay_ms": 60000},
                {"text": "the survey is done"}
            ]},
            {"when": "TASK-TWO", "turns": [
                // Slow enough that the lead has posted #4 (blocked by #2) by then: a task cannot
                // be posted behind one that already failed.
                {"tool_calls": [{"name": "team_tasks", "arguments": {"action": "fail", "task_id": 2, "reason": "no lawyer is available"}}], "delay_ms": 1500},
                {"text": "I could not review the terms."}
            ]},
            {"when": "TASK-THREE", "turns": [{"text": "the copy is written"}]},
            {"when": "TASK-FOUR", "turns": [{"text": "signed"}]},
            {"when": "post the rest", "last": true, "turns": [
                create("legal review", "TASK-TWO review the terms", &[]),
                create("write", "TASK-THREE write the copy", &[1]),
                create("sign", "TASK-FOUR sign the contract", &[2]),
                {"text": "Posted three more."}
            ]},
            {"when": "sum it up", "last": true, "turns": [
                {"tool_calls": [{"name": "team_message", "arguments": {"action": "read"}}]},
                {"text": "Summary: the survey is done; the copy is written; the legal review failed (no lawyer is available), so signing waits."}
            ]},
            {"when": "plan the work", "turns": [
                create("survey", "TASK-ONE survey the users", &[]),
                {"text": "Posted."}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (home(&mock), home(&mock));
    let mut a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    for agent in ["ann", "bob", "cy"] {
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
    // The same operations refuse the same things on the CLI (usage errors) and over HTTP.
    for (args, wanted) in [
        (
            &["create", "beta", "--lead", "nobody"][..],
            "there is no agent",
        ),
        (&["add", "alpha", "nobody"][..], "there is no agent"),
        (&["delete", "gamma"][..], "there is no team"),
    ] {
        let out = support::command(home_a.path())
            .envs(env)
            .arg("teams")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(wanted),
            "{out:?}"
        );
    }
    let (status, stranger) = method_json(
        "PUT",
        &format!("{base_b}/v1/teams/alpha/members/nobody"),
        &json!({}),
    );
    assert_eq!(status, 400, "{stranger}");
    for member in ["ann", "bob", "cy"] {
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
        3,
        "{team}"
    );
    let board = |base: &str, user: &str| {
        let (_, tasks) = status_json(
            &format!("{base}/v1/teams/alpha/tasks?user={user}&filter=all"),
            None,
        );
        tasks["tasks"].as_array().unwrap().clone()
    };
    let task = |id: i64| {
        board(&base_b, "alice")
            .into_iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("task #{id} is on the board"))
    };

    // The lead posts the first task on A; the first idle member works on it there.
    let reply = post(
        &format!("{base_a}/v1/sessions/plan/messages"),
        &json!({"text": "plan the work", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Posted."), "{reply}");
    assert!(
        board(&base_b, "bob").is_empty(),
        "another user's board is empty"
    );
    assert_eq!(task(1)["owner"], "ann", "the first idle member got it");
    until("ann's run asks its model", || {
        !conversation(&mock, "TASK-ONE").is_empty()
    });
    // The same conversation continues on B: three more tasks, one waiting for #1 and one for
    // #2. The other two members take what the board allows, on B.
    let reply = post(
        &format!("{base_b}/v1/sessions/plan/messages"),
        &json!({"text": "post the rest", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Posted three more."), "{reply}");
    // Kill A while ann works there.
    until("the legal review has failed", || {
        task(2)["status"] == "failed"
    });
    assert_eq!(task(1)["status"], "in_progress", "{}", task(1));
    a.child.kill().unwrap();
    a.child.wait().unwrap();

    until("the survey and the copy are done on B", || {
        task(3)["status"] == "completed"
    });
    let survey = task(1);
    assert_eq!(survey["status"], "completed", "{survey}");
    assert_ne!(
        survey["owner"], "ann",
        "another member finished it: {survey}"
    );
    assert_eq!(survey["dispatches"], 2, "{survey}");
    assert_eq!(survey["result"], "the survey is done");
    let legal = task(2);
    assert_eq!(legal["result"], "no lawyer is available", "{legal}");
    assert_eq!(legal["dispatches"], 1, "{legal}");
    let write = task(3);
    assert_eq!(write["result"], "the copy is written", "{write}");
    assert_eq!(write["dispatches"], 1, "{write}");
    // The dependent was given its prerequisite's result.
    let given = conversation(&mock, "TASK-THREE")[0]["messages"].to_string();
    assert!(given.contains("the survey is done"), "{given}");
    // A failed prerequisite keeps its dependent waiting: never dispatched, however long B runs.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let sign = task(4);
    assert_eq!(sign["status"], "blocked", "{sign}");
    assert_eq!(sign["dispatches"], 0, "{sign}");
    assert!(conversation(&mock, "TASK-FOUR").is_empty());

    // Every result reached the lead's conversation once; its failure was told; the first
    // attempt, lost with A, never was.
    until("the lead is told", || {
        let (_, shown) = status_json(&format!("{base_b}/v1/sessions/plan?user=alice"), None);
        let text = shown.to_string();
        text.contains("the survey is done") && text.contains("the copy is written")
    });
    let (_, shown) = status_json(&format!("{base_b}/v1/sessions/plan?user=alice"), None);
    let text = shown.to_string();
    for result in ["the survey is done", "the copy is written"] {
        assert_eq!(text.matches(result).count(), 1, "{result} once: {text}");
    }
    assert!(!text.contains("first attempt"), "{text}");
    // The person asks for the answer; the lead reads its mail (the board's word on the failure)
    // and its model is given every result and the failure.
    let reply = post(
        &format!("{base_b}/v1/sessions/plan/messages"),
        &json!({"text": "sum it up", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Summary: the survey is done"), "{reply}");
    let lead = conversation(&mock, "plan the work");
    let last = lead.last().unwrap()["messages"].to_string();
    for result in [
        "the survey is done",
        "the copy is written",
        "no lawyer is available",
    ] {
        assert!(last.contains(result), "{result}: {last}");
    }
    drop(b);
}

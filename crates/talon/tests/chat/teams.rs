//! Issue 25: a team at work from `talon chat`, on both engines (see `runs::config`) and in both
//! dialects (GoClaw's `team_tasks` in OpenAI's format, Claude Code's `TaskCreate` and
//! `TaskUpdate` in Anthropic's). The lead
//! posts five tasks; members are given them by priority in parallel (never one task twice); a
//! task waits for its prerequisites and is given their results; a member's failure keeps what
//! it blocks waiting and the lead is told; each result reaches the lead's session once. The
//! lead leads two teams, and the one its conversation named stays the one in play (GoClaw #490).

use super::runs::{config, conversation};
use super::*;

/// `talon teams ARGS` in `home`, which must succeed.
fn teams(home: &std::path::Path, args: &[&str]) -> String {
    let out = support::command(home)
        .arg("teams")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "teams {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_team_works_a_board_of_five_tasks() {
    for kind in ["openai", "anthropic"] {
        a_team_works_a_board_of_five_tasks_in(kind);
    }
}

fn a_team_works_a_board_of_five_tasks_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    // Each format's dialect: GoClaw's team_tasks, Claude Code's TaskCreate / TaskUpdate.
    let claude = kind == "anthropic";
    let create = |args: Value| {
        if !claude {
            return json!({"name": "team_tasks", "arguments": args});
        }
        let mut cc = json!({"subject": args["subject"], "description": args["description"]});
        if let Some(team) = args.get("team") {
            cc["team"] = team.clone();
        }
        if let Some(blocked) = args.get("blocked_by") {
            cc["blockedBy"] = blocked.clone();
        }
        json!({"name": "TaskCreate", "arguments": cc})
    };
    let fail = if claude {
        json!({"name": "TaskUpdate", "arguments": {"taskId": "4", "status": "failed", "result": "no lawyer is available"}})
    } else {
        json!({"name": "team_tasks", "arguments": {"action": "fail", "task_id": 4, "reason": "no lawyer is available"}})
    };
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true, "turns": [{"text": "Noted."}]},
            {"when": "TASK-A", "turns": [{"text": "the market is big"}]},
            {"when": "TASK-B", "turns": [{"text": "the copy is written"}]},
            {"when": "TASK-C", "turns": [{"text": "published the launch"}]},
            {"when": "TASK-D", "turns": [
                // Slow enough that the lead has posted #5 (blocked by #4) by then.
                {"tool_calls": [fail], "delay_ms": 1500},
                {"text": "I could not review the terms."}
            ]},
            {"when": "plan the launch", "turns": [
                {"tool_calls": [create(json!({"action": "create", "team": "alpha", "subject": "research", "description": "TASK-A research the market", "priority": 3}))]},
                {"tool_calls": [create(json!({"action": "create", "subject": "write", "description": "TASK-B write the copy", "priority": 2}))]},
                {"tool_calls": [create(json!({"action": "create", "subject": "publish", "description": "TASK-C publish it", "blocked_by": [1, 2]}))]},
                {"tool_calls": [create(json!({"action": "create", "subject": "legal review", "description": "TASK-D review the terms", "priority": 1}))]},
                {"tool_calls": [create(json!({"action": "create", "subject": "sign", "description": "TASK-E sign the contract", "blocked_by": [4]}))]},
                {"text": "Posted five tasks."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    for agent in ["default", "ann", "bob", "cy", "dee"] {
        let out = support::command(home.path())
            .args(["agents", "create", agent])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    teams(
        home.path(),
        &[
            "create",
            "alpha",
            "--lead",
            "default",
            "--description",
            "launches products",
        ],
    );
    for member in ["ann", "bob", "cy"] {
        teams(
            home.path(),
            &["add", "alpha", member, "--role", "generalist"],
        );
    }
    // The lead leads a second team: the conversation's team must not change under it.
    teams(home.path(), &["create", "beta", "--lead", "default"]);
    teams(home.path(), &["add", "beta", "dee"]);

    let (stdout, stderr, code) = chat(home.path(), &["-p", "plan the launch"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Posted five tasks."), "{stdout}");

    let board: Value =
        serde_json::from_str(&teams(home.path(), &["board", "alpha", "--all", "--json"])).unwrap();
    let status = |id: i64| {
        board
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .map(|t| {
                (
                    t["status"].as_str().unwrap().to_string(),
                    t["result"].as_str().unwrap().to_string(),
                    t["dispatches"].as_i64().unwrap(),
                )
            })
            .unwrap()
    };
    assert_eq!(
        board.as_array().unwrap().len(),
        5,
        "every task on alpha's board: {board}"
    );
    assert_eq!(status(1).0, "completed");
    assert_eq!(status(1).1, "the market is big");
    assert_eq!(status(2).0, "completed");
    assert_eq!(
        status(3),
        ("completed".into(), "published the launch".into(), 1)
    );
    let review = conversation(&mock, "TASK-D");
    assert_eq!(
        status(4).0,
        "failed",
        "{}",
        review.last().unwrap()["messages"]
    );
    assert_eq!(
        status(5).0,
        "blocked",
        "a failed prerequisite keeps it waiting"
    );
    for id in 1..=4 {
        assert_eq!(status(id).2, 1, "task #{id} was given out once");
    }
    let beta = teams(home.path(), &["board", "beta", "--all"]);
    assert!(
        beta.contains("no tasks"),
        "nothing went to the other team: {beta}"
    );

    // The lead, on a team, is offered the board.
    let lead_tools = conversation(&mock, "plan the launch")[0]["tools"].to_string();
    let post_tool = if claude {
        "\"TaskCreate\""
    } else {
        "\"team_tasks\""
    };
    assert!(lead_tools.contains(post_tool), "{lead_tools}");
    // A member has the board, and no tool that starts runs (it is one level down).
    let member_tools = conversation(&mock, "TASK-A")[0]["tools"].to_string();
    let board_tool = if claude {
        "\"TaskUpdate\""
    } else {
        "\"team_tasks\""
    };
    assert!(member_tools.contains(board_tool), "{member_tools}");
    for spawner in ["\"spawn\"", "\"subagents\"", "\"Agent\"", "\"delegate\""] {
        assert!(!member_tools.contains(spawner), "{spawner}: {member_tools}");
    }
    // It works on another model's instructions: what the subagent deny list withholds from a
    // delegation's target (memory, which the lead has) it does not get either.
    assert!(lead_tools.contains("\"memory_search\""), "{lead_tools}");
    for withheld in ["\"memory_search\"", "\"sessions_send\""] {
        assert!(
            !member_tools.contains(withheld),
            "{withheld}: {member_tools}"
        );
    }
    // The dependent task was given its prerequisites' results.
    let publish = conversation(&mock, "TASK-C")[0]["messages"].to_string();
    assert!(
        publish.contains("the market is big") && publish.contains("the copy is written"),
        "{publish}"
    );
    // Every result reached the lead's session once, as a teammate's; the failure was told.
    let lead = conversation(&mock, "plan the launch");
    let last = lead.last().unwrap().to_string();
    for result in [
        "the market is big",
        "the copy is written",
        "published the launch",
    ] {
        assert_eq!(last.matches(result).count(), 1, "{result} once: {last}");
    }
    assert!(last.contains("teammate: "), "{last}");
    assert!(
        last.contains("unread team message"),
        "the lead is told: {last}"
    );
}

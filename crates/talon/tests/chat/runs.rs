//! Issue 24: background child runs from `talon chat`, in both provider formats: spawned in
//! parallel, each result announced to the parent exactly once, managed with the caller's own
//! scope (list, wait, cancel "all"/"last", steer).

use super::*;

/// Both provider wire formats: the scenarios run in each.
const KINDS: [&str; 2] = ["openai", "anthropic"];

/// The config of a chat whose agent talks to `mock` in `kind`'s format, with `extra` appended.
/// The scenarios run on both engines: in Anthropic's format on PostgreSQL (a fresh schema, kept
/// while the value returned lives) where `TALON_TEST_DATABASE_URL` is set, in OpenAI's on SQLite.
#[must_use]
pub(super) fn config(
    home: &std::path::Path,
    mock: &support::chat::Mock,
    kind: &str,
    extra: &str,
) -> Option<support::pg::Schema> {
    let schema = (kind == "anthropic")
        .then(support::pg::database_url)
        .flatten()
        .map(|url| support::pg::Schema::new(&url, "runs"));
    let database = schema.as_ref().map(support::pg::Schema::toml);
    let base = if kind == "openai" {
        format!("{}/v1", mock.url)
    } else {
        mock.url.clone()
    };
    std::fs::write(
        home.join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"m\"\n{extra}\n{}",
            database.unwrap_or_default()
        ),
    )
    .unwrap();
    schema
}

/// The runs `talon runs list --json` shows.
fn runs(home: &std::path::Path) -> Vec<Value> {
    let out = support::command(home)
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The requests of the conversation whose first user message contains `marker`.
pub(super) fn conversation(mock: &support::chat::Mock, marker: &str) -> Vec<Value> {
    support::chat::of_conversation(requests(mock), marker)
}

#[test]
fn a_parent_spawns_three_children_in_parallel_and_gets_each_result_once() {
    for (kind, tool) in [("openai", "spawn"), ("anthropic", "Agent")] {
        let home = tempfile::tempdir().unwrap();
        let call = |task: &str| {
            if tool == "spawn" {
                json!({"name": "spawn", "arguments": {"task": task}})
            } else {
                json!({"name": "Agent", "arguments": {"description": "help", "prompt": task, "run_in_background": true}})
            }
        };
        let mock = mock_provider(
            home.path(),
            &json!({"conversations": [
                {"when": "TASK-A", "turns": [{"text": "alpha result"}]},
                {"when": "TASK-B", "turns": [{"text": "beta result", "delay_ms": 300}]},
                {"when": "TASK-C", "turns": [{"text": "gamma result"}]},
                {"when": "three helpers", "turns": [
                    {"tool_calls": [call("TASK-A"), call("TASK-B"), call("TASK-C")]},
                    {"text": "Spawned three."},
                    {"text": "All three reported."}
                ]}
            ]}),
        );
        let _db = config(home.path(), &mock, kind, "");
        let (stdout, stderr, code) = chat(home.path(), &["-p", "use three helpers"]);
        assert_eq!(code, 0, "{kind}: {stderr}");
        assert!(stdout.contains("Spawned three."), "{kind}: {stdout}");
        assert!(stdout.contains("All three reported."), "{kind}: {stdout}");
        let started = conversation(&mock, "three helpers");
        let spawned = started[1]["messages"].to_string();
        assert!(
            spawned.contains("in the background"),
            "{kind}: spawn returns at once: {spawned}"
        );
        // Issue 36 (8): Talon's own words are not fenced as untrusted (the model is told to
        // follow them); only what another model wrote is.
        assert!(
            !spawned.contains("EXTERNAL_UNTRUSTED_CONTENT"),
            "{kind}: {spawned}"
        );
        // The last request of the parent holds its whole history: each result in it once,
        // fenced as untrusted.
        let last = started.last().unwrap()["messages"].to_string();
        for result in ["alpha result", "beta result", "gamma result"] {
            assert_eq!(
                last.matches(result).count(),
                1,
                "{kind}: {result} delivered once: {last}"
            );
        }
        assert!(
            last.contains("EXTERNAL_UNTRUSTED_CONTENT"),
            "{kind}: {last}"
        );
        let all = runs(home.path());
        assert_eq!(all.len(), 3, "{kind}: {all:?}");
        assert!(
            all.iter().all(|r| r["status"] == "completed"),
            "{kind}: {all:?}"
        );
    }
}

/// The first user message of each of `mock`'s requests.
fn first_user_messages(mock: &support::chat::Mock) -> Vec<String> {
    requests(mock)
        .iter()
        .filter_map(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m["role"] == "user"))
                .map(|m| m["content"].to_string())
        })
        .collect()
}

/// list, steer, wait and cancel "all" act on the caller's own children only: another
/// session's running child survives "cancel all" (GoClaw's bug: it cancelled across tenants);
/// a steered child is replaced in its slot and its replacement's result is waited for; the
/// cancelled child's end is announced, the replaced one's is not.
#[test]
fn subagents_are_managed_within_the_callers_own_runs() {
    let home = tempfile::tempdir().unwrap();
    let subagents = |args: Value| json!({"name": "subagents", "arguments": args});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-OTHER", "turns": [{"text": "other result", "delay_ms": 8000}]},
            {"when": "TASK-X", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "TASK-Y", "turns": [{"text": "never", "delay_ms": 60000}, {"text": "steered result"}]},
            {"when": "another helper", "turns": [
                {"tool_calls": [subagents(json!({"action": "spawn", "task": "TASK-OTHER"}))]},
                {"text": "Other spawned."},
                {"text": "Other reported."}
            ]},
            {"when": "manage helpers", "turns": [
                {"tool_calls": [
                    subagents(json!({"action": "spawn", "task": "TASK-X"})),
                    subagents(json!({"action": "spawn", "task": "TASK-Y"}))
                ]},
                {"tool_calls": [subagents(json!({"action": "list"}))]},
                {"tool_calls": [subagents(json!({"action": "steer", "id": "last", "message": "be quick"}))]},
                {"tool_calls": [subagents(json!({"action": "wait", "id": "last", "timeout_seconds": 30}))]},
                {"tool_calls": [subagents(json!({"action": "cancel", "id": "all"}))]},
                {"text": "Managed."},
                {"text": "Told of the cancel."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, "openai", "");
    // Another session of the same agent has a child running meanwhile.
    let other = std::thread::spawn({
        let home = home.path().to_path_buf();
        move || chat(&home, &["--session", "other", "-p", "another helper"])
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !first_user_messages(&mock)
        .iter()
        .any(|m| m.contains("TASK-OTHER"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the other child never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (stdout, stderr, code) = chat(home.path(), &["-p", "manage helpers"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Managed."), "{stdout}");
    assert!(stdout.contains("Told of the cancel."), "{stdout}");
    let parent = conversation(&mock, "manage helpers");
    // An agent on no team and with no agent links is not offered tools it could not use.
    let offered = parent[0]["tools"].to_string();
    assert!(offered.contains("\"subagents\""), "{offered}");
    for useless in [
        "\"team_tasks\"",
        "\"team_message\"",
        "\"delegate\"",
        "\"handoff\"",
    ] {
        assert!(!offered.contains(useless), "{useless}: {offered}");
    }
    let listed = parent[2]["messages"].to_string();
    assert!(
        listed.contains("TASK-X") && listed.contains("TASK-Y") && !listed.contains("TASK-OTHER"),
        "list shows the caller's runs only: {listed}"
    );
    let waited = parent[4]["messages"].to_string();
    assert!(waited.contains("steered result"), "{waited}");
    let cancelled = parent[5]["messages"].to_string();
    assert!(cancelled.contains("Cancelled 1 run(s)"), "{cancelled}");
    let told = parent.last().unwrap()["messages"].to_string();
    assert!(told.contains("cancelled"), "{told}");
    assert!(
        !told.contains("replaced by a new message"),
        "a replaced run is not announced: {told}"
    );
    // The other session's child was not touched by "cancel all".
    let (other_out, other_err, other_code) = other.join().unwrap();
    assert_eq!(other_code, 0, "{other_err}");
    assert!(other_out.contains("Other reported."), "{other_out}");
    let all = runs(home.path());
    let status_of = |task: &str| {
        all.iter()
            .filter(|r| r["task"].as_str().unwrap().starts_with(task))
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(status_of("TASK-OTHER"), ["completed"]);
    assert_eq!(status_of("TASK-X"), ["cancelled"]);
    let mut y = status_of("TASK-Y");
    y.sort();
    assert_eq!(y, ["cancelled", "completed"], "{all:?}");
}

/// A child at its iteration cap ends `limit_reached`, never `completed` (GoClaw called a capped
/// run completed), and the parent is told.
#[test]
fn a_child_at_its_iteration_cap_ends_limit_reached() {
    for kind in KINDS {
        a_child_at_its_iteration_cap_ends_limit_reached_in(kind);
    }
}

fn a_child_at_its_iteration_cap_ends_limit_reached_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-LOOP", "turns": [
                {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}]},
                {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "Europe/Paris"}}]},
                {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "Asia/Tokyo"}}]}
            ]},
            {"when": "capped helper", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-LOOP"}}]},
                {"text": "It ran out."}
            ]}
        ]}),
    );
    let _db = config(
        home.path(),
        &mock,
        kind,
        "[subagents]\nmax_iterations = 2\n",
    );
    let (stdout, stderr, code) = chat(home.path(), &["-p", "capped helper"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("It ran out."), "{stdout}");
    let told = conversation(&mock, "capped helper")[1]["messages"].to_string();
    assert!(told.contains("limit_reached"), "{told}");
    let child_requests = conversation(&mock, "TASK-LOOP").len();
    assert_eq!(child_requests, 2, "at most max_iterations model requests");
    assert_eq!(runs(home.path())[0]["status"], "limit_reached");
}

/// Budgets per root run: a run makes no more model requests than its root's budget has left
/// (`limit_reached`), and one still running when its root's time runs out ends `timed_out`.
#[test]
fn a_root_runs_budget_stops_its_runs() {
    for kind in KINDS {
        a_root_runs_budget_stops_its_runs_in(kind);
    }
}

fn a_root_runs_budget_stops_its_runs_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let call =
        |tz: &str| json!({"tool_calls": [{"name": "datetime", "arguments": {"timezone": tz}}]});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-SPEND", "turns": [call("UTC"), call("Europe/Paris"), call("Asia/Tokyo"), call("America/Lima"), call("Africa/Cairo")]},
            {"when": "TASK-SLOW", "turns": [{"text": "too late", "delay_ms": 20000}]},
            {"when": "budgeted helpers", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-SPEND"}}]},
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-SLOW"}}]},
                {"text": "Both stopped."}
            ]}
        ]}),
    );
    let _db = config(
        home.path(),
        &mock,
        kind,
        "[subagents]\nbudget_requests = 3\nbudget_seconds = 2\n",
    );
    let (stdout, stderr, code) = chat(home.path(), &["-p", "budgeted helpers"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Both stopped."), "{stdout}");
    assert_eq!(
        conversation(&mock, "TASK-SPEND").len(),
        3,
        "the budget's requests"
    );
    let parent = conversation(&mock, "budgeted helpers");
    assert!(parent[1]["messages"].to_string().contains("limit_reached"));
    assert!(parent[2]["messages"].to_string().contains("timed_out"));
    let mut statuses: Vec<String> = runs(home.path())
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_string())
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["limit_reached", "timed_out"]);
}

/// Delegation crosses agents only over a link: DELEGATION.md lists the agent's targets in its
/// system prompt, an unlinked agent is refused with the targets named, a sync delegation runs
/// the target (with its own tools) and returns its answer fenced, and the link's
/// `max_concurrent` holds for delegations started at once (in the seeds' words).
#[test]
fn delegation_goes_over_agent_links_within_their_capacity() {
    for kind in KINDS {
        delegation_goes_over_agent_links_within_their_capacity_in(kind);
    }
}

fn delegation_goes_over_agent_links_within_their_capacity_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let delegate = |args: Value| json!({"name": "delegate", "arguments": args});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-R", "turns": [{"text": "research result"}]},
            {"when": "TASK-S", "turns": [{"text": "slow research", "delay_ms": 1500}]},
            {"when": "delegate please", "turns": [
                {"tool_calls": [delegate(json!({"agent": "nobody", "task": "x"}))]},
                {"tool_calls": [delegate(json!({"agent": "researcher", "task": "TASK-R: find it"}))]},
                {"tool_calls": [
                    delegate(json!({"agent": "researcher", "task": "TASK-S one", "mode": "async"})),
                    delegate(json!({"agent": "researcher", "task": "TASK-S two", "mode": "async"}))
                ]},
                {"text": "Delegated."},
                {"text": "Told."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    let admin = |args: &[&str]| {
        let out = support::command(home.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    admin(&[
        "agents",
        "create",
        "researcher",
        "--settings",
        r#"{"name": "Researcher", "description": "finds facts in papers"}"#,
    ]);
    admin(&["agents", "create", "default"]);
    admin(&[
        "agents",
        "link",
        "default",
        "researcher",
        "--max-concurrent",
        "1",
    ]);
    let (stdout, stderr, code) = chat(home.path(), &["-p", "delegate please"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Delegated."), "{stdout}");
    let parent = conversation(&mock, "delegate please");
    // OpenAI puts the system prompt first among the messages, Anthropic beside them.
    let system = parent[0].to_string();
    assert!(
        system.contains("DELEGATION.md")
            && system.contains("`researcher` (Researcher): finds facts in papers"),
        "{system}"
    );
    let refused = parent[1]["messages"].to_string();
    assert!(
        refused.contains("you cannot delegate to nobody")
            && refused.contains("You can delegate to: researcher"),
        "{refused}"
    );
    let answered = parent[2]["messages"].to_string();
    assert!(
        answered.contains("research result") && answered.contains("EXTERNAL_UNTRUSTED_CONTENT"),
        "{answered}"
    );
    let third = parent[3]["messages"].to_string();
    assert!(
        third.contains("Agent at capacity (1/1). Try a different agent or handle it yourself."),
        "{third}"
    );
    assert!(third.contains("Delegated to researcher as run-"), "{third}");
    assert!(
        parent.last().unwrap()["messages"]
            .to_string()
            .contains("slow research")
    );
    let all = runs(home.path());
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all.iter()
            .all(|r| r["origin"] == "delegation" && r["agent_key"] == "researcher")
    );
    assert!(all.iter().all(|r| r["status"] == "completed"), "{all:?}");
    // The target runs with its own tools, which do not include delegating onwards.
    let target = &conversation(&mock, "TASK-R")[0];
    assert!(!target["tools"].to_string().contains("\"delegate\""));
    // In its provider's dialect: a Claude Code turn is offered Read, a GoClaw one read_file
    // (a list of GoClaw's names once left a Claude Code target with neither).
    let reader = if kind == "anthropic" {
        "\"Read\""
    } else {
        "\"read_file\""
    };
    assert!(
        target["tools"].to_string().contains(reader),
        "{}",
        target["tools"]
    );
}

/// evaluate_loop: the generator drafts, the evaluator rejects with feedback, the generator
/// revises with it, the evaluator approves; each round is a delegation over the caller's links.
#[test]
fn evaluate_loop_revises_until_approved() {
    for kind in KINDS {
        evaluate_loop_revises_until_approved_in(kind);
    }
}

fn evaluate_loop_revises_until_approved_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "Evaluate this draft", "turns": [{"text": "REJECTED: too bland"}, {"text": "approved"}]},
            {"when": "TASK-W", "turns": [{"text": "draft one"}, {"text": "draft two"}]},
            {"when": "loop please", "turns": [
                {"tool_calls": [{"name": "evaluate_loop", "arguments": {
                    "generator": "writer", "evaluator": "critic",
                    "task": "TASK-W: write a slogan", "criteria": "short and bold"}}]},
                {"text": "Looped."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    for args in [
        &["agents", "create", "default"][..],
        &["agents", "create", "writer"],
        &["agents", "create", "critic"],
        &["agents", "link", "default", "writer"],
        &["agents", "link", "default", "critic"],
    ] {
        let out = support::command(home.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let (stdout, stderr, code) = chat(home.path(), &["-p", "loop please"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Looped."), "{stdout}");
    let result = conversation(&mock, "loop please")[1]["messages"].to_string();
    assert!(
        result.contains("APPROVED by critic in round 2 of 3") && result.contains("draft two"),
        "{result}"
    );
    let revision = conversation(&mock, "TASK-W")[1]["messages"].to_string();
    assert!(
        revision.contains("draft one") && revision.contains("too bland"),
        "the generator revises with the feedback: {revision}"
    );
    let all = runs(home.path());
    assert_eq!(all.len(), 4, "two rounds of two delegations: {all:?}");
    assert!(
        all.iter()
            .all(|r| r["origin"] == "evaluate" && r["status"] == "completed")
    );
}

/// Claude Code's custom agents: a `.claude/agents/*.md` definition in the workspace gives the
/// child its instructions, only the tools it names (within the parent's), and at most its
/// maxTurns; an unknown type is refused with the types there are. Its `model` runs it on the
/// model the operator configured for that name (`[subagents.models]`); the call's own `model`,
/// a name the operator did not configure, changes nothing.
#[test]
fn a_custom_agent_definition_confines_its_child() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude/agents")).unwrap();
    std::fs::write(
        home.path().join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\npermissionMode: plan\nmaxTurns: 2\nmodel: sonnet\n---\nYou review code and report problems.\n",
    )
    .unwrap();
    let agent = |kind: &str| json!({"name": "Agent", "arguments": {"description": "Review", "prompt": "TASK-REVIEW the code", "subagent_type": kind, "model": "opus"}});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-REVIEW", "turns": [
                {"tool_calls": [{"name": "Grep", "arguments": {"pattern": "fn"}}]},
                {"tool_calls": [{"name": "Grep", "arguments": {"pattern": "struct"}}]},
                {"text": "never reached"}
            ]},
            {"when": "review please", "turns": [
                {"tool_calls": [agent("nonexistent")]},
                {"tool_calls": [agent("reviewer")]},
                {"text": "Reviewed."}
            ]}
        ]}),
    );
    let _db = config(
        home.path(),
        &mock,
        "anthropic",
        "[subagents.models]\nsonnet = \"m-big\"\n",
    );
    let (stdout, stderr, code) = chat(home.path(), &["-p", "review please"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Reviewed."), "{stdout}");
    let parent = conversation(&mock, "review please");
    let unknown = parent[1]["messages"].to_string();
    assert!(
        unknown.contains("subagent_type nonexistent is not known") && unknown.contains("reviewer"),
        "{unknown}"
    );
    let child = conversation(&mock, "TASK-REVIEW");
    assert_eq!(child.len(), 2, "maxTurns caps the child's requests");
    assert_eq!(
        child[0]["model"], "m-big",
        "the definition's model, as configured"
    );
    assert_eq!(parent[0]["model"], "m");
    let mut tools: Vec<String> = child[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, ["Grep", "Read"], "only the definition's tools");
    let first = child[0]["messages"][0].to_string();
    assert!(
        first.contains("Your role: reviewer")
            && first.contains("You review code and report problems."),
        "{first}"
    );
    assert!(parent[2]["messages"].to_string().contains("limit_reached"));
}

/// SubagentStart and SubagentStop hooks with Claude Code's payloads: the start hook's context
/// reaches the child before its task, and a SubagentStop hook that blocks sends the child back
/// to work with its reason (the parent's own end fires Stop, not SubagentStop).
#[test]
fn subagent_hooks_see_and_steer_the_child() {
    for kind in KINDS {
        subagent_hooks_see_and_steer_the_child_in(kind);
    }
}

fn subagent_hooks_see_and_steer_the_child_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("sstart.sh"),
        "cat > start-payload.json\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"SubagentStart\",\"additionalContext\":\"CTX-FROM-HOOK\"}}'\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("sstop.sh"),
        "cat > stop-payload.json\nif [ -f stopped-once ]; then exit 0; fi\ntouch stopped-once\necho '{\"decision\":\"block\",\"reason\":\"Add the word DONE.\"}'\n",
    )
    .unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-H", "turns": [{"text": "first answer"}, {"text": "first answer DONE"}]},
            {"when": "hooked helper", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-H"}}]},
                {"text": "Hooked."}
            ]}
        ]}),
    );
    let _db = config(
        home.path(),
        &mock,
        kind,
        "[[hooks.subagent_start]]\ncommand = \"sh sstart.sh\"\n[[hooks.subagent_stop]]\ncommand = \"sh sstop.sh\"\n",
    );
    let (stdout, stderr, code) = chat(home.path(), &["-p", "hooked helper"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Hooked."), "{stdout}");
    let child = conversation(&mock, "TASK-H");
    assert_eq!(child.len(), 2, "the blocked stop sent the child back once");
    assert!(child[0]["messages"].to_string().contains("CTX-FROM-HOOK"));
    assert!(
        child[1]["messages"]
            .to_string()
            .contains("Add the word DONE.")
    );
    let told = conversation(&mock, "hooked helper")[1]["messages"].to_string();
    assert!(told.contains("first answer DONE"), "{told}");
    let start: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("start-payload.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(start["hook_event_name"], "SubagentStart");
    assert!(
        start["agent_id"].as_str().unwrap().starts_with("run-"),
        "{start}"
    );
    let stop: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("stop-payload.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stop["hook_event_name"], "SubagentStop");
    assert_eq!(stop["stop_hook_active"], true);
    assert_eq!(stop["agent_id"], start["agent_id"]);
}

/// handoff: the agent hands the chat to another over a link; the target opens with the
/// conversation so far; the chat's next message runs as the target (in its own session) until
/// the target clears the route, and then the first agent answers again.
#[test]
fn a_handoff_routes_the_chat_until_cleared() {
    for kind in KINDS {
        a_handoff_routes_the_chat_until_cleared_in(kind);
    }
}

fn a_handoff_routes_the_chat_until_cleared_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "handed to you by default", "turns": [
                {"text": "Billing here, how can I help?"},
                {"tool_calls": [{"name": "handoff", "arguments": {"action": "clear"}}]},
                {"text": "Handing you back."}
            ]},
            {"when": "i need billing", "turns": [
                {"tool_calls": [{"name": "handoff", "arguments": {"agent": "billing", "reason": "an invoice question"}}]},
                {"text": "Billing will take it from here."},
                {"text": "Back with default."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    for args in [
        &["agents", "create", "default"][..],
        &["agents", "create", "billing"],
        &["agents", "link", "default", "billing"],
    ] {
        let out = support::command(home.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let (stdout, stderr, code) = chat(home.path(), &["--session", "s", "-p", "i need billing"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Billing will take it from here."),
        "{stdout}"
    );
    let opening = conversation(&mock, "handed to you by default")[0]["messages"].to_string();
    assert!(
        opening.contains("an invoice question") && opening.contains("user: i need billing"),
        "the target opens with the conversation: {opening}"
    );
    // The source's own requests (the target's opening quotes its first message too).
    let source: Vec<Value> = conversation(&mock, "i need billing")
        .into_iter()
        .filter(|r| !r["messages"].to_string().contains("handed to you"))
        .collect();
    let told = source[1]["messages"].to_string();
    assert!(told.contains("Billing here, how can I help?"), "{told}");
    let (stdout, stderr, code) = chat(home.path(), &["--session", "s", "-p", "my invoice"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Handing you back."),
        "routed to billing: {stdout}"
    );
    let (stdout, stderr, code) = chat(home.path(), &["--session", "s", "-p", "thanks"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Back with default."), "cleared: {stdout}");
}

/// Quality gates without recursion: a command gate (run through exec's sandbox) on
/// `subagent.completed` sends the child back with the command's output until it passes; an
/// agent gate on the agent's own final answer has a reviewer agent reject it once, and the
/// revised answer is the turn's result; the reviewer's own answer is not reviewed.
#[test]
fn quality_gates_block_then_pass_on_retry() {
    for kind in KINDS {
        quality_gates_block_then_pass_on_retry_in(kind);
    }
}

fn quality_gates_block_then_pass_on_retry_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "Review this output", "turns": [{"text": "REJECTED: say please"}, {"text": "APPROVED"}]},
            {"when": "TASK-G", "turns": [{"text": "a rough draft"}, {"text": "a draft with the word SHIP-IT"}]},
            {"when": "gated work", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-G"}}]},
                {"text": "Here it is."},
                {"text": "Here it is, please."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    let gates = json!({"quality_gates": [
        {"event": "subagent.completed", "type": "command", "command": "grep SHIP-IT || { echo 'the draft must say SHIP-IT' >&2; exit 1; }",
         "block_on_failure": true, "max_retries": 2},
        {"event": "agent.final", "type": "agent", "agent": "qa", "block_on_failure": true, "max_retries": 1}
    ]});
    // A gate that could never run is refused where it is written.
    let broken = json!({"quality_gates": [{"event": "agent.final", "type": "agent"}]});
    let out = support::command(home.path())
        .args([
            "agents",
            "create",
            "default",
            "--settings",
            &broken.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs \"agent\""),
        "{out:?}"
    );
    for args in [
        &[
            "agents",
            "create",
            "default",
            "--settings",
            &gates.to_string(),
        ][..],
        &["agents", "create", "qa"],
    ] {
        let out = support::command(home.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let (stdout, stderr, code) = chat(
        home.path(),
        &["-p", "gated work", "--output-format", "stream-json"],
    );
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert_eq!(result["text"], "Here it is, please.", "{stdout}");
    // The rejected draft was held back: only the judged answer was streamed.
    let streamed: String = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["type"] == "text")
        .map(|event| event["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(streamed, "Here it is, please.", "{stdout}");
    let child = conversation(&mock, "TASK-G");
    assert_eq!(
        child.len(),
        2,
        "sent back once: {}",
        child.last().unwrap()["messages"]
    );
    assert!(
        child[1]["messages"]
            .to_string()
            .contains("the draft must say SHIP-IT")
    );
    let parent: Vec<Value> = conversation(&mock, "gated work")
        .into_iter()
        .filter(|r| !r["messages"].to_string().contains("Review this output"))
        .collect();
    assert!(parent[1]["messages"].to_string().contains("SHIP-IT"));
    assert!(
        parent[2]["messages"].to_string().contains("say please"),
        "revised with the feedback"
    );
    assert_eq!(
        conversation(&mock, "Review this output").len(),
        2,
        "the reviewer ran twice and its own answers were not reviewed"
    );
}

/// A child starts fresh (its task only) unless the caller forks it: then its task carries the
/// conversation so far, fenced, and the run records the mode.
#[test]
fn a_forked_child_sees_the_conversation_so_far() {
    for kind in KINDS {
        a_forked_child_sees_the_conversation_so_far_in(kind);
    }
}

fn a_forked_child_sees_the_conversation_so_far_in(kind: &str) {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-F", "turns": [{"text": "the earlier number was 42"}]},
            {"when": "remember 42", "turns": [
                {"text": "Noted."},
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "TASK-F: which number?", "context": "fork"}}]},
                {"text": "Forked."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, kind, "");
    let (_, stderr, code) = chat(home.path(), &["--session", "f", "-p", "remember 42"]);
    assert_eq!(code, 0, "{stderr}");
    let (stdout, stderr, code) = chat(home.path(), &["--session", "f", "-p", "ask a helper"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Forked."), "{stdout}");
    let child = conversation(&mock, "TASK-F")[0]["messages"].to_string();
    assert!(
        child.contains("user: remember 42")
            && child.contains("assistant: Noted.")
            && child.contains("user: ask a helper")
            && child.contains("EXTERNAL_UNTRUSTED_CONTENT"),
        "{child}"
    );
    assert_eq!(runs(home.path())[0]["context_mode"], "fork");
}

/// TaskOutput and TaskStop take an agent's id as they take a background shell's: one id space.
#[test]
fn task_output_and_task_stop_work_on_agent_runs() {
    let home = tempfile::tempdir().unwrap();
    let agent = |prompt: &str| json!({"name": "Agent", "arguments": {"description": "bg", "prompt": prompt, "run_in_background": true}});
    let id = json!({"task_id": "{{last_run_id}}"});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "TASK-QUICK", "turns": [{"text": "quick agent result"}]},
            {"when": "TASK-SLOW", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "background agents", "turns": [
                {"tool_calls": [agent("TASK-QUICK")]},
                {"tool_calls": [{"name": "TaskOutput", "arguments": id}]},
                {"tool_calls": [agent("TASK-SLOW")]},
                {"tool_calls": [{"name": "TaskStop", "arguments": id}]},
                {"tool_calls": [{"name": "TaskOutput", "arguments": {"task_id": "{{last_run_id}}", "timeout": 20000}}]},
                {"text": "Got it."},
                {"text": "Told."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, "anthropic", "");
    let (stdout, stderr, code) = chat(home.path(), &["-p", "background agents"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Got it."), "{stdout}");
    let parent = conversation(&mock, "background agents");
    let output = parent[2]["messages"].to_string();
    assert!(
        output.contains("quick agent result"),
        "TaskOutput waits for the agent: {output}"
    );
    let stopped = parent[4]["messages"].to_string();
    assert!(stopped.contains("stopped successfully"), "{stopped}");
    let after = parent[5]["messages"].to_string();
    assert!(after.contains("cancelled"), "{after}");
    let all = runs(home.path());
    let slow = all
        .iter()
        .find(|r| r["task"].as_str().unwrap().contains("TASK-SLOW"))
        .unwrap();
    assert_eq!(slow["status"], "cancelled");
}

/// A custom agent's definition is stored with its run: steered, it is started again with the
/// same model and turns (before, only its tools were kept, and a steered or resumed run ran with
/// its agent's defaults).
#[test]
fn a_steered_custom_agent_keeps_its_definition() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude/agents")).unwrap();
    std::fs::write(
        home.path().join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\nmaxTurns: 1\nmodel: sonnet\n---\nYou review code.\n",
    )
    .unwrap();
    let subagents = |args: Value| json!({"name": "subagents", "arguments": args});
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            // The steered run's task holds both markers; it has a script of its own, so it
            // does not depend on whether the first run asked before it was stopped.
            {"when": "be quick", "turns": [
                {"tool_calls": [{"name": "Grep", "arguments": {"pattern": "fn"}}]},
                {"text": "never reached: one turn"}
            ]},
            {"when": "TASK-R", "turns": [{"text": "never", "delay_ms": 60000}]},
            {"when": "steer the reviewer", "turns": [
                {"tool_calls": [{"name": "Agent", "arguments": {"description": "Review", "prompt": "TASK-R the code", "subagent_type": "reviewer", "run_in_background": true}}]},
                {"tool_calls": [subagents(json!({"action": "steer", "id": "last", "message": "be quick"}))]},
                {"tool_calls": [subagents(json!({"action": "wait", "id": "last", "timeout_seconds": 30}))]},
                {"text": "Steered."}
            ]}
        ]}),
    );
    let _db = config(home.path(), &mock, "openai", "");
    let toml = std::fs::read_to_string(home.path().join("talon.toml")).unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        toml.replace("[tools]\n", "[tools]\ndialect = \"both\"\n")
            + "[subagents.models]\nsonnet = \"m-big\"\n",
    )
    .unwrap();
    let (stdout, stderr, code) = chat(home.path(), &["-p", "steer the reviewer"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Steered."), "{stdout}");
    let steered = conversation(&mock, "be quick");
    assert_eq!(steered.len(), 1, "the steered run's one turn (maxTurns)");
    let steered = &steered[0];
    assert_eq!(steered["model"], "m-big", "the definition's model, kept");
    let waited = conversation(&mock, "steer the reviewer")[3]["messages"].to_string();
    assert!(waited.contains("limit_reached"), "maxTurns kept: {waited}");
}

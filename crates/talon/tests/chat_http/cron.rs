//! Issue 27's scheduled jobs end to end: a job added over `/v1/cron` runs when due as an agent
//! run (origin `cron`, listed by `/v1/runs`), once per due time, its result announced in the
//! session it names and kept in its history; `talon cron` sees the same jobs; neither a
//! subagent nor a job's own run is offered `cron`; two gateways on one PostgreSQL run each due
//! job exactly once; and a job whose gateway is killed mid-run is finished by another, which
//! waits for the run already started (resumed by its supervisor) instead of starting a second;
//! due jobs beyond the run limit wait for a slot.

use super::*;

use support::chat::{method_json, offered};
use support::pg::{Schema, database_url, gateway_home, until};

/// The first user message of a model request.
fn first_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// Moves `job`'s next time to now, as if its hour had passed, through the store the gateway
/// shares (SQLite: the same file).
fn make_due(home: &std::path::Path, job: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = talon_store::StoreConfig::sqlite_in(&support::data_dir(home));
        let store = talon_store::Store::connect(&config).await.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        store
            .execute_admin(&format!(
                "UPDATE cron_jobs SET next_run_at = {now} WHERE id = '{job}'"
            ))
            .await
            .unwrap();
    });
}

#[test]
fn a_due_job_runs_once_as_an_agent_run_and_its_result_reaches_its_session() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Noted the report."}]},
            {"when": "CRON-TASK", "turns": [{"text": "The weather is sunny."}]},
            {"when": "SUB-TASK", "turns": [
                {"tool_calls": [{"name": "cron", "arguments": {"action": "list"}}]},
                {"text": "child done"}
            ]},
            {"when": "schedule a digest", "turns": [
                {"tool_calls": [{"name": "cron", "arguments": {"action": "add", "name": "digest", "cron": "0 8 * * *", "timezone": "Mars/Base", "message": "DIGEST"}}]},
                {"tool_calls": [{"name": "cron", "arguments": {"action": "add", "name": "digest", "cron": "0 8 * * *", "timezone": "Europe/Berlin", "message": "DIGEST: summarise the day", "session_key": "current"}}]},
                {"tool_calls": [{"name": "cron", "arguments": {"action": "list"}}]},
                {"text": "Scheduled."}
            ]},
            {"when": "hello there", "turns": [
                {"tool_calls": [{"name": "subagents", "arguments": {"action": "run", "task": "SUB-TASK: list the jobs"}}]},
                {"text": "Hi."}
            ]}
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

    // Alice's conversation; its subagent is not offered `cron`, and cannot call it.
    let reply = post(
        &format!("{base}/v1/sessions/weather-room/messages"),
        &json!({"text": "hello there", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Hi."), "{reply}");
    let sent = requests(&mock);
    let parent = sent
        .iter()
        .find(|r| first_user(r).contains("hello there"))
        .unwrap();
    assert!(
        offered(parent).contains(&"cron".to_string()),
        "the agent has cron"
    );
    let child: Vec<&Value> = sent
        .iter()
        .filter(|r| first_user(r).contains("SUB-TASK"))
        .collect();
    assert!(
        !offered(child[0]).contains(&"cron".to_string()),
        "a subagent has no cron"
    );
    let refused = child[1]["messages"].to_string();
    assert!(
        refused.contains("tool not allowed by policy: cron"),
        "the call was refused: {refused}"
    );

    // A job over HTTP, every hour, its results to that conversation.
    let (status, added) = status_json(
        &format!("{base}/v1/cron?user=alice"),
        Some(
            &json!({"name": "weather", "every": "1h", "message": "CRON-TASK: report the weather",
                     "session_key": "weather-room"}),
        ),
    );
    assert_eq!(status, 201, "{added}");
    let id = added["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(added["job"]["result_session"], "weather-room");
    // Bob sees none of it.
    let (_, bobs) = status_json(&format!("{base}/v1/cron?user=bob"), None);
    assert_eq!(bobs["jobs"], json!([]));
    let (status, _) = status_json(
        &format!("{base}/v1/cron/{id}/run?user=bob"),
        Some(&json!({})),
    );
    assert_eq!(status, 404);
    let (status, bad) = status_json(
        &format!("{base}/v1/cron?user=alice"),
        Some(&json!({"name": "bad", "cron": "0 9 * * *", "timezone": "Mars/Base", "message": "x"})),
    );
    assert_eq!(status, 400);
    assert!(bad["error"].to_string().contains("IANA"), "{bad}");
    // Issue 36 (4): a job cannot name a chat nobody has used yet: its first run would make
    // its user the owner, and the chat's real people would be told "session … is taken".
    let (status, squat) = status_json(
        &format!("{base}/v1/cron?user=bob"),
        Some(&json!({"name": "squat", "every": "1h", "message": "x",
                     "session_key": "telegram:group:-1001"})),
    );
    assert_eq!(status, 400, "{squat}");
    assert!(
        squat["error"]
            .to_string()
            .contains("not a stored conversation of yours"),
        "{squat}"
    );
    // `talon cron add` makes the same check (one function).
    let out = support::command(home.path())
        .args([
            "cron",
            "add",
            "squat",
            "--message",
            "x",
            "--every",
            "1h",
            "--user",
            "bob",
        ])
        .args(["--session", "telegram:group:-1001"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a stored conversation of yours"),
        "{out:?}"
    );

    // Its hour passes: the gateway's scheduler runs it once.
    make_due(home.path(), &id);
    let history = |base: &str| {
        let (_, runs) = status_json(&format!("{base}/v1/cron/{id}/runs?user=alice"), None);
        runs["runs"].as_array().cloned().unwrap_or_default()
    };
    until("the job runs", || !history(&base).is_empty());
    let runs = history(&base);
    assert_eq!(runs[0]["status"], "ok", "{runs:?}");
    assert!(runs[0]["result"].as_str().unwrap().contains("sunny"));
    let run_id = runs[0]["run_id"].as_str().unwrap().to_string();
    let (_, run) = status_json(&format!("{base}/v1/runs/{run_id}?user=alice"), None);
    assert_eq!(run["run"]["origin"], "cron", "{run}");
    assert_eq!(run["run"]["status"], "completed", "{run}");
    // The job's own run is not offered `cron` either.
    let job_request = requests(&mock)
        .into_iter()
        .find(|r| first_user(r).contains("CRON-TASK"))
        .unwrap();
    assert!(!offered(&job_request).contains(&"cron".to_string()));
    until("the result reaches the conversation", || {
        let (_, shown) = status_json(&format!("{base}/v1/sessions/weather-room?user=alice"), None);
        shown.to_string().contains("Noted the report.")
    });
    let (_, shown) = status_json(&format!("{base}/v1/sessions/weather-room?user=alice"), None);
    assert!(
        shown.to_string().contains("The weather is sunny."),
        "{shown}"
    );
    // Once: its next time is an hour on, and it does not run again meanwhile.
    std::thread::sleep(std::time::Duration::from_secs(6));
    assert_eq!(history(&base).len(), 1, "ran once");
    let (_, job) = status_json(&format!("{base}/v1/cron/weather?user=alice"), None);
    let next = job["job"]["next_run_at"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(next > now + 50 * 60_000, "next in about an hour: {job}");
    assert_eq!(job["job"]["last_status"], "ok");

    // The agent schedules a job itself: a wrong zone is explained, the job is the user's, its
    // results come to this conversation.
    let reply = post(
        &format!("{base}/v1/sessions/digest-room/messages"),
        &json!({"text": "schedule a digest", "user": "alice"}),
        &[],
    );
    assert!(reply.contains("Scheduled."), "{reply}");
    let told = requests(&mock)
        .into_iter()
        .rfind(|r| first_user(r).contains("schedule a digest"))
        .unwrap()["messages"]
        .to_string();
    assert!(
        told.contains("Mars/Base") && told.contains("IANA"),
        "{told}"
    );
    assert!(
        told.contains("scheduled: cron-") && told.contains("digest-room"),
        "{told}"
    );
    assert!(
        told.contains("cron 0 8 * * * (Europe/Berlin)"),
        "listed: {told}"
    );
    let (_, digest) = status_json(&format!("{base}/v1/cron/digest?user=alice"), None);
    assert_eq!(digest["job"]["session_key"], "digest-room", "{digest}");
    assert_eq!(digest["job"]["agent"], "default", "{digest}");
    let (status, _) = status_json(&format!("{base}/v1/cron/digest?user=bob"), None);
    assert_eq!(status, 404);

    // `talon cron` sees it, and asks for a forced run the gateway performs.
    let out = support::command(home.path())
        .args(["cron", "list", "--user", "alice"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(&id) && listed.contains("every 1h"),
        "{listed}"
    );
    let out = support::command(home.path())
        .args(["cron", "run", "weather", "--user", "alice"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    until("the forced run", || history(&base).len() == 2);
    // Changed over HTTP and with `talon cron update`.
    let (status, patched) = method_json(
        "PATCH",
        &format!("{base}/v1/cron/{id}?user=alice"),
        &json!({"every": "2h", "missed": "skip"}),
    );
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["job"]["interval_ms"], 7_200_000);
    assert_eq!(patched["job"]["missed"], "skip");
    let (status, refused) = method_json(
        "PATCH",
        &format!("{base}/v1/cron/{id}?user=alice"),
        &json!({"agent": "other"}),
    );
    assert_eq!(status, 400, "{refused}");
    let out = support::command(home.path())
        .args(["cron", "update", "weather", "--user", "alice", "--disable"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (_, job) = status_json(&format!("{base}/v1/cron/{id}?user=alice"), None);
    assert_eq!(job["job"]["enabled"], false, "{job}");
    assert_eq!(job["job"]["next_run_at"], 0, "{job}");
    let (status, _) = method_json(
        "DELETE",
        &format!("{base}/v1/cron/{id}?user=alice"),
        &json!({}),
    );
    assert_eq!(status, 200);
    let (status, _) = status_json(&format!("{base}/v1/cron/{id}/runs?user=alice"), None);
    assert_eq!(status, 404);
}

#[test]
fn two_gateways_on_one_database_run_each_due_job_once() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "cron");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Noted."}]},
            {"when": "FLEET-TASK", "turns": [{"text": "fleet job done", "delay_ms": 300}]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (gateway_home(&mock), gateway_home(&mock));
    let a = support::serve_in(home_a.path(), &env);
    let b = support::serve_in(home_b.path(), &env);
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    // Due at once (their time passed), added on A; both gateways hear of them.
    let jobs = 6;
    let mut ids = Vec::new();
    for i in 0..jobs {
        let (status, added) = status_json(
            &format!("{base_a}/v1/cron?user=alice"),
            Some(
                &json!({"name": format!("fleet {i}"), "at": "2020-01-01T00:00:00Z",
                         "message": format!("FLEET-TASK #{i}: count")}),
            ),
        );
        assert_eq!(status, 201, "{added}");
        ids.push(added["job"]["id"].as_str().unwrap().to_string());
    }
    let ran = |id: &str| {
        let (_, runs) = status_json(&format!("{base_b}/v1/cron/{id}/runs?user=alice"), None);
        runs["runs"].as_array().map_or(0, Vec::len)
    };
    until("every job ran", || ids.iter().all(|id| ran(id) >= 1));
    // Leases of a few seconds have passed since: nothing ran twice.
    std::thread::sleep(std::time::Duration::from_secs(4));
    for id in &ids {
        assert_eq!(ran(id), 1, "{id} ran once");
    }
    let sent = requests(&mock);
    for i in 0..jobs {
        let marker = format!("FLEET-TASK #{i}:");
        let asked = sent
            .iter()
            .filter(|r| first_user(r).contains(&marker))
            .count();
        assert_eq!(asked, 1, "job {i}'s agent ran once");
    }
    let (_, runs) = status_json(&format!("{base_a}/v1/runs?user=alice"), None);
    let cron_runs: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["origin"] == "cron")
        .collect();
    assert_eq!(cron_runs.len(), jobs);
    // An `at` job that ran is done, not rescheduled.
    let (_, job) = status_json(&format!("{base_a}/v1/cron/{}?user=alice", ids[0]), None);
    assert_eq!(
        (
            job["job"]["enabled"].clone(),
            job["job"]["next_run_at"].clone()
        ),
        (json!(false), json!(0))
    );
    drop((a, b));
}

#[test]
fn a_job_whose_gateway_is_killed_mid_run_is_finished_by_another_without_a_second_run() {
    let Some(url) = database_url() else { return };
    let schema = Schema::new(&url, "cronkill");
    let scratch = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        scratch.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Noted."}]},
            {"when": "CRON-SLOW", "turns": [
                {"text": "first attempt", "delay_ms": 60000},
                {"text": "slow result"}
            ]}
        ]}),
    );
    let env = schema.env();
    let (home_a, home_b) = (gateway_home(&mock), gateway_home(&mock));
    let mut a = support::serve_in(home_a.path(), &env);
    let base_a = format!("http://{}", a.addr);
    let (status, added) = status_json(
        &format!("{base_a}/v1/cron?user=alice"),
        Some(&json!({"name": "slow", "at": "2020-01-01T00:00:00Z", "message": "CRON-SLOW: count"})),
    );
    assert_eq!(status, 201, "{added}");
    let id = added["job"]["id"].as_str().unwrap().to_string();
    // A runs it and waits for its model: kill A there. The job is A's, with its run on it.
    until("A's run asks its model", || {
        requests(&mock)
            .iter()
            .any(|r| first_user(r).contains("CRON-SLOW"))
    });
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // As if A had died before writing its run's id on the job: B finds the run by the job.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut config = talon_store::StoreConfig::url(url.clone());
        config.schema = Some(schema.name.clone());
        let store = talon_store::Store::connect(&config).await.unwrap();
        let held = store.cron_job("alice", &id).await.unwrap().unwrap();
        assert!(held.run_id.starts_with("run-"), "A named its run: {held:?}");
        store
            .execute_admin("UPDATE cron_jobs SET run_id = ''")
            .await
            .unwrap();
    });
    // B starts later (nothing happens at its start-up): it claims the job once A's lease ran
    // out, finds A's run, which its supervisor resumes, and records that run's end.
    let b = support::serve_in(home_b.path(), &env);
    let base_b = format!("http://{}", b.addr);
    let history = || {
        let (_, runs) = status_json(&format!("{base_b}/v1/cron/{id}/runs?user=alice"), None);
        runs["runs"].as_array().cloned().unwrap_or_default()
    };
    until("B records the job's run", || !history().is_empty());
    std::thread::sleep(std::time::Duration::from_secs(3));
    let runs = history();
    assert_eq!(runs.len(), 1, "one run recorded: {runs:?}");
    assert_eq!(runs[0]["status"], "ok", "{runs:?}");
    assert!(runs[0]["result"].as_str().unwrap().contains("slow result"));
    let (_, all) = status_json(&format!("{base_b}/v1/runs?user=alice"), None);
    let cron_runs: Vec<&Value> = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["origin"] == "cron")
        .collect();
    assert_eq!(cron_runs.len(), 1, "no second run was started: {all}");
    assert_eq!(cron_runs[0]["id"], runs[0]["run_id"]);
    assert_eq!(cron_runs[0]["takeovers"], 1, "resumed once by B");
    drop(b);
}

#[test]
fn due_jobs_beyond_the_run_limit_wait_for_a_slot_instead_of_failing() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "Runs you started in the background have ended", "last": true,
             "turns": [{"text": "Noted."}]},
            {"when": "QUEUE-TASK", "turns": [{"text": "queued job done", "delay_ms": 1500}]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n[subagents]\nmax_concurrent_scheduled = 1\nlease_seconds = 1\n",
            mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let mut ids = Vec::new();
    for i in 0..2 {
        let (status, added) = status_json(
            &format!("{base}/v1/cron?user=alice"),
            Some(
                &json!({"name": format!("queued {i}"), "at": "2020-01-01T00:00:00Z",
                         "message": format!("QUEUE-TASK #{i}")}),
            ),
        );
        assert_eq!(status, 201, "{added}");
        ids.push(added["job"]["id"].as_str().unwrap().to_string());
    }
    let history = |id: &str| {
        let (_, runs) = status_json(&format!("{base}/v1/cron/{id}/runs?user=alice"), None);
        runs["runs"].as_array().cloned().unwrap_or_default()
    };
    until("both jobs ran", || {
        ids.iter().all(|id| !history(id).is_empty())
    });
    for id in &ids {
        let runs = history(id);
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(
            runs[0]["status"], "ok",
            "one slot: the second waited: {runs:?}"
        );
    }
    let (first, second) = (history(&ids[0]), history(&ids[1]));
    let (a, b) = (&first[0], &second[0]);
    let (earlier, later) = if a["started_at"].as_i64() < b["started_at"].as_i64() {
        (a, b)
    } else {
        (b, a)
    };
    assert!(
        later["started_at"].as_i64().unwrap() >= earlier["ended_at"].as_i64().unwrap() - 1000,
        "one at a time: {earlier} then {later}"
    );
}

//! Issue 24: background child runs from `talon chat`, in both provider formats: spawned in
//! parallel, each result announced to the parent exactly once, managed with the caller's own
//! scope (list, wait, cancel "all"/"last", steer).

use super::*;

/// The config of a chat whose agent talks to `mock` in `kind`'s format, with `extra` appended.
fn config(home: &std::path::Path, mock: &support::chat::Mock, kind: &str, extra: &str) {
    let base = if kind == "openai" {
        format!("{}/v1", mock.url)
    } else {
        mock.url.clone()
    };
    std::fs::write(
        home.join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"m\"\n{extra}"
        ),
    )
    .unwrap();
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
fn conversation(mock: &support::chat::Mock, marker: &str) -> Vec<Value> {
    requests(mock)
        .into_iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "user")
                .is_some_and(|m| m["content"].to_string().contains(marker))
        })
        .collect()
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
        config(home.path(), &mock, kind, "");
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

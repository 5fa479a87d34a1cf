//! The virtual filesystem: context files and memory routed to the store, for open and predefined
//! agents, through read_file / write_file / edit and Read / Write / Edit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall};
use talon_store::{AgentType, Store, StoreConfig};
use talon_tools::{BuiltinConfig, FsConfig};

struct Env {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    store: Store,
    pipeline: Pipeline,
}

async fn env(with_store: bool) -> Env {
    common::use_parse_helper();
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
        .await
        .unwrap();
    store
        .upsert_agent("open", AgentType::Open, "{}")
        .await
        .unwrap();
    store
        .upsert_agent(
            "open_rw",
            AgentType::Open,
            "{\"protected_files_writable\": true}",
        )
        .await
        .unwrap();
    store
        .upsert_agent(
            "pre",
            AgentType::Predefined,
            "{\"protected_files_writable\": true}",
        )
        .await
        .unwrap();
    for agent in ["open", "open_rw", "pre"] {
        store
            .set_agent_file(agent, "SOUL.md", &format!("{agent} soul"))
            .await
            .unwrap();
        store
            .set_agent_file(agent, "TOOLS.md", &format!("{agent} tools"))
            .await
            .unwrap();
    }
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        store: with_store.then(|| store.clone()),
        ..BuiltinConfig::default()
    };
    let pipeline = common::pipeline(&config);
    Env {
        _dir: dir,
        ws,
        store,
        pipeline,
    }
}

impl Env {
    async fn call(
        &self,
        agent: Option<&str>,
        user: Option<&str>,
        tool: &str,
        args: Value,
    ) -> (bool, String) {
        let mut ctx = common::context(&self.ws, "s");
        ctx.agent_key = agent.map(str::to_string);
        ctx.user = user.map(str::to_string);
        let out = self
            .pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await;
        (out.output.is_error, out.output.for_llm)
    }
}

#[tokio::test]
async fn context_files_table() {
    let e = env(true).await;
    // (agent, user, tool, args, expect_error, expected substring)
    let cases: Vec<(&str, &str, &str, Value, bool, &str)> = vec![
        (
            "open",
            "alice",
            "read_file",
            json!({"path": "SOUL.md"}),
            false,
            "open soul",
        ),
        (
            "open",
            "alice",
            "write_file",
            json!({"path": "SOUL.md", "content": "mine"}),
            true,
            "protected context file",
        ),
        (
            "open",
            "alice",
            "write_file",
            json!({"path": "TOOLS.md", "content": "alice tools"}),
            false,
            "saved for agent open and user alice",
        ),
        (
            "open",
            "alice",
            "read_file",
            json!({"path": "TOOLS.md"}),
            false,
            "alice tools",
        ),
        (
            "open",
            "bob",
            "read_file",
            json!({"path": "TOOLS.md"}),
            false,
            "open tools",
        ),
        (
            "open_rw",
            "alice",
            "Write",
            json!({"file_path": "SOUL.md", "content": "alice soul"}),
            false,
            "saved for agent open_rw and user alice",
        ),
        (
            "open_rw",
            "alice",
            "Read",
            json!({"file_path": "SOUL.md"}),
            false,
            "     1\talice soul",
        ),
        (
            "open_rw",
            "bob",
            "Read",
            json!({"file_path": "SOUL.md"}),
            false,
            "open_rw soul",
        ),
        (
            "pre",
            "alice",
            "write_file",
            json!({"path": "TOOLS.md", "content": "shared tools"}),
            true,
            "talon agents set-file pre TOOLS.md",
        ),
        (
            "pre",
            "bob",
            "read_file",
            json!({"path": "TOOLS.md"}),
            false,
            "pre tools",
        ),
        (
            "pre",
            "alice",
            "write_file",
            json!({"path": "USER.md", "content": "alice is a user"}),
            false,
            "and user alice",
        ),
        (
            "pre",
            "bob",
            "read_file",
            json!({"path": "USER.md"}),
            true,
            "USER.md does not exist yet",
        ),
        (
            "open",
            "alice",
            "write_file",
            json!({"path": "BOOTSTRAP.md", "content": "first steps"}),
            false,
            "saved",
        ),
        (
            "open",
            "alice",
            "read_file",
            json!({"path": "BOOTSTRAP.md"}),
            false,
            "first steps",
        ),
        (
            "open",
            "alice",
            "write_file",
            json!({"path": "BOOTSTRAP.md", "content": ""}),
            false,
            "deleted",
        ),
        (
            "open",
            "alice",
            "read_file",
            json!({"path": "BOOTSTRAP.md"}),
            true,
            "does not exist yet",
        ),
        (
            "open",
            "alice",
            "edit",
            json!({"path": "TOOLS.md", "old_string": "alice", "new_string": "ALICE"}),
            false,
            "saved",
        ),
        (
            "open",
            "alice",
            "read_file",
            json!({"path": "TOOLS.md"}),
            false,
            "ALICE tools",
        ),
    ];
    for (agent, user, tool, args, expect_error, expected) in cases {
        let (is_error, text) = e.call(Some(agent), Some(user), tool, args.clone()).await;
        assert_eq!(
            is_error, expect_error,
            "{agent}/{user} {tool} {args}: {text}"
        );
        assert!(
            text.contains(expected),
            "{agent}/{user} {tool} {args}: expected {expected:?} in {text:?}"
        );
    }
    assert!(
        !e.ws.join("TOOLS.md").exists(),
        "routed writes never touch the disk"
    );
}

#[tokio::test]
async fn memory_paths_route_to_memory_documents() {
    let e = env(true).await;
    let (err, text) = e
        .call(
            Some("open"),
            None,
            "write_file",
            json!({"path": "MEMORY.md", "content": "global: the sky is blue"}),
        )
        .await;
    assert!(!err, "{text}");
    e.call(
        Some("open"),
        Some("alice"),
        "write_file",
        json!({"path": "memory/notes.md", "content": "alice likes tea"}),
    )
    .await;
    assert!(
        e.call(
            Some("open"),
            Some("bob"),
            "read_file",
            json!({"path": "MEMORY.md"})
        )
        .await
        .1
        .contains("the sky is blue"),
        "global fallback"
    );
    let (err, text) = e
        .call(
            Some("open"),
            Some("bob"),
            "read_file",
            json!({"path": "memory/notes.md"}),
        )
        .await;
    assert!(
        err && text.contains("does not exist yet"),
        "alice's memory is hers: {text}"
    );
    let (err, text) = e
        .call(
            Some("open"),
            Some("alice"),
            "Edit",
            json!({"file_path": "memory/notes.md", "old_string": "tea", "new_string": "green tea"}),
        )
        .await;
    assert!(!err, "{text}");
    let hits = e
        .store
        .search_memory("open", "alice", "green", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "writes re-index: {hits:?}");
    let (err, text) = e
        .call(
            Some("open"),
            Some("alice"),
            "write_file",
            json!({"path": "memory/notes.md", "content": "\nmore", "append": true}),
        )
        .await;
    assert!(!err, "{text}");
    assert_eq!(
        e.store
            .memory("open", "alice", "memory/notes.md")
            .await
            .unwrap()
            .unwrap()
            .content,
        "alice likes green tea\nmore"
    );
}

#[tokio::test]
async fn unknown_agents_are_refused_and_missing_stores_use_the_disk() {
    let e = env(true).await;
    std::fs::write(e.ws.join("SOUL.md"), "disk soul").unwrap();
    // A context file of an agent the store does not know is an error, never the disk's copy.
    let (err, text) = e
        .call(
            Some("nobody"),
            None,
            "read_file",
            json!({"path": "SOUL.md"}),
        )
        .await;
    assert!(err, "{text}");
    assert!(
        text.contains("\"nobody\" does not exist") && text.contains("talon agents create nobody"),
        "{text}"
    );
    // No agent means the default agent; once it exists, its (empty) store copy is used.
    let (err, text) = e
        .call(
            None,
            None,
            "write_file",
            json!({"path": "MEMORY.md", "content": "x"}),
        )
        .await;
    assert!(err && text.contains("\"default\" does not exist"), "{text}");
    e.store.ensure_agent("default").await.unwrap();
    let (err, text) = e
        .call(
            None,
            None,
            "write_file",
            json!({"path": "MEMORY.md", "content": "kept"}),
        )
        .await;
    assert!(!err, "{text}");
    assert!(
        !e.ws.join("MEMORY.md").exists(),
        "MEMORY.md went to the store"
    );
    assert_eq!(
        e.store
            .memory("default", "", "MEMORY.md")
            .await
            .unwrap()
            .map(|m| m.content),
        Some("kept".to_string())
    );
    // Without a store (a library user wiring tools by hand), files are plain files.
    let without = env(false).await;
    std::fs::write(without.ws.join("SOUL.md"), "disk soul 2").unwrap();
    assert!(
        without
            .call(Some("open"), None, "read_file", json!({"path": "SOUL.md"}))
            .await
            .1
            .contains("disk soul 2")
    );
}

#[tokio::test]
async fn concurrent_context_file_edits_all_land() {
    let e = Arc::new(env(true).await);
    e.store
        .set_agent_file("open", "TOOLS.md", "start\n")
        .await
        .unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let e = Arc::clone(&e);
            tokio::spawn(async move {
                let args = json!({"path": "TOOLS.md", "old_string": "start\n", "new_string": format!("start\nline {i}\n")});
                e.call(Some("open"), None, "edit", args).await
            })
        })
        .collect();
    for h in handles {
        let (err, text) = h.await.unwrap();
        assert!(!err, "{text}");
    }
    let content = e
        .store
        .agent_file("open", "TOOLS.md")
        .await
        .unwrap()
        .unwrap();
    for i in 0..8 {
        assert!(
            content.contains(&format!("line {i}\n")),
            "edit {i} lost: {content}"
        );
    }
}

mod routing;

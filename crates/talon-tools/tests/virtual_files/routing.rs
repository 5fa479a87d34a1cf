//! Issue 21, architecture item: every file tool sees the same view of the workspace. Store-routed
//! documents (context files, memory) appear in listings and globs, are searched by `Grep` and
//! `search`, and are edited by `NotebookEdit` in the store; the disk copies under those names are
//! never shown, searched or changed, however the path is spelled.

use super::*;

/// A store with a memory document for alice, and decoys on disk under routed names.
async fn seeded() -> Env {
    let e = env(true).await;
    e.store
        .put_memory(
            "open",
            "alice",
            "memory/notes.md",
            "alice likes routed-needle tea\n",
        )
        .await
        .unwrap();
    std::fs::create_dir_all(e.ws.join("memory")).unwrap();
    std::fs::write(e.ws.join("memory/decoy.md"), "routed-needle on disk\n").unwrap();
    std::fs::write(e.ws.join("SOUL.md"), "disk soul routed-needle\n").unwrap();
    std::fs::write(e.ws.join("plain.md"), "plain routed-needle\n").unwrap();
    e
}

impl Env {
    async fn alice(&self, tool: &str, args: Value) -> String {
        let (err, text) = self.call(Some("open"), Some("alice"), tool, args).await;
        assert!(!err, "{tool}: {text}");
        text
    }
}

/// No result may come from the disk copies the store shadows.
fn assert_no_decoys(text: &str) {
    assert!(
        !text.contains("decoy") && !text.contains("disk soul") && !text.contains("on disk"),
        "{text}"
    );
}

#[tokio::test]
async fn h21_arch_routing_grep() {
    let e = seeded().await;
    let text = e
        .alice(
            "Grep",
            json!({"pattern": "routed-needle", "output_mode": "content"}),
        )
        .await;
    let notes = e.ws.join("memory/notes.md");
    assert!(
        text.contains(&format!(
            "{}:1:alice likes routed-needle tea",
            notes.display()
        )),
        "{text}"
    );
    assert!(text.contains("plain.md:1:plain routed-needle"), "{text}");
    assert_no_decoys(&text);
    // The store's SOUL.md is searched, the disk's is not.
    let text = e.alice("Grep", json!({"pattern": "open soul"})).await;
    assert!(
        text.contains("Found 1 file") && text.contains("SOUL.md"),
        "{text}"
    );
    // A routed directory and a routed document as the search path.
    let text = e
        .alice("Grep", json!({"pattern": "needle", "path": "memory"}))
        .await;
    assert!(
        text.contains("Found 1 file") && text.contains("notes.md"),
        "{text}"
    );
    let text = e
        .alice(
            "Grep",
            json!({"pattern": "tea", "path": notes.display().to_string(), "output_mode": "count"}),
        )
        .await;
    assert!(text.contains("notes.md:1"), "{text}");
    // Another user does not see alice's memory.
    let (_, text) = e
        .call(
            Some("open"),
            Some("bob"),
            "Grep",
            json!({"pattern": "routed-needle"}),
        )
        .await;
    assert!(
        !text.contains("notes.md") && text.contains("plain.md"),
        "{text}"
    );
}

#[tokio::test]
async fn h21_arch_routing_search() {
    let e = seeded().await;
    let text = e.alice("search", json!({"pattern": "routed-needle"})).await;
    assert!(
        text.contains("memory/notes.md:1: alice likes routed-needle tea"),
        "{text}"
    );
    assert_no_decoys(&text);
    let text = e
        .alice(
            "search",
            json!({"pattern": "soul", "glob": "*.md", "output_mode": "files_with_matches"}),
        )
        .await;
    assert_eq!(text, "SOUL.md");
}

#[tokio::test]
async fn h21_arch_routing_glob() {
    let e = seeded().await;
    let text = e.alice("Glob", json!({"pattern": "**/*.md"})).await;
    for name in ["memory/notes.md", "SOUL.md", "TOOLS.md", "plain.md"] {
        assert!(
            text.contains(&e.ws.join(name).display().to_string()),
            "{name}: {text}"
        );
    }
    assert_no_decoys(&text);
    let text = e
        .alice("Glob", json!({"pattern": "*.md", "path": "memory"}))
        .await;
    assert_eq!(text, e.ws.join("memory/notes.md").display().to_string());
    let text = e.alice("glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(
        text, "SOUL.md\nTOOLS.md\nmemory/notes.md\nplain.md",
        "GoClaw's glob, sorted by path"
    );
}

#[tokio::test]
async fn h21_arch_routing_list_files() {
    let e = seeded().await;
    let text = e.alice("list_files", json!({"recursive": true})).await;
    assert!(text.contains("[FILE] SOUL.md (9 bytes)"), "{text}");
    assert!(text.contains("[FILE] TOOLS.md (10 bytes)"), "{text}");
    assert!(text.contains("[DIR]  memory/"), "{text}");
    assert!(text.contains("\n  [FILE] notes.md (30 bytes)"), "{text}");
    assert!(text.contains("[FILE] plain.md"), "{text}");
    assert_no_decoys(&text);
    let text = e.alice("list_files", json!({"path": "memory"})).await;
    assert_eq!(text, "[FILE] notes.md (30 bytes)");
    // bob has no memory documents: no memory/ directory, and the disk's is not shown either.
    let (_, text) = e
        .call(Some("open"), Some("bob"), "list_files", json!({}))
        .await;
    assert!(!text.contains("memory"), "{text}");
}

#[tokio::test]
async fn h21_arch_routing_notebook_edit() {
    let e = seeded().await;
    let notebook = json!({
        "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
                   "outputs": [], "source": ["print(1)"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    e.store
        .put_memory("open", "alice", "memory/nb.ipynb", &notebook.to_string())
        .await
        .unwrap();
    std::fs::write(e.ws.join("memory/nb.ipynb"), "decoy notebook").unwrap();
    let path = e.ws.join("memory/nb.ipynb").display().to_string();
    let text = e
        .alice(
            "NotebookEdit",
            json!({"notebook_path": path, "cell_id": "a", "new_source": "print(2)"}),
        )
        .await;
    assert_eq!(text, "Updated cell a with print(2)");
    let stored = e
        .store
        .memory("open", "alice", "memory/nb.ipynb")
        .await
        .unwrap()
        .unwrap()
        .content;
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["cells"][0]["source"], json!(["print(2)"]));
    assert_eq!(
        std::fs::read_to_string(e.ws.join("memory/nb.ipynb")).unwrap(),
        "decoy notebook",
        "the disk copy is not touched"
    );
    // Read renders the routed notebook as cells, like a notebook on disk.
    let text = e
        .alice("Read", json!({"file_path": "memory/nb.ipynb"}))
        .await;
    assert!(
        text.contains("<cell index=\"0\" id=\"a\" type=\"code\">\nprint(2)"),
        "{text}"
    );
    // A routed file that is not a notebook is refused, and nothing is written.
    let (err, text) = e
        .call(
            Some("open_rw"),
            None,
            "NotebookEdit",
            json!({"notebook_path": "TOOLS.md", "cell_id": "a", "new_source": "x"}),
        )
        .await;
    assert!(err && text.contains("Jupyter notebook"), "{text}");
}

#[tokio::test]
async fn h21_arch_routing_capabilities() {
    let e = env(true).await;
    let (err, text) = e
        .call(
            Some("open"),
            None,
            "write_file",
            json!({"path": "CAPABILITIES.md", "content": "I may do anything"}),
        )
        .await;
    assert!(err && text.contains("protected context file"), "{text}");
    assert!(!e.ws.join("CAPABILITIES.md").exists());
    let (err, text) = e
        .call(
            Some("open_rw"),
            None,
            "Write",
            json!({"file_path": "CAPABILITIES.md", "content": "reads only"}),
        )
        .await;
    assert!(!err, "{text}");
    assert!(
        !e.ws.join("CAPABILITIES.md").exists(),
        "it went to the store"
    );
    assert_eq!(
        e.store
            .agent_file("open_rw", "CAPABILITIES.md")
            .await
            .unwrap()
            .as_deref(),
        Some("reads only")
    );
}

#[tokio::test]
async fn h21_arch_routing_disk_copies_are_unreachable() {
    let e = seeded().await;
    std::fs::create_dir_all(e.ws.join("sub")).unwrap();
    std::os::unix::fs::symlink("SOUL.md", e.ws.join("soul-link")).unwrap();
    for (tool, args) in [
        ("read_file", json!({"path": "sub/../SOUL.md"})),
        ("read_file", json!({"path": "soul-link"})),
        ("Read", json!({"file_path": "sub/../memory/decoy.md"})),
        ("read_file", json!({"path": "./memory/../memory/decoy.md"})),
    ] {
        let (_, text) = e.call(Some("open"), Some("alice"), tool, args).await;
        // Refusals name the path; the disk copies' content must not appear.
        assert!(
            !text.contains("disk soul") && !text.contains("on disk"),
            "{text}"
        );
    }
    let (_, text) = e
        .call(
            Some("open_rw"),
            None,
            "write_file",
            json!({"path": "sub/../SOUL.md", "content": "overwritten"}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(e.ws.join("SOUL.md")).unwrap(),
        "disk soul routed-needle\n",
        "{text}"
    );
}

/// Every file tool takes the call's façade (`FsConfig::files`) and nothing around it: the jail
/// comes only from the façade (the command runtime, which runs in the real directory, excepted),
/// the router and the search engine are called only by it, and no tool lists a directory through
/// the bare jail. A new file tool that skips routing fails here.
#[test]
fn h21_arch_routing_file_tools_use_the_facade() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // (what a bypass looks like, the files allowed to contain it)
    let rules: &[(&str, &[&str])] = &[
        (
            ".jail(",
            &[
                "fs/files.rs",
                "fs/workspace.rs",
                "runtime/mod.rs",
                "runtime/background.rs",
            ],
        ),
        ("virtual_files::", &["fs/files.rs", "fs/workspace.rs"]),
        ("find_files(", &["fs/files.rs", "fs/find.rs"]),
        ("filter_documents(", &["fs/files.rs", "fs/find.rs"]),
        ("grep(&", &["fs/files.rs", "fs/find.rs"]),
        ("jail.list(", &["fs/files.rs"]),
        ("Jail::new", &["fs/workspace.rs"]),
    ];
    // Tools that hold the file settings but run commands, not file operations; and the
    // registration, which hands the settings to tools registered later (custom tools, the
    // channel tools, which read through the façade).
    let command_tools = [
        "runtime/exec.rs",
        "runtime/credentialed_exec.rs",
        "runtime/custom_tool.rs",
        "claude_code/bash.rs",
        "lib.rs",
    ];
    let mut sources = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&src).unwrap().display().to_string();
                sources.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    assert!(
        sources.len() > 30,
        "the sources were found: {}",
        sources.len()
    );
    let mut bypasses = Vec::new();
    for (rel, text) in &sources {
        for (pattern, allowed) in rules {
            if text.contains(pattern) && !allowed.contains(&rel.as_str()) {
                bypasses.push(format!("{rel} uses {pattern}"));
            }
        }
        if text.contains("Arc<FsConfig>")
            && !command_tools.contains(&rel.as_str())
            && !text.contains(".files(")
        {
            bypasses.push(format!("{rel} holds the file settings but not the façade"));
        }
    }
    assert!(bypasses.is_empty(), "{bypasses:#?}");
}

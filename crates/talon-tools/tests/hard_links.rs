//! The hard-link policy is the same for every operation on file content: refused by default
//! (search footers count what was skipped), allowed with `[fs] allow_hard_links = true`, and in
//! both cases a write never changes the link's other name outside the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall, ToolOutput};
use talon_tools::{BuiltinConfig, FsConfig};

const SECRET: &str = "SECRET-outside-the-workspace";

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    pipeline: Pipeline,
}

/// A workspace whose files h.txt, h.pdf, h.png and h.ipynb are hard links to files outside it.
fn env(allow_hard_links: bool) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, outside) = (root.join("ws"), root.join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let notebook = json!({
        "cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": null,
                   "outputs": [], "source": [format!("print('{SECRET}')")]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    let files: [(&str, Vec<u8>); 4] = [
        ("h.txt", format!("line one\n{SECRET}\n").into_bytes()),
        ("h.pdf", common::pdf(1)),
        ("h.png", b"\x89PNG\r\n\x1a\nfakepng".to_vec()),
        ("h.ipynb", serde_json::to_vec_pretty(&notebook).unwrap()),
    ];
    for (name, content) in files {
        std::fs::write(outside.join(name), content).unwrap();
        std::fs::hard_link(outside.join(name), ws.join(name)).unwrap();
    }
    std::fs::write(ws.join("plain.txt"), "nothing to see\n").unwrap();
    let mut fs = FsConfig::new(vec![], vec![]);
    fs.allow_hard_links = allow_hard_links;
    let pipeline = common::pipeline(&BuiltinConfig {
        fs,
        ..BuiltinConfig::default()
    });
    Env {
        _dir: dir,
        ws,
        outside,
        pipeline,
    }
}

impl Env {
    /// One call in one session (Read-before-Edit state carries over between calls).
    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let ctx = common::context(&self.ws, "hard-links");
        self.pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await
            .output
    }

    fn abs(&self, name: &str) -> String {
        self.ws.join(name).display().to_string()
    }

    /// Makes the workspace's `name` a hard link to the outside file again.
    fn relink(&self, name: &str) {
        std::fs::remove_file(self.ws.join(name)).unwrap();
        std::fs::hard_link(self.outside.join(name), self.ws.join(name)).unwrap();
    }

    fn outside(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.outside.join(name)).unwrap()
    }
}

fn refused(out: &ToolOutput, what: &str) {
    assert!(out.is_error, "{what}: {}", out.for_llm);
    assert!(
        out.for_llm.contains("is a hard link") && out.for_llm.contains("allow_hard_links = true"),
        "{what}: {}",
        out.for_llm
    );
    assert!(!out.for_llm.contains(SECRET), "{what}: {}", out.for_llm);
}

fn skipped_in_footer(out: &ToolOutput, what: &str) {
    assert!(!out.is_error, "{what}: {}", out.for_llm);
    assert!(!out.for_llm.contains(SECRET), "{what}: {}", out.for_llm);
    assert!(
        out.for_llm
            .contains("1 file skipped because it is a hard link")
            || out
                .for_llm
                .contains("files skipped because they are hard links"),
        "{what}: {}",
        out.for_llm
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("hard link") && w.contains("allow_hard_links")),
        "{what}: {:?}",
        out.warnings
    );
}

#[tokio::test]
async fn every_operation_refuses_hard_links_by_default() {
    let e = env(false);
    refused(
        &e.call("read_file", json!({"path": "h.txt"})).await,
        "read_file",
    );
    refused(
        &e.call("Read", json!({"file_path": e.abs("h.txt")})).await,
        "Read text",
    );
    refused(
        &e.call("Read", json!({"file_path": e.abs("h.pdf")})).await,
        "Read PDF",
    );
    refused(
        &e.call("Read", json!({"file_path": e.abs("h.png")})).await,
        "Read image",
    );
    refused(
        &e.call("Read", json!({"file_path": e.abs("h.ipynb")})).await,
        "Read notebook",
    );
    skipped_in_footer(
        &e.call("search", json!({"pattern": "SECRET"})).await,
        "search",
    );
    for mode in ["content", "files_with_matches", "count"] {
        skipped_in_footer(
            &e.call("Grep", json!({"pattern": "SECRET", "output_mode": mode}))
                .await,
            &format!("Grep {mode}"),
        );
    }
    refused(
        &e.call(
            "edit",
            json!({"path": "h.txt", "old_string": "line one", "new_string": "changed"}),
        )
        .await,
        "edit",
    );
    refused(
        &e.call(
            "write_file",
            json!({"path": "h.txt", "content": "replaced"}),
        )
        .await,
        "write_file",
    );
    // Claude Code's editors need a Read first, which was refused: they refuse too.
    for (tool, args) in [
        (
            "Edit",
            json!({"file_path": e.abs("h.txt"), "old_string": "line one", "new_string": "x"}),
        ),
        (
            "Write",
            json!({"file_path": e.abs("h.txt"), "content": "replaced"}),
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": e.abs("h.ipynb"), "cell_id": "c1", "new_source": "x"}),
        ),
    ] {
        let out = e.call(tool, args).await;
        assert!(out.is_error, "{tool}: {}", out.for_llm);
    }
    // Nothing changed on either side.
    assert!(
        String::from_utf8(e.outside("h.txt"))
            .unwrap()
            .contains(SECRET)
    );
    assert_eq!(
        std::fs::read(e.ws.join("h.txt")).unwrap(),
        e.outside("h.txt")
    );
    assert!(
        String::from_utf8(e.outside("h.ipynb"))
            .unwrap()
            .contains(SECRET)
    );
}

#[tokio::test]
async fn every_operation_works_when_hard_links_are_allowed() {
    let e = env(true);
    let out = e.call("read_file", json!({"path": "h.txt"})).await;
    assert!(
        !out.is_error && out.for_llm.contains(SECRET),
        "{}",
        out.for_llm
    );
    let out = e.call("Read", json!({"file_path": e.abs("h.txt")})).await;
    assert!(
        !out.is_error && out.for_llm.contains(SECRET),
        "{}",
        out.for_llm
    );
    let out = e.call("Read", json!({"file_path": e.abs("h.pdf")})).await;
    assert!(
        !out.is_error && out.for_llm.contains("This is page 1"),
        "{}",
        out.for_llm
    );
    let out = e.call("Read", json!({"file_path": e.abs("h.png")})).await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert_eq!(out.media.len(), 1);
    let out = e.call("search", json!({"pattern": "SECRET"})).await;
    assert!(out.for_llm.contains(SECRET), "{}", out.for_llm);
    assert!(!out.for_llm.contains("skipped"), "{}", out.for_llm);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let out = e
        .call(
            "Grep",
            json!({"pattern": "SECRET", "output_mode": "content"}),
        )
        .await;
    assert!(out.for_llm.contains(SECRET), "{}", out.for_llm);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);

    // Edits and writes replace the workspace's name; the outside name keeps its content.
    let edits: [(&str, Value, &str); 4] = [
        (
            "edit",
            json!({"path": "h.txt", "old_string": "line one", "new_string": "edited"}),
            "edited\n",
        ),
        (
            "write_file",
            json!({"path": "h.txt", "content": "written"}),
            "written",
        ),
        (
            "Edit",
            json!({"file_path": e.abs("h.txt"), "old_string": "line one", "new_string": "Edited"}),
            "Edited\n",
        ),
        (
            "Write",
            json!({"file_path": e.abs("h.txt"), "content": "Written"}),
            "Written",
        ),
    ];
    for (tool, args, starts) in edits {
        e.relink("h.txt");
        let out = e.call("Read", json!({"file_path": e.abs("h.txt")})).await;
        assert!(!out.is_error, "{}", out.for_llm);
        let out = e.call(tool, args).await;
        assert!(!out.is_error, "{tool}: {}", out.for_llm);
        let ws_text = std::fs::read_to_string(e.ws.join("h.txt")).unwrap();
        assert!(ws_text.starts_with(starts), "{tool}: {ws_text}");
        assert_eq!(
            String::from_utf8(e.outside("h.txt")).unwrap(),
            format!("line one\n{SECRET}\n"),
            "{tool} changed the outside name"
        );
    }

    let out = e.call("Read", json!({"file_path": e.abs("h.ipynb")})).await;
    assert!(!out.is_error, "{}", out.for_llm);
    let out = e
        .call(
            "NotebookEdit",
            json!({"notebook_path": e.abs("h.ipynb"), "cell_id": "c1", "new_source": "print('hi')"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    let nb = std::fs::read_to_string(e.ws.join("h.ipynb")).unwrap();
    assert!(nb.contains("print('hi')"), "{nb}");
    assert!(
        String::from_utf8(e.outside("h.ipynb"))
            .unwrap()
            .contains(SECRET)
    );
}

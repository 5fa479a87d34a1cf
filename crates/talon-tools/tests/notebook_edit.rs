//! NotebookEdit: replace / insert / delete by cell_id, through the pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry, ToolCall};

async fn call(p: &Pipeline, ws: &std::path::Path, tool: &str, args: Value) -> (bool, String) {
    let mut ctx = CallContext::new("s");
    ctx.workspace = Some(ws.to_path_buf());
    ctx.permission_mode = PermissionMode::BypassPermissions;
    let out = p.call(Arc::new(ctx), ToolCall::new(tool, args)).await;
    (out.output.is_error, out.output.for_llm)
}

#[tokio::test]
async fn replace_insert_delete() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let nb_path = ws.join("nb.ipynb");
    let notebook = json!({
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Intro\n"]},
            {"cell_type": "code", "id": "calc", "metadata": {"tags": ["keep"]}, "execution_count": 3,
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["4\n"]}], "source": ["print(2+2)"]}
        ],
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5
    });
    std::fs::write(&nb_path, serde_json::to_string_pretty(&notebook).unwrap()).unwrap();
    std::fs::write(ws.join("plain.txt"), "x").unwrap();
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default()).unwrap();
    let p = Pipeline::builder(registry)
        .rate_limiter(None)
        .build()
        .unwrap();
    let path = nb_path.display().to_string();

    let (err, text) = call(
        &p,
        &ws,
        "NotebookEdit",
        json!({"notebook_path": path, "cell_id": "calc", "new_source": "x"}),
    )
    .await;
    assert!(err);
    assert_eq!(
        text,
        "File has not been read yet. Read it first before writing to it."
    );
    call(&p, &ws, "Read", json!({"file_path": path})).await;

    let (err, text) = call(
        &p,
        &ws,
        "NotebookEdit",
        json!({"notebook_path": path, "cell_id": "calc", "new_source": "print(3+3)\nprint(1)"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(text, "Updated cell calc with print(3+3)\nprint(1)");
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&nb_path).unwrap()).unwrap();
    assert_eq!(
        nb["cells"][1]["source"],
        json!(["print(3+3)\n", "print(1)"])
    );
    assert_eq!(
        nb["cells"][1]["outputs"],
        json!([]),
        "stale outputs are cleared"
    );
    assert_eq!(
        nb["cells"][1]["metadata"]["tags"],
        json!(["keep"]),
        "other fields are kept"
    );
    assert_eq!(nb["metadata"]["kernelspec"]["name"], "python3");

    let (err, text) = call(&p, &ws, "NotebookEdit", json!({"notebook_path": path, "cell_id": "intro", "new_source": "y", "edit_mode": "insert"})).await;
    assert!(err);
    assert_eq!(text, "Cell type is required when using edit_mode=insert.");
    let (err, text) = call(&p, &ws, "NotebookEdit", json!({"notebook_path": path, "cell_id": "intro", "new_source": "## Setup", "edit_mode": "insert", "cell_type": "markdown"})).await;
    assert!(!err, "{text}");
    let (_, text2) = call(&p, &ws, "NotebookEdit", json!({"notebook_path": path, "new_source": "import os", "edit_mode": "insert", "cell_type": "code"})).await;
    assert!(text2.starts_with("Inserted cell "), "{text2}");
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&nb_path).unwrap()).unwrap();
    let kinds: Vec<&str> = nb["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cell_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec!["code", "markdown", "markdown", "code"],
        "{text}"
    );
    assert_eq!(nb["cells"][2]["source"], json!(["## Setup"]));

    let (err, text) = call(
        &p,
        &ws,
        "NotebookEdit",
        json!({"notebook_path": path, "cell_id": "intro", "new_source": "", "edit_mode": "delete"}),
    )
    .await;
    assert!(!err, "{text}");
    assert_eq!(text, "Deleted cell intro");
    let (err, text) = call(
        &p,
        &ws,
        "NotebookEdit",
        json!({"notebook_path": path, "cell_id": "nope", "new_source": "z"}),
    )
    .await;
    assert!(err);
    assert_eq!(text, "Cell with ID \"nope\" not found in notebook.");

    let raw = std::fs::read_to_string(&nb_path).unwrap();
    assert!(
        raw.starts_with("{\n \"cells\": ["),
        "Jupyter's one-space indent and key order: {}",
        &raw[..40]
    );

    let (err, text) = call(&p, &ws, "NotebookEdit", json!({"notebook_path": ws.join("plain.txt").display().to_string(), "cell_id": "a", "new_source": "z"})).await;
    assert!(err);
    assert_eq!(
        text,
        "File must be a Jupyter notebook (.ipynb file). For editing other file types, use the Edit tool."
    );
}

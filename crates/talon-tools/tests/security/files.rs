//! Security regressions of the file tools (issue 21), through the pipeline, in both dialects:
//! `h21_NN_…`, NN being the item of the review. The rules live in the jail (`talon_fs`); these
//! tests show every tool reaches them.

use std::os::unix::fs::symlink;
use std::sync::Arc;

use serde_json::json;
use talon_tools::{BuiltinConfig, FsConfig};

use crate::common;

type Env = common::Workspace;

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        store: None,
        ..BuiltinConfig::default()
    };
    Env::new(dir, &config)
}

/// Issue 21 item 4: every file tool refuses the paths the sandbox keeps read-only, in both
/// dialects and through symlinks, and says what and why.
#[tokio::test]
async fn h21_04_file_tools_refuse_protected_paths() {
    let env = env();
    env.write(".git/config", "[core]\n");
    env.write(".git/hooks/README", "hooks\n");
    env.write(".claude/settings.json", "{}\n");
    env.write(".bashrc", "# rc\n");
    let notebook = json!({"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "outputs": [],
        "source": ["1"], "execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    env.write(".vscode/nb.ipynb", notebook.to_string());
    symlink(".git/hooks", env.ws().join("h")).unwrap();
    let protected = |out: String| {
        assert!(out.contains("is protected:"), "{out}");
        assert!(out.contains("ask the user"), "{out}");
    };
    protected(
        env.err(
            "edit",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = touch pwned"}),
        )
        .await,
    );
    protected(
        env.err(
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}),
        )
        .await,
    );
    protected(
        env.err(
            "write_file",
            json!({"path": "h/post-checkout", "content": "x"}),
        )
        .await,
    );
    protected(
        env.err(
            "write_file",
            json!({"path": ".bashrc", "content": "touch pwned\n", "append": true}),
        )
        .await,
    );
    protected(
        env.err(
            "Write",
            json!({"file_path": env.abs(".mcp.json"), "content": "{\"mcpServers\": {}}"}),
        )
        .await,
    );
    let settings = env.abs(".claude/settings.json");
    env.ok("Read", json!({"file_path": settings})).await;
    protected(
        env.err(
            "Edit",
            json!({"file_path": settings, "old_string": "{}", "new_string": "{\"hooks\": {}}"}),
        )
        .await,
    );
    protected(
        env.err(
            "Write",
            json!({"file_path": settings, "content": "{\"x\": 1}"}),
        )
        .await,
    );
    env.ok("Read", json!({"file_path": env.abs(".bashrc")}))
        .await;
    protected(
        env.err(
            "Edit",
            json!({"file_path": env.abs(".bashrc"), "old_string": "# rc", "new_string": "touch pwned"}),
        )
        .await,
    );
    let nb = env.abs(".vscode/nb.ipynb");
    env.ok("Read", json!({"file_path": nb})).await;
    protected(
        env.err(
            "NotebookEdit",
            json!({"notebook_path": nb, "cell_id": "a", "new_source": "2"}),
        )
        .await,
    );
    assert_eq!(env.read(".git/config"), "[core]\n");
    assert_eq!(env.read(".claude/settings.json"), "{}\n");
    assert_eq!(env.read(".bashrc"), "# rc\n");
    assert!(env.read(".vscode/nb.ipynb").contains("\"1\""));
    for missing in [
        ".git/hooks/pre-commit",
        ".git/hooks/post-checkout",
        ".mcp.json",
    ] {
        assert!(!env.ws().join(missing).exists(), "{missing}");
    }
    // Reading them stays allowed.
    assert!(
        env.ok("read_file", json!({"path": ".git/config"}))
            .await
            .contains("[core]")
    );
}

/// Issue 21 item 11: a FIFO in the workspace (here with a writer attached and data waiting)
/// must not block or exhaust a file tool: each returns an error at once. The timeout only
/// turns a hang into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h21_11_a_fifo_never_blocks_a_file_tool() {
    use std::io::Write;
    let env = Arc::new(env());
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o644);
    for name in ["pipe", "pipe.ipynb"] {
        nix::unistd::mkfifo(&env.ws().join(name), mode).unwrap();
    }
    // A writer attached (O_RDWR never blocks on a FIFO) with data in the pipe.
    let mut writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(env.ws().join("pipe"))
        .unwrap();
    writer.write_all(&[b'x'; 4096]).unwrap();
    let pipe = env.abs("pipe");
    let calls = [
        ("read_file", json!({"path": "pipe"})),
        ("Read", json!({"file_path": pipe})),
        (
            "edit",
            json!({"path": "pipe", "old_string": "x", "new_string": "y"}),
        ),
        (
            "write_file",
            json!({"path": "pipe", "content": "y", "append": true}),
        ),
        ("Grep", json!({"pattern": "x", "path": pipe})),
        (
            "NotebookEdit",
            json!({"notebook_path": env.abs("pipe.ipynb"), "cell_id": "a", "new_source": "y"}),
        ),
    ];
    for (tool, args) in calls {
        // On a task of its own: a tool blocking its thread must not stop the timeout.
        let call = tokio::spawn({
            let env = Arc::clone(&env);
            async move { env.call(tool, args).await }
        });
        let out = tokio::time::timeout(std::time::Duration::from_secs(20), call)
            .await
            .unwrap_or_else(|_| panic!("{tool} blocked on a FIFO"))
            .unwrap();
        let text = &out.output.for_llm;
        if tool == "Grep" {
            assert!(!text.contains("xxxx"), "{tool}: {text}");
        } else {
            assert!(out.output.is_error, "{tool}: {text}");
        }
        if ["read_file", "Read", "edit", "write_file"].contains(&tool) {
            assert!(text.contains("named pipe (FIFO)"), "{tool}: {text}");
        }
    }
    drop(writer);
}

//! `Bash` keeps its working directory between calls from what the shell reports at its end; a
//! command can forge that report, or change the directory under it later. Whatever it does, the
//! next call runs inside the workspace (issue 21, item 17).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use talon_core::{Pipeline, ToolCall, ToolOutput};
use talon_tools::{BuiltinConfig, FsConfig};

use crate::common;

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    pipeline: Pipeline,
}

fn env() -> Env {
    let common::Beside { dir, ws, outside } = common::beside("sub");
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        ..BuiltinConfig::default()
    };
    let pipeline = common::pipeline(&config);
    Env {
        _dir: dir,
        ws,
        outside,
        pipeline,
    }
}

impl Env {
    async fn bash(&self, args: serde_json::Value) -> ToolOutput {
        let ctx = common::context(&self.ws, "s");
        self.pipeline
            .call(Arc::new(ctx), ToolCall::new("Bash", args))
            .await
            .output
    }

    async fn pwd(&self) -> String {
        let out = self.bash(json!({"command": "pwd -P"})).await;
        out.for_llm.lines().next().unwrap_or_default().to_string()
    }
}

/// A command that replaces the directory report with one naming `dir` (a shell expression).
fn forge(dir: &str) -> String {
    format!(
        "m=$(trap -p EXIT | grep -o '__TALON_CWD_[0-9a-f]*='); trap - EXIT; \
         printf '\\n%s%s\\n' \"$m\" \"{dir}\" >&2"
    )
}

#[tokio::test]
async fn h21_17_a_forged_directory_report_is_not_followed() {
    let e = env();
    let ws = e.ws.display().to_string();
    std::os::unix::fs::symlink(&e.outside, e.ws.join("esc")).unwrap();
    for forged in [
        format!("{ws}/esc"),
        format!("{ws}/sub/../.."),
        format!("{ws}/.."),
        e.outside.display().to_string(),
    ] {
        let out = e.bash(json!({"command": forge(&forged)})).await;
        assert!(
            out.for_llm.contains("Shell cwd was reset to"),
            "{forged}: the model is told: {}",
            out.for_llm
        );
        assert_eq!(e.pwd().await, ws, "after a report of {forged}");
    }
    // A genuine report inside the workspace, by whatever path, is kept (canonical).
    e.bash(json!({"command": forge(&format!("{ws}/sub/../sub"))}))
        .await;
    assert_eq!(e.pwd().await, format!("{ws}/sub"));
}

#[tokio::test]
async fn h21_17_a_directory_replaced_by_a_link_later_is_not_entered() {
    let e = env();
    let ws = e.ws.display().to_string();
    e.bash(json!({"command": "cd sub"})).await;
    assert_eq!(e.pwd().await, format!("{ws}/sub"));
    // Between calls (a background command), the remembered directory becomes a link out.
    let swap = format!(
        "cd {ws} && mv sub sub.old && ln -s {} sub",
        e.outside.display()
    );
    let out = e
        .bash(json!({"command": swap, "run_in_background": true}))
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    let link = e.ws.join("sub");
    for _ in 0..100 {
        if link.is_symlink() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        link.is_symlink(),
        "the background command swapped the directory"
    );
    let out = e.bash(json!({"command": "pwd -P"})).await;
    assert!(
        out.for_llm.starts_with(&ws) && !out.for_llm.contains(&*e.outside.to_string_lossy()),
        "{}",
        out.for_llm
    );
    assert!(
        out.for_llm.contains("Shell cwd was reset to"),
        "{}",
        out.for_llm
    );
}

//! The rest of the seeds' inventory that issue 27 adds: `workspace_dir`.

use crate::support;

#[test]
fn workspace_dir_names_the_directory_every_file_tool_and_command_starts_in() {
    let home = tempfile::tempdir().unwrap();
    let out = support::command(home.path())
        .args(["tool", "call", "workspace_dir", "--args", "{}"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let real = home.path().canonicalize().unwrap();
    assert!(stdout.contains(&real.display().to_string()), "{stdout}");
    assert!(stdout.contains("agent default"), "{stdout}");
    // Arguments it does not take are refused, saying so.
    let out = support::command(home.path())
        .args([
            "tool",
            "call",
            "workspace_dir",
            "--args",
            r#"{"path": "/etc"}"#,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("path"), "{said}");
}

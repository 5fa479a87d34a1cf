//! `[mcp_servers]` end to end: the binary bridges server-everything's tools (and skips a server
//! that never answers), lists them, and calls them through `talon tool call`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/npm.rs"]
mod npm;
mod support;

use support::command;

#[test]
fn configured_servers_are_bridged_and_a_dead_one_is_skipped() {
    let entry = npm::server_everything(env!("CARGO_TARGET_TMPDIR"));
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
         [mcp_servers.dead]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout_secs = 2\n",
        entry.display().to_string()
    );
    std::fs::write(home.path().join("talon.toml"), config).unwrap();
    let out = command(home.path())
        .args([
            "tool",
            "call",
            "mcp__everything__echo",
            "--args",
            r#"{"message":"through the CLI"}"#,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Echo: through the CLI"), "{stdout}");
    assert!(
        stderr.contains("\"dead\" did not answer within 2 s"),
        "{stderr}"
    );
    let out = command(home.path())
        .args(["tools", "list"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("mcp__everything__get-sum"), "{listing}");

    // A required server that cannot start stops Talon with the reason.
    std::fs::write(
        home.path().join("talon.toml"),
        "[mcp_servers.gone]\ncommand = \"/nonexistent/server\"\nrequired = true\n",
    )
    .unwrap();
    let out = command(home.path())
        .args(["tools", "list"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("\"gone\": cannot start"),
        "{stderr}"
    );
}

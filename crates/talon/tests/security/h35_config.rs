//! Issue 35: `gateway config.get` shows the configuration's shape, never a credential, wherever
//! the credential stands: after a key-like flag in an MCP server's arguments, inside a hook's
//! command, in a webhook channel's URL path, in a provider URL's query, or as a URL's bare
//! user information.

use serde_json::json;

use crate::support;

#[tokio::test(flavor = "multi_thread")]
async fn h35_config_get_masks_credentials_by_position() {
    let home = tempfile::tempdir().unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let file = config_dir.path().join("talon.toml");
    std::fs::write(
        &file,
        "[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
         [providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1?api-version=1&key=h35-query-secret\"\nmodel = \"m\"\n\
         [mcp_servers.x]\ncommand = \"h35-mcp\"\nargs = [\"--api-key\", \"h35-arg-secret\", \"--token=h35-inline-secret\"]\nenabled = false\n\
         [[hooks.post_tool_use]]\nmatcher = \"datetime\"\ncommand = \"true --as ops h35-hook-secret\"\n\
         [channels.hook]\nkind = \"webhook\"\nurl = \"https://hooks.example.com/services/T0/B0/h35-path-secret\"\n\
         [web.search]\nsearxng_url = \"https://ghp_h35userinfosecret0000000000000000000000@search.example/\"\n",
    )
    .unwrap();
    let mut cmd = support::command(home.path());
    cmd.env("TALON_CONFIG", &file)
        .args(["serve", "--bind", "127.0.0.1:0"]);
    let server = tokio::task::spawn_blocking(move || support::spawn(cmd))
        .await
        .unwrap();
    let (status, body) = support::invoke(
        &server.addr,
        None,
        json!({"tool": "gateway", "args": {"action": "config.get"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let shown = body["result"]["for_llm"].as_str().unwrap_or_default();
    assert!(shown.contains("[mcp_servers.x]"), "{shown}");
    for secret in [
        "h35-query-secret",
        "h35-arg-secret",
        "h35-inline-secret",
        "h35-hook-secret",
        "h35-path-secret",
        "ghp_h35userinfosecret",
    ] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
}

//! `talon mcp-servers test | login | logout`: the subcommands that reach a server.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use talon_store::Store;

use super::super::cli_credentials::fail;
use super::super::usage_error;
use crate::config::Config;
use talon_core::visible::visible;

/// The bridge configuration of server `name`, from talon.toml or the store.
async fn resolve(
    config: &Config,
    store: &Store,
    name: &str,
) -> Result<talon_bridge::ServerConfig, ExitCode> {
    let vault = crate::mcp_store::vault(store);
    let server = if let Some(section) = config.mcp_servers.get(name) {
        section
            .checked_spec(name)
            .map_err(
                |reason| crate::mcp_servers_config::McpConfigError::Section {
                    name: name.to_string(),
                    reason,
                },
            )
            .and_then(|(spec, secrets)| {
                crate::mcp_servers_config::server_config(&spec, &secrets, &vault)
            })
    } else {
        match store.mcp_server(name).await {
            Ok(Some(stored)) => match store.mcp_server_secrets(&stored).await {
                Ok(secrets) => {
                    crate::mcp_servers_config::server_config(&stored.spec, &secrets, &vault)
                }
                Err(e) => return Err(fail(e)),
            },
            Ok(None) => {
                return Err(usage_error(format!(
                    "no MCP server named {name}; `talon mcp-servers list` shows them"
                )));
            }
            Err(e) => return Err(fail(e)),
        }
    };
    server.map_err(usage_error)
}

/// The OAuth settings of server `name`, or a usage error when it does not sign in with OAuth.
async fn oauth_of(
    config: &Config,
    store: &Store,
    name: &str,
) -> Result<(talon_bridge::HttpConfig, talon_bridge::oauth::OAuthConfig), ExitCode> {
    let server = resolve(config, store, name).await?;
    match server.transport {
        talon_bridge::Transport::Http(http) => match http.oauth.clone() {
            Some(oauth) => Ok((http, oauth)),
            None => Err(usage_error(format!(
                "{name} does not sign in with OAuth: set oauth = true (talon.toml) or add it with --oauth"
            ))),
        },
        _ => Err(usage_error(format!(
            "{name} is not a streamable HTTP server; only those sign in with OAuth"
        ))),
    }
}

/// Opens `url` in the user's browser: `$BROWSER`, else xdg-open; the URL is printed either way.
fn open_browser(url: &str) {
    println!("Sign in at: {}", visible(url));
    let browser = std::env::var("BROWSER").unwrap_or_else(|_| "xdg-open".into());
    let opened = std::process::Command::new(&browser)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = opened {
        eprintln!("talon: cannot start {browser} ({e}); open the URL above yourself");
    }
}

pub(super) async fn login(
    config: &Config,
    store: &Store,
    name: &str,
    no_browser: bool,
) -> ExitCode {
    let (http, oauth) = match oauth_of(config, store, name).await {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let open = |url: &str| {
        if no_browser {
            println!("Sign in at: {}", visible(url));
        } else {
            open_browser(url);
        }
    };
    match talon_bridge::oauth::login(name, &http, &oauth, open, Duration::from_secs(300)).await {
        Ok(()) => {
            println!("{name}: signed in; running gateways connect it within seconds");
            // Running gateways retry the servers they could not connect.
            if let Err(e) = store.touch_mcp().await {
                eprintln!(
                    "talon: running gateways were not told ({e}); restart them to connect {name}"
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub(super) async fn logout(config: &Config, store: &Store, name: &str) -> ExitCode {
    let (_, oauth) = match oauth_of(config, store, name).await {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    match talon_bridge::oauth::logout(name, &oauth).await {
        Ok(()) => {
            println!("{name}: signed out (its tokens are deleted)");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub(super) async fn test(config: &Config, store: &Store, name: &str, json: bool) -> ExitCode {
    let server = match resolve(config, store, name).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let started = Instant::now();
    // Starting a server can take a while (npx downloading a package on its first run).
    let connecting = async {
        let connected =
            talon_bridge::Server::start(name, &server.transport, server.startup_timeout).await?;
        let tools = connected.tools(server.startup_timeout).await;
        Ok::<_, talon_bridge::ServerError>((connected, tools))
    };
    let (connected, tools) = match crate::spinner::while_waiting(
        "connecting (a first start may download the server)…",
        connecting,
    )
    .await
    {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    let elapsed = started.elapsed();
    connected.close(Duration::from_secs(5)).await;
    match tools {
        Ok(tools) => {
            if json {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                println!(
                    "{}",
                    json!({"name": name, "ok": true, "millis": elapsed.as_millis(), "tools": names})
                );
            } else {
                println!(
                    "{name}: connected in {} ms, {} tools",
                    elapsed.as_millis(),
                    tools.len()
                );
                for t in &tools {
                    println!("  {}", visible(&t.name));
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

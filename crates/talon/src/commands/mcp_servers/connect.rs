//! `talon mcp-servers test | login | logout`: the subcommands that reach a server.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use talon_store::Store;

use super::super::{fail, refused};
use crate::config::Config;
use talon_core::visible::visible;
use talon_runtime::mcp_admin::{oauth_settings, server_config};

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
    let (http, oauth) = match oauth_settings(config, store, name).await {
        Ok(pair) => pair,
        Err(e) => return refused(e),
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
    let (_, oauth) = match oauth_settings(config, store, name).await {
        Ok(pair) => pair,
        Err(e) => return refused(e),
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
    let server = match server_config(config, store, name).await {
        Ok(s) => s,
        Err(e) => return refused(e),
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

//! `talon serve`: the gateway.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use talon_gateway::GatewayConfig;
use tokio_util::sync::CancellationToken;

use super::usage_error;
use crate::config::{self, Config};
use crate::runtime::{self, Overrides};

pub async fn run(config: Config, bind: Option<String>, data_dir: Option<&Path>) -> ExitCode {
    let bind_text = bind
        .or_else(|| config.gateway.bind.clone())
        .unwrap_or_else(|| talon_gateway::DEFAULT_BIND.to_string());
    let bind: SocketAddr = match bind_text.parse() {
        Ok(addr) => addr,
        Err(e) => {
            return usage_error(format!(
                "--bind / gateway.bind {bind_text:?} is not an address like 127.0.0.1:8790: {e}"
            ));
        }
    };
    let data_dir = config::data_dir(data_dir);
    if let Err(e) = std::fs::create_dir_all(&data_dir) {
        return usage_error(format!(
            "cannot create the data directory {}: {e}",
            data_dir.display()
        ));
    }
    let gateway = GatewayConfig {
        bind,
        token: config.gateway.token.clone().filter(|t| !t.is_empty()),
        allowed_hosts: config.gateway.allowed_hosts.clone(),
    };
    // State: the database (created and migrated on first start) and the secrets key.
    let store = match crate::store::open(&config, &data_dir).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("talon serve: {e}");
            return ExitCode::from(1);
        }
    };
    let rt = match runtime::build(
        config,
        Overrides {
            default_mode: talon_core::permission::PermissionMode::AcceptEdits,
            data_dir: Some(data_dir.clone()),
            store: Some(store.clone()),
            ..Overrides::default()
        },
    ) {
        Ok(rt) => rt,
        Err(e) => return usage_error(e),
    };
    // Stored secrets are scrubbed from every tool output.
    match store.secret_values().await {
        Ok((values, broken)) => {
            rt.pipeline.scrubber().add_credentials(values);
            for (name, error) in broken {
                tracing::error!(secret = %name, %error, "secret cannot be decrypted; it is skipped");
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot load secrets for scrubbing"),
    }
    tracing::info!(
        data_dir = %data_dir.display(),
        database = ?store.engine(),
        tools = rt.pipeline.registry().len(),
        "talon starting"
    );
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        signal.cancel();
    });
    match talon_gateway::serve(gateway, rt.pipeline, rt.template, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ talon_gateway::GatewayError::NoTokenBeyondLoopback(_)) => usage_error(e),
        Err(e) => {
            eprintln!("talon serve: {e}");
            ExitCode::from(1)
        }
    }
}

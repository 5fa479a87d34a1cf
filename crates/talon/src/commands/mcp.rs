//! `talon mcp`: MCP over stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::Config;
use crate::runtime::{self, Overrides};

pub async fn run(
    config: Config,
    workspace: Option<PathBuf>,
    profile: Option<String>,
    agent: Option<String>,
    data_dir: Option<PathBuf>,
    tty_approvals: bool,
) -> ExitCode {
    let client_confirms = config.mcp_server.client_confirms.unwrap_or(true);
    let rt = match runtime::build(
        config,
        Overrides {
            default_mode: talon_core::permission::PermissionMode::AcceptEdits,
            profile,
            agent,
            workspace,
            data_dir,
            prompter: crate::prompt::tty_prompter(tty_approvals),
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return crate::commands::refused(e),
    };
    let handler = talon_mcp::TalonMcp::new(
        Arc::clone(&rt.pipeline),
        rt.template.clone(),
        rt.callers.clone(),
        "stdio",
    )
    .client_confirms(client_confirms);
    let served = talon_mcp::serve_stdio(handler).await;
    rt.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("talon mcp: {e}");
            ExitCode::from(1)
        }
    }
}

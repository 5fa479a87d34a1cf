//! `talon serve`: the gateway.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use talon_gateway::GatewayConfig;
use tokio_util::sync::CancellationToken;

use super::usage_error;
use crate::config::Config;
use crate::runtime::{self, Overrides};

pub async fn run(
    config: Config,
    bind: Option<String>,
    workspace: Option<PathBuf>,
    data_dir: Option<PathBuf>,
) -> ExitCode {
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
    if let Some(e) = config
        .gateway
        .allowed_origins
        .iter()
        .find_map(|o| talon_gateway::check_allowed_origin(o).err())
    {
        return usage_error(e);
    }
    raise_nofile_limit();
    let gateway = GatewayConfig {
        bind,
        token: config.gateway.token.clone().filter(|t| !t.is_empty()),
        allowed_hosts: config.gateway.allowed_hosts.clone(),
        allowed_origins: config.gateway.allowed_origins.clone(),
        mcp_client_confirms: config.mcp_server.client_confirms.unwrap_or(false),
    };
    if let Some(Err(e)) = gateway
        .token
        .as_deref()
        .map(talon_gateway::check_token_strength)
    {
        return usage_error(talon_gateway::GatewayError::WeakToken(e));
    }
    let config_names: Vec<String> = config.mcp_servers.keys().cloned().collect();
    let config_file = config.source.clone();
    // State: the database (created and migrated on first start), the secrets key, the default
    // agent. Each agent and user gets its own workspace unless one is configured.
    let rt = match runtime::build(
        config.clone(),
        Overrides {
            default_mode: talon_core::permission::PermissionMode::AcceptEdits,
            data_dir,
            workspace,
            per_agent_workspaces: true,
            serves_approvals: true,
            http_questions: true,
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return crate::commands::build_failed(e),
    };
    // Turns left running by a gateway that died are over: say so instead of leaving them open.
    match rt.store.mark_interrupted_turns().await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            sessions = n,
            "turns interrupted by the last shutdown were marked as such"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot mark interrupted turns"),
    }
    let workspaces = match rt.callers.workspaces() {
        talon_core::Workspaces::Shared(dir) => dir.display().to_string(),
        talon_core::Workspaces::PerAgentUser(root) => {
            format!("{}/<agent>/<user>", root.display())
        }
    };
    tracing::info!(
        config = %config_file.as_deref().map_or_else(|| "none (defaults and TALON_* variables)".to_string(), |f| f.display().to_string()),
        data_dir = %rt.data_dir.display(),
        database = ?rt.store.engine(),
        tools = rt.pipeline.registry().len(),
        workspaces,
        default_agent = rt.callers.default_agent(),
        "talon starting"
    );
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    // The `gateway` tool's reload: stop serving, then start this program again (below).
    let restart = CancellationToken::new();
    let asked = restart.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop_signal() => tracing::info!("stopping: finishing open requests"),
            () = asked.cancelled() => tracing::info!("reloading: finishing open requests"),
        }
        signal.cancel();
    });
    let control = talon_runtime::gateway_tool::GatewayControl {
        config_file: config_file.clone(),
        operators: config.gateway.operators.clone().into(),
        bind: bind.to_string(),
        data_dir: rt.data_dir.clone(),
        store: rt.store.clone(),
        registry: Arc::clone(rt.pipeline.registry()),
        channels: rt.channels.names(),
        started: std::time::Instant::now(),
        restart: restart.clone(),
        reloading: Default::default(),
    };
    if let Err(e) = rt
        .pipeline
        .registry()
        .register(talon_runtime::gateway_tool::Gateway { control })
    {
        eprintln!("talon serve: registering the gateway tool: {e}");
        return ExitCode::from(1);
    }
    let runner = rt.runner.clone();
    // Leases renewed, runs of dead gateways taken over, results announced: while serving.
    let _supervisor = runner.supervise();
    // Telegram channels with inbound = true: their messages become turns, answered there.
    talon_runtime::channels::inbound::spawn(&runner, &rt.channels, &shutdown);
    // Due jobs claimed (one gateway each, by lease) and run as agent runs: while serving.
    let _scheduler = runner.schedule_jobs();
    let questions = Arc::clone(&rt.questions);
    let services = talon_gateway::Services {
        pipeline: Arc::clone(&rt.pipeline),
        template: rt.template.clone(),
        callers: rt.callers.clone(),
        approvals: Arc::clone(&rt.approvals),
        questions,
        admin: Some(
            talon_runtime::mcp_admin_http::routes(
                rt.store.clone(),
                rt.bridge.clone(),
                config_names,
                gateway.token.is_some(),
            )
            .merge(talon_runtime::custom_tools_http::routes(
                rt.store.clone(),
                Arc::clone(rt.pipeline.registry()),
                gateway.token.is_some(),
            ))
            .merge(talon_runtime::runs_http::routes(runner.clone()))
            .merge(talon_runtime::cron_http::routes(runner.clone()))
            .merge(talon_runtime::chat_http::routes(runner))
            .merge(talon_runtime::agents_http::routes(rt.store.clone()))
            .merge(talon_runtime::teams_http::routes(rt.store.clone())),
        ),
        readiness: Some(talon_runtime::store::readiness(rt.store.clone())),
    };
    let served = talon_gateway::serve(gateway, services, shutdown).await;
    rt.shutdown().await;
    if served.is_ok() && restart.is_cancelled() {
        return restart_in_place();
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(
            e @ (talon_gateway::GatewayError::NoTokenBeyondLoopback(_)
            | talon_gateway::GatewayError::WeakToken(_)),
        ) => usage_error(e),
        Err(e) => {
            eprintln!("talon serve: {e}");
            ExitCode::from(1)
        }
    }
}

/// Raises the open-files soft limit to the hard limit: each connection holds a descriptor, and
/// the common soft limit of 1,024 let a thousand half-sent requests exhaust them (issue 35).
fn raise_nofile_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(error = %e, soft, hard, "cannot raise the open-files limit");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open-files limit"),
    }
}

/// Replaces this process with a new run of the same program, arguments and environment (the
/// `gateway` tool's reload); returns only if that fails.
fn restart_in_place() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            eprintln!("talon serve: cannot reload, the program's path is unknown: {e}");
            return ExitCode::from(1);
        }
    };
    let e = std::process::Command::new(program)
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("talon serve: cannot reload: {e}");
    ExitCode::from(1)
}

/// Ctrl-C or SIGTERM (a service manager stopping the server).
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for SIGTERM; stop with Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

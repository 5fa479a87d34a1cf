//! The gateway assembled (`talon serve`): the runtime built with a server's overrides, the
//! `gateway` tool, the run supervisor, the scheduler, inbound channels and every service's HTTP
//! routes behind one [`talon_gateway::serve`]. The binary only reads its arguments, waits for
//! the stop signal and turns [`ServeError`] into an exit code; tests and embedders start the
//! same gateway.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use talon_gateway::{GatewayConfig, GatewayError};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::runtime::{self, BuildError, Overrides};

/// Why the gateway did not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration or the arguments are wrong; the message says how.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Build(BuildError),
    #[error(transparent)]
    Gateway(GatewayError),
    #[error("registering the gateway tool: {0}")]
    Register(String),
}

/// How the gateway ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Served {
    /// It was stopped.
    Stopped,
    /// The `gateway` tool asked for a reload: start the program again.
    Reload,
}

/// Where `talon serve` was told to listen and keep its state.
#[derive(Debug, Default)]
pub struct ServeOptions {
    /// Overrides `gateway.bind`.
    pub bind: Option<String>,
    pub workspace: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
}

/// Serves `config` until `stop` completes (or a reload is asked for).
pub async fn serve(
    config: Config,
    options: ServeOptions,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Served, ServeError> {
    let ServeOptions {
        bind,
        workspace,
        data_dir,
    } = options;
    let bind_text = bind
        .or_else(|| config.gateway.bind.clone())
        .unwrap_or_else(|| talon_gateway::DEFAULT_BIND.to_string());
    let bind: SocketAddr = match bind_text.parse() {
        Ok(addr) => addr,
        Err(e) => {
            return Err(ServeError::Usage(format!(
                "--bind / gateway.bind {bind_text:?} is not an address like 127.0.0.1:8790: {e}"
            )));
        }
    };
    if let Some(e) = config
        .gateway
        .allowed_origins
        .iter()
        .find_map(|o| talon_gateway::check_allowed_origin(o).err())
    {
        return Err(ServeError::Usage(e));
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
        return Err(ServeError::Gateway(GatewayError::WeakToken(e)));
    }
    let config_names: Vec<String> = config.mcp_servers.keys().cloned().collect();
    let config_file = config.source.clone();
    // State: the database (created and migrated on first start), the secrets key, the default
    // agent. Each agent and user gets its own workspace unless one is configured.
    let rt = runtime::build(
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
    .map_err(ServeError::Build)?;
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
            () = stop => tracing::info!("stopping: finishing open requests"),
            () = asked.cancelled() => tracing::info!("reloading: finishing open requests"),
        }
        signal.cancel();
    });
    let control = crate::gateway_tool::GatewayControl {
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
    rt.pipeline
        .registry()
        .register(crate::gateway_tool::Gateway { control })
        .map_err(|e| ServeError::Register(e.to_string()))?;
    let runner = rt.runner.clone();
    // Leases renewed, runs of dead gateways taken over, results announced: while serving.
    let supervisor = runner.supervise();
    // Telegram channels with inbound = true: their messages become turns, answered there.
    crate::channels::inbound::spawn(&runner, &rt.channels, &shutdown);
    // Due jobs claimed (one gateway each, by lease) and run as agent runs: while serving.
    let scheduler = runner.schedule_jobs();
    let questions = Arc::clone(&rt.questions);
    let services = talon_gateway::Services {
        pipeline: Arc::clone(&rt.pipeline),
        template: rt.template.clone(),
        callers: rt.callers.clone(),
        approvals: Arc::clone(&rt.approvals),
        questions,
        admin: Some(
            crate::mcp_admin_http::routes(
                rt.store.clone(),
                rt.bridge.clone(),
                config_names,
                gateway.token.is_some(),
            )
            .merge(crate::custom_tools_http::routes(
                rt.store.clone(),
                Arc::clone(rt.pipeline.registry()),
                gateway.token.is_some(),
            ))
            .merge(crate::runs_http::routes(runner.clone()))
            .merge(crate::cron_http::routes(runner.clone()))
            .merge(crate::chat_http::routes(runner))
            .merge(crate::agents_http::routes(rt.store.clone()))
            .merge(crate::teams_http::routes(rt.store.clone())),
        ),
        readiness: Some(crate::store::readiness(rt.store.clone())),
    };
    let served = talon_gateway::serve(gateway, services, shutdown).await;
    // Nothing renews, announces or claims jobs once the store closes.
    drop((supervisor, scheduler));
    rt.shutdown().await;
    served.map_err(ServeError::Gateway)?;
    Ok(if restart.is_cancelled() {
        Served::Reload
    } else {
        Served::Stopped
    })
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

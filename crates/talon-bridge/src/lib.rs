//! Talon as an MCP client: the tools of external MCP servers become Talon tools.
//!
//! Each configured server is started and listed in parallel, bounded by a start-up timeout, so
//! one slow or dead server never holds up the others or Talon; its tools are registered under
//! the dialect's names ([`names`]) in the groups `mcp` and `mcp:<server>`, with a risk from their
//! annotations. A bridged tool is an ordinary registered tool, so every call to it goes through
//! Talon's pipeline: policy, approvals, rate limits, hooks, scrubbing and audit.

pub mod link;
pub mod names;
pub mod resources;
pub mod server;
pub mod tool;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use talon_core::Registry;

pub use names::Dialect;
pub use server::{Server, ServerError, StdioConfig};

/// One configured server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub stdio: StdioConfig,
    /// GoClaw dialect: the prefix replacing `mcp_<server>`.
    pub prefix: Option<String>,
    /// Time allowed for start-up (the process and the handshake and the tool list).
    pub startup_timeout: Duration,
    /// Time allowed for one call.
    pub call_timeout: Duration,
    /// Characters of a result kept.
    pub max_output_chars: usize,
    /// Fail Talon's start when this server cannot be reached.
    pub required: bool,
}

impl ServerConfig {
    /// A server with the defaults: 30 s to start, 60 s per call, Claude Code's output cap.
    pub fn stdio(name: impl Into<String>, stdio: StdioConfig) -> Self {
        Self {
            name: name.into(),
            stdio,
            prefix: None,
            startup_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_output_chars: tool::DEFAULT_MAX_OUTPUT_CHARS,
            required: false,
        }
    }
}

/// What connecting the servers gave.
#[derive(Debug, Default)]
pub struct Connected {
    /// The connected servers' links (kept up by their supervisors).
    pub links: Vec<Arc<link::Link>>,
    /// Servers that could not be used, and why (the ones not `required`).
    pub failed: Vec<String>,
}

/// The bridged names per server, to replace a server's tools and rebuild the groups.
type Names = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// Whether [`connect_all`] waits for servers that are not `required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// Wait for every server (one-shot commands, which need the tools now).
    Wait,
    /// Return once the `required` servers are up; the others connect in the background and
    /// their tools appear as each one answers (long-running entry points, whose clients hear
    /// `notifications/tools/list_changed`). A dead server then delays nothing.
    Background,
}

/// Connects the servers in parallel and registers their tools in `registry` under `dialect`'s
/// names. A `required` server that fails fails the whole call. Each server's tools are
/// re-listed and replaced whenever it announces `notifications/tools/list_changed`, with the
/// groups `mcp` and `mcp:<server>` rebuilt to match; a server that goes down is reconnected
/// ([`link`]).
pub async fn connect_all(
    configs: &[ServerConfig],
    registry: &Arc<Registry>,
    dialect: Dialect,
    startup: Startup,
) -> Result<Connected, ServerError> {
    let names: Names = Arc::default();
    let links: resources::Links = Arc::default();
    if !configs.is_empty() {
        let _ = registry.register(resources::ListMcpResources {
            links: Arc::clone(&links),
        });
        let _ = registry.register(resources::ReadMcpResource {
            links: Arc::clone(&links),
        });
    }
    let (awaited, background): (Vec<ServerConfig>, Vec<ServerConfig>) = configs
        .iter()
        .cloned()
        .partition(|c| c.required || startup == Startup::Wait);
    for config in background {
        let (registry, names, links) =
            (Arc::clone(registry), Arc::clone(&names), Arc::clone(&links));
        tokio::spawn(async move {
            match start_and_list(config.clone()).await {
                Ok((server, tools)) => {
                    let (link, failures) =
                        attach(&registry, &names, &config, server, tools, dialect);
                    links
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(config.name.clone(), link);
                    for failure in failures {
                        tracing::warn!("{failure}");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "MCP server skipped"),
            }
        });
    }
    let started = futures_join(&awaited).await;
    let mut connected = Connected::default();
    for (config, result) in awaited.iter().zip(started) {
        match result {
            Ok((server, tools)) => {
                let (link, failures) = attach(registry, &names, config, server, tools, dialect);
                links
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(config.name.clone(), Arc::clone(&link));
                connected.failed.extend(failures);
                connected.links.push(link);
            }
            Err(e) if config.required => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "MCP server skipped");
                connected.failed.push(e.to_string());
            }
        }
    }
    Ok(connected)
}

/// Registers a started server's tools and starts following it (list changes, health,
/// reconnection); returns its link and the tools that could not be registered.
fn attach(
    registry: &Arc<Registry>,
    names: &Names,
    config: &ServerConfig,
    server: Server,
    tools: Vec<server::ListedTool>,
    dialect: Dialect,
) -> (Arc<link::Link>, Vec<String>) {
    let server = Arc::new(server);
    let link = Arc::new(link::Link::new(config.clone(), Arc::clone(&server)));
    let failures = sync(registry, names, &link, tools, dialect);
    tokio::spawn(refresh_on_change(
        Arc::downgrade(registry),
        Arc::clone(names),
        Arc::downgrade(&link),
        Arc::downgrade(&server),
        dialect,
        false,
    ));
    let (registry, names) = (Arc::downgrade(registry), Arc::clone(names));
    tokio::spawn(Arc::clone(&link).supervise(move |link, server| {
        // A restarted server may list other tools: list it now, then follow its changes.
        tokio::spawn(refresh_on_change(
            registry.clone(),
            Arc::clone(&names),
            Arc::downgrade(link),
            Arc::downgrade(server),
            dialect,
            true,
        ));
    }));
    (link, failures)
}

/// Replaces `server`'s registered tools with `tools` and rebuilds the groups; returns the tools
/// that could not be registered, and why.
fn sync(
    registry: &Registry,
    names: &Names,
    link: &Arc<link::Link>,
    tools: Vec<server::ListedTool>,
    dialect: Dialect,
) -> Vec<String> {
    let config = &link.config;
    let mut all = names.lock().unwrap_or_else(PoisonError::into_inner);
    for old in all.remove(&config.name).unwrap_or_default() {
        registry.unregister(&old);
    }
    let mut failures = Vec::new();
    let mut registered = Vec::new();
    for listed in tools {
        let name = names::bridged_name(
            dialect,
            &config.name,
            config.prefix.as_deref(),
            &listed.name,
            |n| registry.resolve(n).is_some(),
        );
        let bridged = tool::Bridged {
            link: Arc::clone(link),
            name: name.clone(),
            listed,
            timeout: config.call_timeout,
            max_output_chars: config.max_output_chars,
        };
        match registry.register(bridged) {
            Ok(()) => registered.push(name),
            Err(e) => failures.push(format!("MCP server {:?}: tool {name}: {e}", config.name)),
        }
    }
    registry.register_group(&format!("mcp:{}", config.name), registered.clone());
    all.insert(config.name.clone(), registered);
    registry.register_group("mcp", all.values().flatten().cloned());
    failures
}

/// Re-lists the server's tools each time it says they changed (and at once with `list_now`),
/// until the server or the registry is gone.
async fn refresh_on_change(
    registry: Weak<Registry>,
    names: Names,
    link: Weak<link::Link>,
    server: Weak<Server>,
    dialect: Dialect,
    mut list_now: bool,
) {
    let Some(changed) = server.upgrade().map(|s| s.tools_changed()) else {
        return;
    };
    loop {
        if !list_now {
            changed.notified().await;
        }
        list_now = false;
        let (Some(server), Some(registry), Some(link)) =
            (server.upgrade(), registry.upgrade(), link.upgrade())
        else {
            return;
        };
        match server.tools(link.config.startup_timeout).await {
            Ok(tools) => {
                for failure in sync(&registry, &names, &link, tools, dialect) {
                    tracing::warn!("{failure}");
                }
                tracing::info!(server = %link.name(), "MCP server's tools (re-)listed");
            }
            Err(e) => tracing::warn!(error = %e, "cannot list an MCP server's tools"),
        }
    }
}

/// Starts `config`'s server and lists its tools, within its start-up timeout.
async fn start_and_list(
    config: ServerConfig,
) -> Result<(Server, Vec<server::ListedTool>), ServerError> {
    let deadline = config.startup_timeout;
    let work = async {
        let server = Server::start(&config.name, &config.stdio, deadline).await?;
        let tools = server.tools(deadline).await?;
        Ok::<_, ServerError>((server, tools))
    };
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(ServerError::Timeout {
                server: config.name.clone(),
                secs: deadline.as_secs(),
            })
        })
}

/// Starts and lists every server concurrently.
async fn futures_join(
    configs: &[ServerConfig],
) -> Vec<Result<(Server, Vec<server::ListedTool>), ServerError>> {
    let tasks: Vec<_> = configs
        .iter()
        .cloned()
        .map(|config| tokio::spawn(start_and_list(config)))
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for (task, config) in tasks.into_iter().zip(configs) {
        out.push(task.await.unwrap_or_else(|e| {
            Err(ServerError::Protocol {
                server: config.name.clone(),
                message: format!("the start-up task failed: {e}"),
            })
        }));
    }
    out
}

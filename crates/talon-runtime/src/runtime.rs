//! Wires the configuration into one pipeline shared by every entry point.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use talon_core::approvals::{Approvals, Prompter, Remember};
use talon_core::events::EventBus;
use talon_core::hooks::{CommandHook, HookEvent, HookMatcher, Hooks};
use talon_core::permission::PermissionMode;
use talon_core::policy::PolicyEngine;
use talon_core::rate_limit::RateLimiter;
use talon_core::{CallContext, Callers, Pipeline, Registry, Workspaces};
use talon_store::Store;
use talon_tools::runtime::approvals::ExecApprovals;

use crate::config::{Config, ConfigError, HookEntry};

/// What the commands need: the pipeline, the context template for their calls, the store, and
/// the one place that binds a call to its agent and workspace.
pub struct Runtime {
    pub pipeline: Arc<Pipeline>,
    pub template: CallContext,
    pub store: Store,
    pub callers: Callers,
    pub data_dir: PathBuf,
    /// Calls waiting for a person's approval (the pipeline's approver).
    pub approvals: Arc<Approvals>,
    audit: Arc<crate::audit::StoreAudit>,
    /// The shell the command tools share (background commands, session sandboxes).
    shell: Arc<talon_exec::Shell>,
    /// The bridged MCP servers (kept alive here; `None` when there are none to follow).
    pub bridge: Option<Arc<talon_bridge::Bridge>>,
    /// The agent runner: the one that runs every turn and child run of this process, and
    /// whose tools (`subagents`, `spawn`, `Agent`) are registered with it.
    pub runner: crate::runner::Runner,
    /// Where tools' questions wait when `Overrides::http_questions` asked for it.
    pub questions: Arc<talon_core::questions::Questions>,
    /// The configured chat channels (`talon serve` reads the inbound ones).
    pub channels: crate::channels::Channels,
}

impl Runtime {
    /// Writes what is still queued (audit records) before the process exits, then closes the
    /// store: SQLite folds its write-ahead log back into the database when the last connection
    /// closes, so the next start does not read a log every process before it left behind (5.6 MiB
    /// of it was seen, re-read at each `talon tool call`). A connection some task still holds
    /// gets a moment to come back, never a hang.
    pub async fn shutdown(&self) {
        self.shell.shutdown().await;
        self.audit.close().await;
        let _ = tokio::time::timeout(Duration::from_secs(2), self.store.close()).await;
    }
}

/// Per-command choices layered over the configuration.
#[derive(Default)]
pub struct Overrides {
    pub profile: Option<String>,
    /// `--agent`: must exist in the store; unset, calls run as `[agents] default`.
    pub agent: Option<String>,
    pub provider: Option<String>,
    /// `--workspace`: one directory for every call.
    pub workspace: Option<PathBuf>,
    /// Without `--workspace`, give each agent and user its own directory under the data
    /// directory (the gateway) instead of sharing the current directory (`talon mcp`, whose
    /// client starts it in the project; `talon tool call`).
    pub per_agent_workspaces: bool,
    /// Tools' questions in turns whose entry point cannot ask wait to be answered over
    /// `/v1/questions` (`talon serve`).
    pub http_questions: bool,
    /// Permission mode when `tools.permission_mode` is not configured: `talon tool call` is a
    /// person running one tool on purpose (bypassPermissions); MCP clients and API callers ask
    /// their own users, so file edits are accepted and riskier tools still need approval
    /// (acceptEdits).
    pub default_mode: PermissionMode,
    /// `--data-dir`, if given (denied to the file tools).
    pub data_dir: Option<PathBuf>,
    /// Who asks a person at a terminal (the binary's `/dev/tty` prompter), if anyone.
    pub prompter: Option<Arc<dyn Prompter>>,
    /// Approval requests can be answered over HTTP (`talon serve`'s `/v1/approvals`).
    pub serves_approvals: bool,
    /// The process runs one command and exits (`talon tool call`, `talon tools list`): no
    /// session sandboxes.
    pub one_shot: bool,
    /// Start only once every MCP server answered or gave up (as one-shot commands do): the
    /// first turn comes at once (`talon chat -p`), and would otherwise be offered none of the
    /// tools of servers still starting.
    pub wait_for_mcp_servers: bool,
}

/// Why the runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The configuration or a flag is wrong (exit status 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened or prepared (exit status 1).
    #[error("{0}")]
    Store(String),
}

fn hooks(config: &Config) -> Hooks {
    let mut hooks = Hooks::default();
    let mut add = |event: HookEvent, entries: &[HookEntry]| {
        for entry in entries {
            let mut hook = CommandHook::new(entry.command.clone());
            if let Some(secs) = entry.timeout_secs {
                hook.timeout = Duration::from_secs(secs);
            }
            hooks.add(
                event,
                HookMatcher::new(entry.matcher.as_deref(), Arc::new(hook))
                    .for_agents(entry.agents.clone()),
            );
        }
    };
    add(HookEvent::PreToolUse, &config.hooks.pre_tool_use);
    add(HookEvent::PostToolUse, &config.hooks.post_tool_use);
    add(
        HookEvent::PostToolUseFailure,
        &config.hooks.post_tool_use_failure,
    );
    add(HookEvent::SessionStart, &config.hooks.session_start);
    add(
        HookEvent::UserPromptSubmit,
        &config.hooks.user_prompt_submit,
    );
    add(HookEvent::Stop, &config.hooks.stop);
    add(HookEvent::SubagentStart, &config.hooks.subagent_start);
    add(HookEvent::SubagentStop, &config.hooks.subagent_stop);
    hooks
}

/// Opens the store and builds the registry, policy and pipeline; every configuration mistake is
/// reported at once.
pub async fn build(mut config: Config, overrides: Overrides) -> Result<Runtime, BuildError> {
    if let Some(profile) = &overrides.profile {
        config.tools.profile = Some(profile.clone());
    }
    let data_dir = crate::config::data_dir(overrides.data_dir.as_deref());
    // The configured gateway's address is Talon's own, in every entry point (a `talon chat`
    // beside a running `talon serve` too): no tool's connection reaches it.
    if let Ok(bind) = config
        .gateway
        .bind
        .as_deref()
        .unwrap_or(talon_gateway::DEFAULT_BIND)
        .parse()
    {
        talon_net::own::register_listener(bind);
    }
    let Validated {
        mode,
        policy,
        shell,
        exec_policies,
    } = validate(&config, &overrides, &data_dir)?;
    let shell = talon_exec::ShellConfig {
        one_shot: overrides.one_shot,
        ..shell
    };
    let store = crate::store::open(&config, &data_dir)
        .await
        .map_err(|e| BuildError::Store(e.to_string()))?;
    let agent = ensure_agents(&config, &store, overrides.agent.as_deref()).await?;

    let audit = Arc::new(crate::audit::StoreAudit::start(store.clone()));
    let registry = Arc::new(Registry::new());
    let keys = crate::web_config::search_keys(&store).await;
    let web = config
        .web
        .to_config(&keys)
        .map_err(|e| ConfigError(e.to_string()))?;
    let embedder = match &config.memory.embeddings {
        Some(section) => Some(section.embedder(&store).await?),
        None => None,
    };
    if let Some(embedder) = &embedder {
        crate::memory_index::spawn(store.clone(), Arc::clone(embedder));
    }
    let openai_compat =
        crate::openai_compat_config::endpoints(&config.openai_compat, &store).await?;
    let builtin = talon_tools::BuiltinConfig {
        store: Some(store.clone()),
        embedder: embedder.clone(),
        shell,
        web,
        openai_compat,
        ..config.builtin(&data_dir)
    };
    let shell = Arc::new(talon_exec::Shell::new(builtin.shell.clone()));
    let builtins = talon_tools::register_builtin_with(&registry, &builtin, Arc::clone(&shell))
        .map_err(|e| ConfigError(format!("registering built-in tools: {e}")))?;
    let bridge = connect_mcp_servers(
        &config,
        &store,
        &registry,
        embedder.as_ref(),
        overrides.one_shot,
        overrides.one_shot || overrides.wait_for_mcp_servers,
    )
    .await?;
    let events = EventBus::default();
    let mut approvals = Approvals::new(events.clone());
    let prompter = overrides.prompter.clone();
    let can_ask = prompter.is_some() || overrides.serves_approvals;
    if !can_ask {
        approvals = approvals.unattended();
    }
    if let Some(prompter) = prompter {
        approvals = approvals.with_prompter(prompter);
    }
    let (exec_defaults, exec_agents) = exec_policies;
    let exec_approvals = Arc::new(
        ExecApprovals::new(exec_defaults, exec_agents, can_ask)
            .with_store(store.clone())
            .await
            .map_err(|e| BuildError::Store(format!("loading allowed commands: {e}")))?,
    );
    approvals = approvals.with_remember(Arc::clone(&exec_approvals) as Arc<dyn Remember>);
    let approvals = Arc::new(approvals);
    let mut builder = Pipeline::builder(registry)
        .events(events)
        .approver(Arc::clone(&approvals) as Arc<dyn talon_core::permission::Approver>)
        .permission_checker(exec_approvals as Arc<dyn talon_core::permission::PermissionChecker>)
        .script_analyzer(Arc::new(talon_tools::runtime::script::ShellAnalyzer))
        .policy(policy)
        .rate_limiter(RateLimiter::new(
            config.tools.rate_limit_per_hour,
            config.tools.rate_limit_burst,
        ))
        .hooks(hooks(&config))
        .scrub_enabled(config.tools.scrub_credentials)
        .max_output_bytes(config.tools.max_output_bytes)
        .default_timeout(Duration::from_secs(config.tools.timeout_secs.max(1)))
        .audit(Arc::clone(&audit) as Arc<dyn talon_core::events::AuditSink>);
    if let Some(auto) = &config.tools.auto_allow {
        builder = builder.auto_allow(auto.iter().cloned());
    }
    let mut grants = None;
    if let Some(bridge) = &bridge {
        // Search mode: a call naming a deferred MCP tool activates it.
        builder = builder.deferred_activator(bridge.activator());
        grants = Some(bridge.offer_filter());
    }
    // Team and delegation tools only for agents on a team or with links (`offer`).
    builder = builder.offer_filter(Arc::new(crate::offer::Relevant {
        store: store.clone(),
        next: grants,
        operators: config.gateway.operators.clone().into(),
    }));
    let pipeline = builder.build().map_err(|e| ConfigError(e.to_string()))?;
    let mut ips = config.scrub.server_ips.clone();
    if config.scrub.detect_server_ips {
        ips.extend(crate::server_ips::detect());
    }
    pipeline.scrubber().add_server_ips(ips);
    // Search and endpoint API keys from the environment are secrets too.
    let endpoint_keys = builtin.openai_compat.iter().filter_map(|e| e.api_key());
    pipeline.scrubber().add_credentials(
        keys.brave
            .iter()
            .chain(keys.tavily.iter())
            .map(String::as_str)
            .chain(endpoint_keys),
    );
    // Stored secrets are scrubbed from every tool output, whichever entry point runs the call.
    match store.secret_values().await {
        Ok((values, broken)) => {
            pipeline.scrubber().add_credentials(values);
            for (name, error) in broken {
                tracing::error!(secret = %name, %error, "secret cannot be decrypted; it is skipped");
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot load secrets for scrubbing"),
    }

    let workspaces = match shared_workspace(&config, &overrides) {
        Some(dir) => Workspaces::Shared(dir),
        None if overrides.per_agent_workspaces => {
            Workspaces::PerAgentUser(data_dir.join("workspaces"))
        }
        None => Workspaces::Shared(std::env::current_dir().map_err(|e| {
            ConfigError(format!(
                "the current directory is not usable as the workspace ({e}); pass --workspace DIR"
            ))
        })?),
    };
    let callers = Callers::new(
        workspaces,
        config.agents.default.clone(),
        Arc::new(crate::store::StoreAgents(store.clone())),
    );
    let mut template = CallContext::new("");
    template.workspace = callers.workspaces().shared().map(PathBuf::from);
    template.agent_key = Some(agent);
    template.provider = overrides.provider;
    template.permission_mode = mode;
    // Entry points that are not an agent's turn (MCP, the tools API, the CLI) speak GoClaw's
    // names, one tool per job; a turn chooses by its provider (see agent_runs).
    template.dialect = Some(talon_core::policy::Dialect::Goclaw);
    let pipeline = Arc::new(pipeline);
    let config_knowledge_graph = config.memory.knowledge_graph;
    let channels = crate::channels::Channels::open(&config.channels, &store).await?;
    // The tools that start agent runs belong to the runner that runs them.
    let mut runner = crate::runner::Runner::new(crate::agent_runs::TurnEngine::new(
        config,
        Arc::clone(&pipeline),
        template.clone(),
        callers.clone(),
        store.clone(),
    ));
    let questions = Arc::new(talon_core::questions::Questions::new(
        pipeline.events().clone(),
    ));
    if overrides.http_questions {
        runner = runner.with_questions(Arc::clone(&questions));
    }
    if let Some(embedder) = &embedder {
        runner = runner.with_embedder(Arc::clone(embedder));
    }
    runner = runner
        .with_skills(builtins.skills.clone())
        .with_channels(channels.clone());
    if config_knowledge_graph && !overrides.one_shot {
        crate::knowledge_index::spawn(runner.clone());
    }
    runner
        .register_run_tools(pipeline.registry())
        .and_then(|()| runner.register_task_tools(pipeline.registry(), &shell))
        .and_then(|()| runner.register_team_tools(pipeline.registry()))
        .and_then(|()| runner.register_cron_tool(pipeline.registry()))
        .and_then(|()| {
            builtins.register_agent_services(
                pipeline.registry(),
                Arc::new(runner.clone()),
                Arc::new(runner.clone()),
            )
        })
        .map_err(|e| ConfigError(format!("registering the run tools: {e}")))?;
    if !channels.is_empty() {
        let registry = pipeline.registry();
        registry
            .register(crate::channels::tools::Message {
                channels: channels.clone(),
                fs: Arc::clone(&builtins.fs),
            })
            .and_then(|()| {
                registry.register(crate::channels::tools::CreateForumTopic {
                    channels: channels.clone(),
                })
            })
            .map_err(|e| ConfigError(format!("registering the channel tools: {e}")))?;
    }
    // Custom tools last: every built-in name is taken by then, so none can be shadowed.
    let custom = crate::custom_tools::CustomTools::new(
        store.clone(),
        pipeline.registry(),
        Arc::clone(&builtins.fs),
        Arc::clone(&shell),
    );
    let revision = store.custom_tools_revision().await.ok();
    if let Err(e) = custom.sync().await {
        tracing::error!(error = %e, "cannot load the custom tools");
    }
    if !overrides.one_shot {
        tokio::spawn(custom.follow(revision));
    }
    Ok(Runtime {
        pipeline,
        template,
        store,
        callers,
        data_dir,
        approvals,
        audit,
        shell,
        bridge,
        runner,
        questions,
        channels,
    })
}

/// Connects the MCP servers of `talon.toml` and of the store, in parallel; one that fails is
/// skipped unless it is required. One-shot commands wait for every server (they need the tools
/// now) and return with no bridge when there are none; `talon mcp` and `talon serve` start at
/// once, gain each server's tools as it answers, and follow the store's servers while they run.
async fn connect_mcp_servers(
    config: &Config,
    store: &Store,
    registry: &Arc<Registry>,
    embedder: Option<&Arc<dyn talon_embed::Embedder>>,
    one_shot: bool,
    wait: bool,
) -> Result<Option<Arc<talon_bridge::Bridge>>, BuildError> {
    let vault = crate::mcp_store::vault(store);
    let from_file = crate::mcp_servers_config::servers(&config.mcp_servers, &vault)
        .map_err(|e| ConfigError(e.to_string()))?;
    let shadowed: std::collections::BTreeSet<String> = config.mcp_servers.keys().cloned().collect();
    // Read before the servers: a change made while Talon starts is caught by `follow`.
    let revision = store.mcp_revision().await.ok();
    let stored = crate::mcp_store::stored_servers(store, &shadowed, &vault)
        .await
        .map_err(|e| BuildError::Store(format!("reading the stored MCP servers: {e}")))?;
    if one_shot && from_file.is_empty() && stored.is_empty() {
        return Ok(None);
    }
    let dialect = config
        .mcp
        .dialect()
        .map_err(|e| ConfigError(e.to_string()))?;
    let access = crate::mcp_store::StoreAccess {
        store: store.clone(),
    };
    let bridge = talon_bridge::Bridge::new(
        registry,
        dialect,
        Some(Arc::new(access) as Arc<dyn talon_bridge::access::Access>),
    );
    if let Some(threshold) = config.mcp.search_threshold {
        bridge.set_search_threshold(threshold);
    }
    if let Some(embedder) = embedder {
        bridge.set_embedder(Arc::clone(embedder));
    }
    let startup = if wait {
        talon_bridge::Startup::Wait
    } else {
        talon_bridge::Startup::Background
    };
    let all: Vec<_> = from_file.iter().chain(&stored).cloned().collect();
    let connected = bridge
        .connect(&all, startup)
        .await
        .map_err(|e| ConfigError(format!("a required MCP server is unavailable: {e}")))?;
    for failure in &connected.failed {
        tracing::warn!("{failure}");
    }
    if !one_shot {
        let current = stored.into_iter().map(|c| (c.name.clone(), c)).collect();
        tokio::spawn(crate::mcp_store::follow(
            store.clone(),
            Arc::downgrade(&bridge),
            shadowed,
            vault,
            from_file,
            current,
            revision,
        ));
    }
    Ok(Some(bridge))
}

/// Checks everything that needs no I/O beyond the file system — the permission mode, the policy,
/// hooks, `[exec]` and `--workspace` — before the store is opened or created.
/// Checks `config` as a start would, without opening anything (`talon config show`).
pub fn check(
    config: &Config,
    overrides: &Overrides,
    data_dir: &std::path::Path,
) -> Result<(), ConfigError> {
    validate(config, overrides, data_dir).map(|_| ())
}

fn validate(
    config: &Config,
    overrides: &Overrides,
    data_dir: &std::path::Path,
) -> Result<Validated, ConfigError> {
    let mut problems = Vec::new();
    if let Err(e) = config
        .web
        .to_config(&crate::web_config::SearchKeys::default())
    {
        problems.push(e.to_string());
    }
    if let Err(e) = config.mcp.dialect() {
        problems.push(e.to_string());
    }
    if let Some(Err(e)) = config.memory.embeddings.as_ref().map(|e| e.check()) {
        problems.push(e.0);
    }
    if let Err(e) = crate::mcp_servers_config::specs(&config.mcp_servers) {
        problems.push(e.to_string());
    }
    for (name, section) in &config.channels {
        if let Err(e) = section.check(name) {
            problems.push(e.0);
        }
    }
    for (name, section) in &config.openai_compat {
        if let Err(e) = section.check(name) {
            problems.push(e.0);
        }
    }
    let exec_policies =
        match crate::exec_policy::policies(&config.exec.approvals, &config.exec.agents) {
            Ok(policies) => Some(policies),
            Err(mistakes) => {
                problems.extend(mistakes.0);
                None
            }
        };
    for (flag, dir) in [
        ("--workspace", overrides.workspace.as_ref()),
        (
            "gateway.workspace",
            config
                .gateway
                .workspace
                .as_ref()
                .filter(|_| overrides.per_agent_workspaces && overrides.workspace.is_none()),
        ),
    ] {
        if let Some(dir) = dir
            && !dir.is_dir()
        {
            problems.push(format!("{flag} {} is not a directory", dir.display()));
        }
    }
    let mode: Option<PermissionMode> = match config.tools.permission_mode.as_deref().map(str::parse)
    {
        None => Some(overrides.default_mode),
        Some(Ok(mode)) => Some(mode),
        Some(Err(e)) => {
            problems.push(format!("tools.permission_mode: {e}"));
            None
        }
    };
    let policy = match PolicyEngine::new(config.policy()) {
        Ok(p) => Some(p),
        Err(errors) => {
            problems.extend(errors.iter().map(ToString::to_string));
            None
        }
    };
    // A hook whose program is missing is found now, not at the first call it should gate; one
    // an agent could write is refused like a configuration file it could write.
    let writable = writable_places(config, overrides, data_dir);
    let h = &config.hooks;
    for (event, entries) in [
        ("pre_tool_use", &h.pre_tool_use),
        ("post_tool_use", &h.post_tool_use),
        ("post_tool_use_failure", &h.post_tool_use_failure),
        ("session_start", &h.session_start),
        ("user_prompt_submit", &h.user_prompt_submit),
        ("stop", &h.stop),
        ("subagent_start", &h.subagent_start),
        ("subagent_stop", &h.subagent_stop),
    ] {
        for (i, entry) in entries.iter().enumerate() {
            if entry.command.trim().is_empty() {
                problems.push(format!("hooks.{event}[{i}].command: must not be empty"));
            } else {
                match CommandHook::new(entry.command.clone()).check() {
                    Err(e) => problems.push(format!("hooks.{event}[{i}].command: {e}")),
                    Ok(Some(program)) => {
                        if let Some(place) = crate::config_location::inside(&program, &writable) {
                            problems.push(format!(
                                "hooks.{event}[{i}].command: its program {} lies inside {} {}, where the agents' tools can write it; keep hook programs outside",
                                program.display(),
                                place.what,
                                place.path.display()
                            ));
                        }
                    }
                    Ok(None) => {}
                }
            }
        }
    }
    if let Some(source) = &config.source
        && let Err(e) = crate::config_location::check(source, &writable)
    {
        problems.push(e.to_string());
    }
    if let Err(e) = crate::config_location::check_data_dir(data_dir, &writable) {
        problems.push(e.to_string());
    }
    // Sandboxed commands must not see Talon's state or its configuration (tokens, URLs).
    let hidden: Vec<PathBuf> = std::iter::once(data_dir.to_path_buf())
        .chain(config.source.clone())
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    let shell = match config.exec.shell(hidden) {
        Ok(mut shell) => {
            // This binary runs the init of session sandboxes.
            shell.helper = std::env::current_exe().ok();
            // A gateway's commands are many people's.
            shell.shared = overrides.per_agent_workspaces;
            Some(shell)
        }
        Err(e) => {
            problems.push(e.0);
            None
        }
    };
    match (mode, policy, shell, exec_policies, problems.is_empty()) {
        (Some(mode), Some(policy), Some(shell), Some(exec_policies), true) => Ok(Validated {
            mode,
            policy,
            shell,
            exec_policies,
        }),
        _ => Err(ConfigError(format!(
            "invalid configuration: {}",
            problems.join("; ")
        ))),
    }
}

/// The one workspace every call shares, if there is one: `--workspace`, else (per-agent
/// entry points) `gateway.workspace`.
fn shared_workspace(config: &Config, overrides: &Overrides) -> Option<PathBuf> {
    overrides.workspace.clone().or_else(|| {
        overrides
            .per_agent_workspaces
            .then(|| config.gateway.workspace.clone())
            .flatten()
    })
}

/// Where the agents' tools can write: the workspace (shared, or the root of the per-agent ones),
/// and the writable roots of the sandbox and of the file tools.
fn writable_places(
    config: &Config,
    overrides: &Overrides,
    data_dir: &std::path::Path,
) -> Vec<crate::config_location::Writable> {
    use crate::config_location::Writable;
    let workspace = match shared_workspace(config, overrides) {
        Some(dir) => Some(dir),
        None if overrides.per_agent_workspaces => Some(data_dir.join("workspaces")),
        None => std::env::current_dir().ok(),
    };
    let mut places: Vec<Writable> = workspace
        .into_iter()
        .map(|path| Writable {
            what: "the workspace",
            path,
        })
        .collect();
    places.extend(config.exec.writable_roots.iter().map(|path| Writable {
        what: "exec.writable_roots entry",
        path: path.clone(),
    }));
    places.extend(config.fs.write_roots.iter().map(|path| Writable {
        what: "fs.write_roots entry",
        path: path.clone(),
    }));
    places
}

/// The configuration, checked and turned into what the runtime is built from.
struct Validated {
    mode: PermissionMode,
    policy: PolicyEngine,
    shell: talon_exec::ShellConfig,
    /// Shell approval settings: every agent's defaults, and the configured agents' own.
    exec_policies: (
        talon_tools::runtime::approvals::AgentExecPolicy,
        std::collections::HashMap<String, talon_tools::runtime::approvals::AgentExecPolicy>,
    ),
}

/// Creates the default agent and the configured ones on first start, and checks `--agent`.
/// Returns the agent calls run as unless they name another.
async fn ensure_agents(
    config: &Config,
    store: &Store,
    requested: Option<&str>,
) -> Result<String, BuildError> {
    let default = config.agents.default.as_str();
    let configured =
        std::iter::once(default).chain(config.agents.entries.keys().map(String::as_str));
    for key in configured {
        match store.ensure_agent(key).await {
            Ok(_) => {}
            Err(e @ talon_store::StoreError::Invalid { .. }) => {
                return Err(ConfigError(format!("agents: {e}")).into());
            }
            Err(e) => {
                return Err(BuildError::Store(format!(
                    "cannot create agent {key:?}: {e}"
                )));
            }
        }
    }
    let Some(agent) = requested.filter(|a| !a.is_empty()) else {
        return Ok(default.to_string());
    };
    match store.agent(agent).await {
        Ok(Some(_)) => Ok(agent.to_string()),
        Ok(None) => {
            let known = store
                .agents()
                .await
                .map(|agents| {
                    agents
                        .into_iter()
                        .map(|a| a.key)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            Err(ConfigError(format!(
                "unknown agent {agent:?}; known agents: {known}. Create it with `talon agents create {agent}` or add [agents.{agent}] to talon.toml"
            ))
            .into())
        }
        Err(e) => Err(BuildError::Store(format!(
            "cannot look up agent {agent:?}: {e}"
        ))),
    }
}

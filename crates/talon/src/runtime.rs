//! Wires the configuration into one pipeline shared by every entry point.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use talon_core::hooks::{CommandHook, HookEvent, HookMatcher, Hooks};
use talon_core::permission::PermissionMode;
use talon_core::policy::PolicyEngine;
use talon_core::rate_limit::RateLimiter;
use talon_core::{CallContext, Pipeline, Registry};

use crate::config::{Config, ConfigError, HookEntry};

/// What the commands need: the pipeline and the context template for their calls.
pub struct Runtime {
    pub pipeline: Arc<Pipeline>,
    pub template: CallContext,
}

/// Per-command choices layered over the configuration.
#[derive(Debug, Default)]
pub struct Overrides {
    pub profile: Option<String>,
    pub agent: Option<String>,
    pub provider: Option<String>,
    pub workspace: Option<PathBuf>,
    /// Permission mode when `tools.permission_mode` is not configured: `talon tool call` is a
    /// person running one tool on purpose (bypassPermissions); MCP clients and API callers ask
    /// their own users, so file edits are accepted and riskier tools still need approval
    /// (acceptEdits).
    pub default_mode: PermissionMode,
    /// `--data-dir`, if given (denied to the file tools).
    pub data_dir: Option<PathBuf>,
    /// The store, for the tools that keep state (memory).
    pub store: Option<talon_store::Store>,
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
                HookMatcher::new(entry.matcher.as_deref(), Arc::new(hook)),
            );
        }
    };
    add(HookEvent::PreToolUse, &config.hooks.pre_tool_use);
    add(HookEvent::PostToolUse, &config.hooks.post_tool_use);
    add(
        HookEvent::PostToolUseFailure,
        &config.hooks.post_tool_use_failure,
    );
    hooks
}

/// Builds the registry, policy and pipeline; every configuration mistake is reported at once.
pub fn build(mut config: Config, overrides: Overrides) -> Result<Runtime, ConfigError> {
    if let Some(profile) = overrides.profile {
        config.tools.profile = Some(profile);
    }
    let mut problems = Vec::new();
    if let Some(dir) = &overrides.workspace
        && !dir.is_dir()
    {
        problems.push(format!("--workspace {} is not a directory", dir.display()));
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
    if let Some(agent) = &overrides.agent
        && !config.agents.contains_key(agent)
    {
        let known: Vec<&str> = config.agents.keys().map(String::as_str).collect();
        problems.push(format!(
            "unknown agent {agent:?}; configured agents: {}",
            if known.is_empty() {
                "(none)".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    for (i, entry) in config.hooks.pre_tool_use.iter().enumerate() {
        if entry.command.trim().is_empty() {
            problems.push(format!(
                "hooks.pre_tool_use[{i}].command: must not be empty"
            ));
        }
    }
    let (Some(mode), Some(policy), true) = (mode, policy, problems.is_empty()) else {
        return Err(ConfigError(format!(
            "invalid configuration: {}",
            problems.join("; ")
        )));
    };

    let registry = Arc::new(Registry::new());
    let builtin = talon_tools::BuiltinConfig {
        store: overrides.store.clone(),
        ..config.builtin(&crate::config::data_dir(overrides.data_dir.as_deref()))
    };
    talon_tools::register_builtin(&registry, &builtin)
        .map_err(|e| ConfigError(format!("registering built-in tools: {e}")))?;
    let mut builder = Pipeline::builder(registry)
        .policy(policy)
        .rate_limiter(RateLimiter::new(
            config.tools.rate_limit_per_hour,
            config.tools.rate_limit_burst,
        ))
        .hooks(hooks(&config))
        .scrub_enabled(config.tools.scrub_credentials)
        .max_output_bytes(config.tools.max_output_bytes)
        .default_timeout(Duration::from_secs(config.tools.timeout_secs.max(1)));
    if let Some(store) = &overrides.store {
        builder = builder.audit(std::sync::Arc::new(crate::audit::StoreAudit::start(
            store.clone(),
        )));
    }
    if let Some(auto) = &config.tools.auto_allow {
        builder = builder.auto_allow(auto.iter().cloned());
    }
    let pipeline = builder.build().map_err(|e| ConfigError(e.to_string()))?;
    let mut ips = config.scrub.server_ips.clone();
    if config.scrub.detect_server_ips {
        ips.extend(crate::server_ips::detect());
    }
    pipeline.scrubber().add_server_ips(ips);

    let mut template = CallContext::new("");
    template.workspace = overrides.workspace.or_else(|| std::env::current_dir().ok());
    template.agent_key = overrides.agent;
    template.provider = overrides.provider;
    template.permission_mode = mode;
    Ok(Runtime {
        pipeline: Arc::new(pipeline),
        template,
    })
}

//! The `gateway` tool (seed 000, group `automation`): the running gateway's status, its
//! configuration read (secrets replaced) and changed (a validated patch of the agent loop's
//! defaults and the search provider order only; see [`config_edit`]), and a reload that restarts the
//! gateway in place with the configuration on disk.
//!
//! **For the operator only**, decided in one place ([`operator`]): a direct call through the
//! gateway's authenticated entry points (the tools API, MCP, `talon tool`), or a top-level turn
//! of a user the operator names in `[gateway] operators`. A subagent, a delegated or team run,
//! a scheduled job and any other user are refused (GoClaw also denies it to every subagent).
//! Its risk is high, so in the default permission mode each call is asked of a person.
//!
//! Registered by `talon serve` only: a reload restarts that process (`serve` sees
//! [`GatewayControl::restart_requested`], stops serving, and executes itself again with the
//! same arguments and environment), after the configuration was loaded successfully — a
//! reload never takes a working gateway down for a file that does not load.

pub mod config_edit;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::context::RunKind;
use talon_core::visible::visible;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;
use tokio_util::sync::CancellationToken;

/// What the gateway tool reads and controls; `talon serve` makes one.
#[derive(Clone)]
pub struct GatewayControl {
    /// The configuration file (none: defaults and `TALON_*` variables only).
    pub config_file: Option<PathBuf>,
    /// `[gateway] operators`: users whose own turns may use the tool.
    pub operators: Arc<[String]>,
    /// The address served.
    pub bind: String,
    pub data_dir: PathBuf,
    pub store: Store,
    pub registry: Arc<Registry>,
    /// The configured channels, by name.
    pub channels: Vec<String>,
    pub started: Instant,
    /// Cancelled (half a second after a reload was asked for, so that the answer leaves
    /// first) to make `serve` stop and start again.
    pub restart: CancellationToken,
    /// Set as soon as a reload is asked for.
    pub reloading: Arc<std::sync::atomic::AtomicBool>,
}

impl GatewayControl {
    /// Whether a reload has been asked for.
    pub fn restart_requested(&self) -> bool {
        self.reloading.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A call that is not the operator's (see the module docs); the message says who may.
#[derive(Debug, thiserror::Error)]
#[error(
    "gateway is for the gateway's operator: a direct call through the tools API, MCP or `talon tool`, or a turn of a user listed in [gateway] operators; it is never available to subagents, delegated, team or scheduled runs"
)]
pub struct NotOperator;

/// Whether `ctx` is the operator's (see the module docs).
pub fn operator(ctx: &CallContext, operators: &[String]) -> Result<(), NotOperator> {
    let own_turn = ctx.spawn_depth == 0;
    let direct = own_turn && ctx.run_kind == RunKind::Api;
    let named = own_turn
        && ctx.run_kind == RunKind::Interactive
        && ctx
            .user
            .as_deref()
            .is_some_and(|u| operators.iter().any(|o| o == u));
    if direct || named {
        Ok(())
    } else {
        Err(NotOperator)
    }
}

/// Input of [`Gateway`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayInput {
    /// status: version, uptime, database, tools, channels. config.get: the configuration
    /// file, secrets replaced. config.patch: change [chat] keys or web.search.providers / timeout_secs (`patch`).
    /// reload: restart the gateway with the configuration file as it is now.
    pub action: String,
    /// config.get: one section, such as "chat" or "web.search" (default: the whole file).
    #[serde(default)]
    pub section: Option<String>,
    /// config.patch: the keys to change, as nested objects; null removes a key. Example:
    /// {"chat": {"max_tokens": 8192}}.
    #[serde(default)]
    pub patch: Option<serde_json::Value>,
}

/// The `gateway` tool.
pub struct Gateway {
    pub control: GatewayControl,
}

impl Tool for Gateway {
    type Input = GatewayInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "gateway",
            "Administer the running gateway (operator only). status: version, uptime, \
             database, tools and channels. config.get: the configuration file with secrets \
             replaced (section: one section). config.patch: change keys of [chat], or \
             web.search.providers and timeout_secs (patch: {\"chat\": {\"max_tokens\": 8192}}; null removes a key); the \
             file is written only if the result loads, and the change applies after reload. \
             reload: restart the gateway with the file as it is now (running turns end).",
            SideEffect::Mutating,
        )
        .with_risk(talon_core::Risk::High)
        .in_group("automation")
        .for_operator_only()
    }

    async fn execute(&self, call: Authorized<GatewayInput>) -> ToolOutput {
        let input = call.input();
        if let Err(e) = operator(call.ctx(), &self.control.operators) {
            return ToolOutput::error(e.to_string());
        }
        let done = match input.action.as_str() {
            "status" => self.status().await,
            "config.get" => self.config_get(input.section.as_deref()),
            "config.patch" => self.config_patch(input.patch.as_ref()),
            "reload" => self.reload(),
            other => Err(format!(
                "action {} is not known; use status, config.get, config.patch or reload",
                visible(other)
            )),
        };
        match done {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e),
        }
    }
}

impl Gateway {
    fn file(&self) -> Result<&PathBuf, String> {
        self.control.config_file.as_ref().ok_or_else(|| {
            "this gateway runs without a configuration file (defaults and TALON_* variables); start it with --config FILE to read or change one".to_string()
        })
    }

    async fn status(&self) -> Result<String, String> {
        let c = &self.control;
        let agents = c
            .store
            .agents()
            .await
            .map_or_else(|e| format!("unknown ({e})"), |a| a.len().to_string());
        Ok(format!(
            "talon {} (pid {}), up {} s, serving {}\nconfiguration: {}\ndata directory: {}\ndatabase: {:?}\nagents: {agents}\ntools registered: {}\nchannels: {}{}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            c.started.elapsed().as_secs(),
            c.bind,
            c.config_file
                .as_ref()
                .map_or_else(|| "none".to_string(), |f| f.display().to_string()),
            c.data_dir.display(),
            c.store.engine(),
            c.registry.len(),
            if c.channels.is_empty() {
                "none".to_string()
            } else {
                c.channels.join(", ")
            },
            if c.restart_requested() {
                "\na reload is under way"
            } else {
                ""
            }
        ))
    }

    fn config_get(&self, section: Option<&str>) -> Result<String, String> {
        let file = self.file()?;
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let shown = config_edit::shown(&text, section).map_err(|e| e.to_string())?;
        let overridden: Vec<String> = std::env::vars()
            .map(|(k, _)| k)
            .filter(|k| k.starts_with("TALON_") && k.contains("__"))
            .collect();
        let note = if overridden.is_empty() {
            String::new()
        } else {
            format!(
                "\n# These environment variables override the file: {}",
                overridden.join(", ")
            )
        };
        Ok(format!("# {}\n{shown}{note}", file.display()))
    }

    fn config_patch(&self, patch: Option<&serde_json::Value>) -> Result<String, String> {
        let patch = patch.ok_or_else(|| {
            "config.patch needs patch: the keys to change, such as {\"chat\": {\"max_tokens\": 8192}}".to_string()
        })?;
        let changes = config_edit::changes(patch).map_err(|e| e.to_string())?;
        let file = self.file()?;
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let (next, said) = config_edit::apply(&text, &changes).map_err(|e| e.to_string())?;
        config_edit::write_checked(file, &next).map_err(|e| e.to_string())?;
        tracing::warn!(file = %file.display(), changes = %said.join("; "), "the gateway tool changed the configuration");
        Ok(format!(
            "changed {} (the previous file is kept as {}.bak):\n{}\nIt applies after action reload.",
            file.display(),
            file.display(),
            said.join("\n")
        ))
    }

    fn reload(&self) -> Result<String, String> {
        if let Some(file) = &self.control.config_file {
            crate::config::load(Some(file)).map_err(|e| {
                format!("not reloading: the configuration does not load, so the gateway keeps running as it is: {e}")
            })?;
        }
        self.control
            .reloading
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let restart = self.control.restart.clone();
        // After this answer is on its way: the call's own turn ends with the restart.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            restart.cancel();
        });
        tracing::warn!("the gateway tool asked for a reload: restarting");
        Ok("reloading: the gateway stops serving in a moment and starts again with the configuration on disk; running turns end (they are marked interrupted).".into())
    }
}

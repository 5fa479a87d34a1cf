//! `talon.toml` and its environment overrides.
//!
//! Sources, later ones winning: the file (`--config`, `$TALON_CONFIG`, or
//! `$XDG_CONFIG_HOME/talon/talon.toml`, default `~/.config/talon/talon.toml`), then
//! `TALON_<SECTION>__<KEY>` environment variables. Unknown keys are errors (a typo must not
//! silently fall back to a default), and every error names its key. A `./talon.toml` is never
//! read implicitly: the current directory is an agent's workspace, and a file an agent writes
//! must not become configuration that runs host commands (see `config_location`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;
use talon_core::policy::{
    AgentToolPolicy, PolicyConfig, ProviderPolicy, SubagentPolicy, ToolPolicy,
};

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub tools: ToolsConfig,
    pub agents: AgentsSection,
    pub subagents: SubagentPolicy,
    pub gateway: GatewayConfig,
    pub hooks: HooksConfig,
    pub scrub: ScrubConfig,
    pub fs: FsSection,
    pub exec: ExecSection,
    pub web: crate::web_config::WebSection,
    pub mcp: crate::mcp_servers_config::McpSection,
    /// `[mcp_server]`: Talon as an MCP server (`talon mcp`, serve's `/mcp`).
    pub mcp_server: McpServerSettings,
    pub mcp_servers:
        std::collections::BTreeMap<String, crate::mcp_servers_config::McpServerSection>,
    pub database: DatabaseSection,
    /// `[memory]`: the embedding model of hybrid memory search.
    pub memory: crate::memory_config::MemorySection,
    /// `[providers.<name>]`: the model providers agents talk to.
    pub providers: BTreeMap<String, crate::chat_config::ProviderSection>,
    /// `[chat]`: the agent loop's defaults.
    pub chat: crate::chat_config::ChatSection,
    /// `[channels.<name>]`: the chat platforms the gateway sends through (and reads).
    pub channels: BTreeMap<String, crate::channels::ChannelSection>,
    /// `[openai_compat.<name>]`: the OpenAI-compatible endpoints `openai_compat_call` may call.
    pub openai_compat:
        std::collections::BTreeMap<String, crate::openai_compat_config::OpenAiCompatSection>,
    /// The file this configuration came from (hidden from sandboxed commands).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// `[exec]`: how `exec` and `Bash` run commands.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecSection {
    /// `all` (default), `non-main` (every agent but main/default) or `off` (on the host).
    pub sandbox: String,
    /// The sandbox backend: `auto` (default: bubblewrap, else Landlock), `bubblewrap`,
    /// `landlock` or `docker`.
    pub backend: String,
    /// The operator's word that one person uses this `talon serve`, so the Landlock backend may
    /// run its commands there: Landlock cannot hide one user's processes (their command lines
    /// under `/proc`) from another's, so a gateway refuses it otherwise (issue 35).
    pub landlock_single_user: bool,
    /// `[exec.docker]`: the Docker backend's container settings (GoClaw's names and defaults).
    pub docker: talon_exec::sandbox::docker::DockerSettings,
    /// What sandboxed commands reach: `"off"` (the default, no network), `"proxy"` (only
    /// `allowed_domains`, through Talon's filtering proxy) or `"host"` (the host's network,
    /// unfiltered). `true` is refused as ambiguous; `false` means `"off"`.
    pub network: NetworkSetting,
    /// Proxy mode: domain patterns commands may reach (`example.com`, `*.example.com`,
    /// `.example.com`, an IP literal; `["*"]` for every public host).
    pub allowed_domains: Vec<String>,
    /// Proxy mode: domain patterns refused even when allowed.
    pub denied_domains: Vec<String>,
    /// Proxy mode: non-public address ranges made reachable (an intranet, `127.0.0.1/32`);
    /// cloud metadata addresses stay unreachable whatever is listed.
    pub allowed_cidrs: Vec<String>,
    /// Environment variables passed to commands besides PATH, HOME, LANG, TERM, USER, …
    pub env_passthrough: Vec<String>,
    /// Writable directories besides the call's workspace.
    pub writable_roots: Vec<PathBuf>,
    /// Paths hidden from sandboxed commands besides the host's credential stores (`~/.ssh`,
    /// `~/.aws`, …, hidden by default); absolute or `~/…`.
    pub hidden_paths: Vec<PathBuf>,
    /// Default credential stores shown to sandboxed commands after all (`["~/.npmrc"]`).
    pub unhidden_paths: Vec<PathBuf>,
    /// Limits per command (GoClaw's sandbox defaults).
    pub memory_mb: u64,
    pub cpu_secs: u64,
    pub file_size_mb: u64,
    /// `[exec.approvals]`: when commands run without a person (GoClaw's modes, Claude Code's
    /// rules, deny groups).
    pub approvals: crate::exec_policy::ApprovalSettings,
    /// `[exec.agents.<name>]`: one agent's approval settings over `[exec.approvals]`.
    pub agents: std::collections::HashMap<String, crate::exec_policy::ApprovalSettings>,
}

impl Default for ExecSection {
    fn default() -> Self {
        let limits = talon_exec::Limits::default();
        Self {
            sandbox: "all".into(),
            backend: "auto".into(),
            landlock_single_user: false,
            docker: Default::default(),
            network: NetworkSetting::default(),
            allowed_domains: Vec::new(),
            denied_domains: Vec::new(),
            allowed_cidrs: Vec::new(),
            env_passthrough: Vec::new(),
            writable_roots: Vec::new(),
            hidden_paths: Vec::new(),
            unhidden_paths: Vec::new(),
            memory_mb: limits.memory_mb,
            cpu_secs: limits.cpu_secs,
            file_size_mb: limits.file_size_mb,
            approvals: Default::default(),
            agents: Default::default(),
        }
    }
}

/// `[exec] network`: a mode name, or the boolean of earlier versions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum NetworkSetting {
    Flag(bool),
    Mode(String),
}

impl Default for NetworkSetting {
    fn default() -> Self {
        Self::Mode("off".into())
    }
}

impl ExecSection {
    /// The network mode; proxy mode's lists are parsed and checked here, so a bad pattern stops
    /// Talon at startup naming its key.
    fn network_mode(&self) -> Result<talon_exec::NetworkMode, ConfigError> {
        let lists = talon_exec::NetworkLists {
            allowed_domains: self.allowed_domains.clone(),
            denied_domains: self.denied_domains.clone(),
            allowed_cidrs: self.allowed_cidrs.clone(),
        };
        let mode = match &self.network {
            NetworkSetting::Flag(false) => "off",
            NetworkSetting::Flag(true) => {
                return Err(ConfigError(
                    "exec.network: `true` no longer says which network: use \"proxy\" (only allowed_domains, \
                     through Talon's filtering proxy) or \"host\" (the host's network, unfiltered)"
                        .into(),
                ));
            }
            NetworkSetting::Mode(mode) => mode.as_str(),
        };
        let configured = |e: talon_exec::NetworkPolicyError| ConfigError(format!("exec.{e}"));
        match mode {
            "proxy" => Ok(talon_exec::NetworkMode::Proxy(std::sync::Arc::new(
                talon_exec::NetworkPolicy::from_lists(&lists).map_err(configured)?,
            ))),
            "off" | "host" => {
                // The lists only apply to the proxy; still reject typos before they matter.
                let mut check = lists;
                if check.allowed_domains.is_empty() {
                    check.allowed_domains.push("*".into());
                }
                talon_exec::NetworkPolicy::from_lists(&check).map_err(configured)?;
                Ok(if mode == "off" {
                    talon_exec::NetworkMode::Off
                } else {
                    talon_exec::NetworkMode::Host
                })
            }
            other => Err(ConfigError(format!(
                "exec.network: unknown mode {other:?}: use \"off\" (the default), \"proxy\" or \"host\""
            ))),
        }
    }

    /// The shell settings; `hidden` are paths commands must not see (data dir, config file).
    pub fn shell(&self, hidden: Vec<PathBuf>) -> Result<talon_exec::ShellConfig, ConfigError> {
        let mode = self
            .sandbox
            .parse()
            .map_err(|e| ConfigError(format!("exec.sandbox: {e}")))?;
        let backend = self
            .backend
            .parse()
            .map_err(|e| ConfigError(format!("exec.backend: {e}")))?;
        self.docker.validate().map_err(ConfigError)?;
        let credentials = talon_exec::sandbox::CredentialHiding {
            extra: self.hidden_paths.clone(),
            unhidden: self.unhidden_paths.clone(),
        };
        credentials.validate().map_err(ConfigError)?;
        let env = talon_exec::ChildEnv::with_extra(&self.env_passthrough)
            .map_err(|e| ConfigError(e.to_string()))?;
        let network = self.network_mode()?;
        if mode == talon_exec::SandboxMode::Off && !network.is_off() {
            tracing::warn!(
                network = network.name(),
                "exec.network has no effect with exec.sandbox = \"off\": commands run on the host with its network"
            );
        }
        Ok(talon_exec::ShellConfig {
            mode,
            env,
            limits: talon_exec::Limits {
                memory_mb: self.memory_mb,
                cpu_secs: self.cpu_secs,
                file_size_mb: self.file_size_mb,
                ..talon_exec::Limits::default()
            },
            hidden,
            credentials,
            extra_writable: self.writable_roots.clone(),
            network,
            helper: None,
            one_shot: false,
            shared: false,
            landlock_single_user: self.landlock_single_user,
            backend,
            docker: self.docker.clone(),
        })
    }
}

/// `[database]`: where state lives (SQLite in the data directory when unset).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSection {
    /// `postgres://…` to share state between instances (`TALON_DATABASE_URL` wins).
    pub url: Option<String>,
    /// PostgreSQL schema to use.
    pub schema: Option<String>,
}

/// `[fs]`: file-tool confinement.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FsSection {
    /// Workspace-relative prefixes refused and hidden from listings (`.talon` always is).
    pub deny: Vec<String>,
    /// Extra directories reachable by absolute path, read-only (skills directories).
    pub read_roots: Vec<PathBuf>,
    /// Extra directories reachable by absolute path, writable.
    pub write_roots: Vec<PathBuf>,
    /// Let content tools open regular files that have more than one name. Off by default: a
    /// hard link's other name can be outside the workspace, so its content is not the
    /// workspace's to hand out.
    pub allow_hard_links: bool,
}

/// `[tools]`: the global policy and pipeline limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    pub profile: Option<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub also_allow: Vec<String>,
    pub by_provider: BTreeMap<String, ProviderPolicy>,
    /// `claude_code`, `goclaw` or `both`: which dialect's tool a model is offered where both do
    /// the same job. Unset: MCP clients get GoClaw's names (they do not shadow a host's own Read
    /// and Bash); an agent on an Anthropic provider gets Claude Code's, on any other GoClaw's.
    pub dialect: Option<talon_core::policy::Dialect>,
    /// `default`, `acceptEdits`, `bypassPermissions`, `plan` or `dontAsk`. Unset, each entry point
    /// uses its own default (see `runtime::Overrides::default_mode`).
    pub permission_mode: Option<String>,
    /// Tools allowed without asking.
    pub auto_allow: Option<Vec<String>>,
    /// 0 disables rate limiting.
    pub rate_limit_per_hour: u32,
    pub rate_limit_burst: u32,
    pub scrub_credentials: bool,
    pub max_output_bytes: usize,
    pub timeout_secs: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            profile: None,
            allow: Vec::new(),
            deny: Vec::new(),
            also_allow: Vec::new(),
            by_provider: BTreeMap::new(),
            dialect: None,
            permission_mode: None,
            auto_allow: None,
            rate_limit_per_hour: talon_core::rate_limit::DEFAULT_PER_HOUR,
            rate_limit_burst: talon_core::rate_limit::DEFAULT_BURST,
            scrub_credentials: true,
            max_output_bytes: talon_core::pipeline::DEFAULT_MAX_OUTPUT_BYTES,
            timeout_secs: talon_core::pipeline::DEFAULT_TIMEOUT.as_secs(),
        }
    }
}

/// `[agents.<key>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    pub tools: AgentToolPolicy,
    /// The `[providers.<name>]` this agent talks to (default: `[chat] provider`).
    pub provider: Option<String>,
    /// The model (default: `[chat] model`, then the provider's).
    pub model: Option<String>,
    /// The system prompt (default: `[chat] system`).
    pub system: Option<String>,
    /// A small model on the same provider for side questions such as WebFetch's prompt
    /// (default: `[chat] small_model`; none: the page goes to the agent's own model).
    pub small_model: Option<String>,
}

/// `[agents]`: `default = "KEY"` (the agent calls run as when they name none; created in the
/// store at first start) and one `[agents.<key>]` table per agent with its own tool policy.
/// A table named `default` configures an agent called `default`.
#[derive(Debug, Clone)]
pub struct AgentsSection {
    pub default: String,
    pub entries: BTreeMap<String, AgentConfig>,
}

impl Default for AgentsSection {
    fn default() -> Self {
        Self {
            default: talon_core::DEFAULT_AGENT.to_string(),
            entries: BTreeMap::new(),
        }
    }
}

impl<'de> Deserialize<'de> for AgentsSection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = BTreeMap::<String, serde_json::Value>::deserialize(deserializer)?;
        let mut section = AgentsSection::default();
        for (key, value) in raw {
            match value {
                serde_json::Value::String(name) if key == "default" => {
                    if name.trim().is_empty() {
                        return Err(D::Error::custom("agents.default: must name an agent"));
                    }
                    section.default = name;
                }
                value @ serde_json::Value::Object(_) => {
                    let agent = serde_json::from_value(value)
                        .map_err(|e| D::Error::custom(format!("agents.{key}: {e}")))?;
                    section.entries.insert(key, agent);
                }
                other => {
                    return Err(D::Error::custom(format!(
                        "agents.{key}: expected a table like [agents.{key}] (or, for agents.default, an agent key), found {other}"
                    )));
                }
            }
        }
        Ok(section)
    }
}

/// `[mcp_server]`: how Talon serves MCP clients.
///
/// An MCP call that needs approval is asked of the client through elicitation, or refused at
/// once when the client cannot be asked; it never waits on `/v1/approvals`. With
/// `client_confirms` the client is taken to ask its user before each tool call, as Claude Code
/// does, so what a tool's risk alone would ask (web_fetch in acceptEdits) runs; the policy,
/// deny groups, `[exec.approvals]` rules, hooks, the sandbox and the address guard still apply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerSettings {
    /// The MCP clients ask their users before each tool call. Unset: yes for `talon mcp` (a
    /// person's own client, started by it), no for serve's `/mcp` (remote clients, which may be
    /// programs with nobody to ask).
    pub client_confirms: Option<bool>,
}

/// `[gateway]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Listen address; default 127.0.0.1:8790.
    pub bind: Option<String>,
    /// Bearer token for every route but /healthz.
    pub token: Option<String>,
    /// Accepted `Host` values on every route (default: loopback names and the bind address
    /// without a token, any host with one).
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`https://ui.example`) allowed to call the gateway besides its own;
    /// default none.
    pub allowed_origins: Vec<String>,
    /// One workspace for every caller (`talon serve --workspace` wins). Unset, each agent and
    /// user gets `<data-dir>/workspaces/<agent>/<user>`.
    pub workspace: Option<PathBuf>,
    /// Users whose own turns may use the `gateway` tool (direct calls through the tools API,
    /// MCP and `talon tool` always may); default none.
    pub operators: Vec<String>,
}

/// One shell-command hook.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// Tool names or globs separated by `|`; empty or absent matches every tool.
    #[serde(default)]
    pub matcher: Option<String>,
    /// Run with `sh -c`; gets the JSON payload on stdin; exit 2 blocks with stderr as the reason.
    pub command: String,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// The agents this hook runs for; empty or absent: every agent.
    #[serde(default)]
    pub agents: Vec<String>,
}

/// `[[hooks.pre_tool_use]]`, `[[hooks.post_tool_use]]`, `[[hooks.post_tool_use_failure]]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    pub pre_tool_use: Vec<HookEntry>,
    pub post_tool_use: Vec<HookEntry>,
    pub post_tool_use_failure: Vec<HookEntry>,
    /// A session's first turn (the agent loop); the matcher matches `startup`.
    pub session_start: Vec<HookEntry>,
    /// Before a prompt reaches the model: exit 2 (or a block decision) refuses it.
    pub user_prompt_submit: Vec<HookEntry>,
    /// When the model has answered: a block decision makes it continue with the reason.
    pub stop: Vec<HookEntry>,
    /// A child run (a subagent, a delegation) starts: its added context goes before its task.
    pub subagent_start: Vec<HookEntry>,
    /// A child run has answered (instead of `stop` for it): a block decision makes it continue
    /// with the reason as its next instruction.
    pub subagent_stop: Vec<HookEntry>,
}

/// `[scrub]`: deployment-specific values to hide.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScrubConfig {
    /// Extra addresses of this server (a public IP, say), replaced by `[SERVER_IP]`.
    pub server_ips: Vec<String>,
    /// Also hide the addresses of this host's network interfaces (default true).
    pub detect_server_ips: bool,
}

impl Default for ScrubConfig {
    fn default() -> Self {
        Self {
            server_ips: Vec::new(),
            detect_server_ips: true,
        }
    }
}

/// A configuration problem; the message names the key or file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl Config {
    /// What the built-in tools need.
    /// `data_dir` is denied to the file tools wherever a workspace contains it.
    pub fn builtin(&self, data_dir: &Path) -> talon_tools::BuiltinConfig {
        let roots = |paths: &[PathBuf], writable: bool| {
            paths
                .iter()
                .map(move |path| talon_tools::ExtraRoot {
                    path: path.clone(),
                    writable,
                })
                .collect::<Vec<_>>()
        };
        let mut extra_roots = roots(&self.fs.read_roots, false);
        extra_roots.extend(roots(&self.fs.write_roots, true));
        let mut fs = talon_tools::FsConfig::new(self.fs.deny.clone(), extra_roots);
        fs.deny_dirs.push(data_dir.to_path_buf());
        // The configuration runs host commands: no file tool writes it, wherever it is.
        fs.deny_dirs.extend(self.source.clone());
        fs.allow_hard_links = self.fs.allow_hard_links;
        talon_tools::BuiltinConfig {
            fs,
            skills: talon_tools::skills::catalog::SkillsConfig {
                home: std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".claude").join("skills")),
                global: Some(data_dir.join("skills")),
            },
            models: self.subagents.models.keys().cloned().collect(),
            ..talon_tools::BuiltinConfig::default()
        }
    }

    /// The policy engine's part of the configuration.
    pub fn policy(&self) -> PolicyConfig {
        PolicyConfig {
            global: ToolPolicy {
                profile: self.tools.profile.clone(),
                allow: self.tools.allow.clone(),
                deny: self.tools.deny.clone(),
                also_allow: self.tools.also_allow.clone(),
                by_provider: self.tools.by_provider.clone(),
                dialect: self.tools.dialect,
            },
            agents: self
                .agents
                .entries
                .iter()
                .map(|(k, a)| (k.clone(), a.tools.clone()))
                .collect(),
            subagents: self.subagents.clone(),
        }
    }
}

/// The configuration file read when none is named: `$XDG_CONFIG_HOME/talon/talon.toml`, else
/// `~/.config/talon/talon.toml`. Never one in the current directory.
pub fn default_path() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(Path::new(&xdg).join("talon/talon.toml"));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".config/talon/talon.toml"))
}

/// Loads the configuration. An explicitly named file must exist; the default locations are
/// optional.
pub fn load(explicit: Option<&Path>) -> Result<(Config, Option<PathBuf>), ConfigError> {
    let (figment, file) = sources(explicit)?;
    let mut config: Config = figment.extract().map_err(|e| {
        let messages: Vec<String> = e.into_iter().map(|e| describe(&e)).collect();
        ConfigError(format!("invalid configuration: {}", messages.join("; ")))
    })?;
    config.source = file
        .as_ref()
        .map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.clone()));
    Ok((config, file))
}

/// Where the configuration comes from: the file (when there is one; see [`load`]) and the
/// `TALON_*` variables over it (`TALON_TOOLS__PROFILE` is `tools.profile`).
pub fn sources(explicit: Option<&Path>) -> Result<(Figment, Option<PathBuf>), ConfigError> {
    let env_path = std::env::var_os("TALON_CONFIG").map(PathBuf::from);
    let file = match explicit.map(Path::to_path_buf).or(env_path) {
        Some(path) => {
            if !path.is_file() {
                return Err(ConfigError(format!(
                    "config file {} does not exist or is not a file",
                    path.display()
                )));
            }
            Some(path)
        }
        None => default_path().filter(|p| p.is_file()),
    };
    let here = Path::new("talon.toml");
    if here.is_file()
        && file
            .as_ref()
            .is_none_or(|f| std::fs::canonicalize(f).ok() != std::fs::canonicalize(here).ok())
    {
        tracing::warn!(
            "./talon.toml is not read (the current directory is where agents write); name the configuration with --config or $TALON_CONFIG, or move it to ~/.config/talon/talon.toml"
        );
    }
    let mut figment = Figment::new();
    if let Some(path) = &file {
        figment = figment.merge(Toml::file_exact(path));
    }
    figment = figment.merge(
        Env::prefixed("TALON_")
            .filter(|k| k.as_str().contains("__"))
            .split("__"),
    );
    Ok((figment, file))
}

/// One configuration mistake as a person writes the key (`tools.rate_limit_per_hour`, not
/// figment's `default.tools…` or the environment's upper case) and where it came from.
fn describe(e: &figment::Error) -> String {
    let key = e
        .path
        .iter()
        .map(|part| part.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(".");
    let mut text = if key.is_empty() {
        e.kind.to_string()
    } else {
        format!("{key}: {}", e.kind)
    };
    if let Some(metadata) = &e.metadata {
        match &metadata.source {
            Some(figment::Source::File(path)) => {
                text.push_str(&format!(" (in {})", path.display()));
            }
            _ => text.push_str(&format!(" (in {})", metadata.name)),
        }
    }
    text
}

/// The data directory: `--data-dir`, `$TALON_DATA_DIR`, `$XDG_DATA_HOME/talon`, or
/// `~/.local/share/talon`.
pub fn data_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    if let Some(dir) = std::env::var_os("TALON_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Path::new(&xdg).join("talon");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/talon")
}

//! `[mcp_servers.<name>]`: external MCP servers whose tools Talon bridges.
//!
//! ```toml
//! [mcp]
//! dialect = "claude_code"          # tool names mcp__<server>__<tool>; "goclaw": mcp_<server>__<tool>
//!
//! [mcp_servers.everything]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything", "stdio"]
//! env = { GREETING = "hi" }         # added to PATH, HOME, LANG, … (nothing else is passed)
//! startup_timeout_secs = 30
//! tool_timeout_secs = 60
//! required = false                  # true: Talon does not start without it
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use talon_bridge::{Dialect, ServerConfig, StdioConfig};

/// `[mcp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSection {
    /// `claude_code` (default) or `goclaw`.
    pub dialect: Option<String>,
}

/// `[mcp_servers.<name>]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSection {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: HashMap<String, String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// GoClaw dialect: replaces `mcp_<server>` in tool names.
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    #[serde(default)]
    pub tool_timeout_secs: Option<u64>,
    /// Characters of a result kept (default 100,000: Claude Code's 25,000 tokens).
    #[serde(default)]
    pub max_output_chars: Option<usize>,
    #[serde(default)]
    pub required: bool,
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

impl McpSection {
    /// The naming dialect.
    pub fn dialect(&self) -> Result<Dialect, String> {
        match self.dialect.as_deref().unwrap_or("claude_code") {
            "claude_code" | "claude-code" => Ok(Dialect::ClaudeCode),
            "goclaw" => Ok(Dialect::GoClaw),
            other => Err(format!(
                "[mcp] dialect {other:?}: use \"claude_code\" (mcp__<server>__<tool>) or \"goclaw\" (mcp_<server>__<tool>)"
            )),
        }
    }
}

/// The enabled servers, in name order, or the first configuration mistake.
pub fn servers(sections: &BTreeMap<String, McpServerSection>) -> Result<Vec<ServerConfig>, String> {
    sections
        .iter()
        .filter(|(_, s)| s.enabled)
        .map(|(name, s)| {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "[mcp_servers.{name}]: server names use letters, digits, _ and -"
                ));
            }
            if s.command.trim().is_empty() {
                return Err(format!("[mcp_servers.{name}]: command is empty"));
            }
            let mut config = ServerConfig::stdio(
                name.clone(),
                StdioConfig {
                    command: s.command.clone(),
                    args: s.args.clone(),
                    env: s.env.clone(),
                    cwd: s.cwd.clone(),
                },
            );
            config.prefix = s.prefix.clone();
            config.required = s.required;
            if let Some(secs) = s.startup_timeout_secs {
                config.startup_timeout = Duration::from_secs(secs.max(1));
            }
            if let Some(secs) = s.tool_timeout_secs {
                config.call_timeout = Duration::from_secs(secs.max(1));
            }
            if let Some(chars) = s.max_output_chars {
                config.max_output_chars = chars.max(1000);
            }
            Ok(config)
        })
        .collect()
}

//! The MCP servers a call reaches through a tool that is not one of their own
//! ([`crate::ToolSpec::reaches_mcp_servers`]: `ListMcpResources`, `ReadMcpResource`,
//! `mcp_tool_search`). A server's own tools are refused by policy through their names
//! (`group:mcp:<server>`); these tools carry the server in an argument or pick servers
//! themselves, so the pipeline authorizes a named server with the same policy (issue 22:
//! denying `group:mcp:<server>` did not stop reading its resources) and hands the tool the
//! caller's rule for the servers it picks itself (a listing of all).

use std::sync::Arc;

use serde_json::Value;

use super::{FailedStage, Pipeline};
use crate::context::CallContext;
use crate::policy::{McpServerRule, PolicyRequest};
use crate::tool::ToolSpec;

impl Pipeline {
    /// The caller's rule for MCP servers when `spec` declares that it reaches servers (`None`
    /// otherwise); a refusal when its server argument names one the policy denies the caller.
    pub(super) fn mcp_servers(
        &self,
        ctx: &CallContext,
        spec: &ToolSpec,
        args: &Value,
    ) -> Result<Option<Arc<McpServerRule>>, (FailedStage, String)> {
        if !spec.reaches_mcp_servers && spec.mcp_server_arg.is_none() {
            return Ok(None);
        }
        let rule = self.policy.mcp_servers(&PolicyRequest::for_call(ctx));
        if let Some(arg) = spec.mcp_server_arg.as_deref()
            && let Some(server) = args.get(arg).and_then(Value::as_str)
            && !rule.allows(server)
        {
            return Err((
                FailedStage::Policy,
                format!(
                    "MCP server {server:?} is not allowed by policy: this agent's tool policy \
                     denies it (group:mcp:{server}), so {} cannot reach it. Use a server you \
                     may reach.",
                    spec.name
                ),
            ));
        }
        Ok(Some(Arc::new(rule)))
    }
}

//! The MCP servers a call reaches through a tool that names one in an argument
//! ([`crate::ToolSpec::mcp_server_arg`]: `ListMcpResources`, `ReadMcpResource`). A server's own
//! tools are refused by policy through their names (`group:mcp:<server>`); these tools carry
//! the server in an argument instead, so the pipeline authorizes that argument with the same
//! policy (issue 22: denying `group:mcp:<server>` did not stop reading its resources), and
//! hands the tool the caller's rule for the servers it picks itself (a listing of all).

use std::sync::Arc;

use serde_json::Value;

use super::{FailedStage, Pipeline};
use crate::context::CallContext;
use crate::policy::{McpServerRule, PolicyRequest};
use crate::tool::ToolSpec;

impl Pipeline {
    /// The caller's rule for MCP servers when `spec` declares a server argument (`None`
    /// otherwise); a refusal when `args` name a server the policy denies to the caller.
    pub(super) fn mcp_servers(
        &self,
        ctx: &CallContext,
        spec: &ToolSpec,
        args: &Value,
    ) -> Result<Option<Arc<McpServerRule>>, (FailedStage, String)> {
        let Some(arg) = spec.mcp_server_arg.as_deref() else {
            return Ok(None);
        };
        let rule = self.policy.mcp_servers(&PolicyRequest::for_call(ctx));
        if let Some(server) = args.get(arg).and_then(Value::as_str)
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

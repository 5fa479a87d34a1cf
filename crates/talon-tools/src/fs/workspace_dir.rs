//! `workspace_dir` (seed 002): where this call's files are — the directory every file tool and
//! command of the call works in, and whose it is (the user's own, or the agent's shared one).
//! The answer is the call's context as the entry point bound it; the tool opens the directory
//! through the jail, so it reports only a workspace the file tools can use.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::workspace::FsConfig;

/// Input of [`WorkspaceDir`] (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceDirInput {}

/// The `workspace_dir` tool.
#[derive(Debug, Clone)]
pub struct WorkspaceDir {
    pub fs: Arc<FsConfig>,
}

impl Tool for WorkspaceDir {
    type Input = WorkspaceDirInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "workspace_dir",
            "Say which directory this conversation's files live in (its absolute path) and \
             whose it is: relative paths of the file tools and the commands you run start \
             there.",
            SideEffect::None,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<WorkspaceDirInput>) -> ToolOutput {
        let ctx = call.ctx();
        let jail = match self.fs.files(ctx).disk() {
            Ok(jail) => jail,
            Err(e) => return ToolOutput::error(e),
        };
        let root = jail.root();
        let whose = match (ctx.user.as_deref(), ctx.agent_key.as_deref()) {
            (Some(user), Some(agent)) => {
                format!("the workspace of user {user} with agent {agent}")
            }
            (None, Some(agent)) => {
                format!("agent {agent}'s workspace shared by calls naming no user")
            }
            _ => "the shared workspace".to_string(),
        };
        ToolOutput::text(format!("{}\n{whose}", root.display()))
    }
}

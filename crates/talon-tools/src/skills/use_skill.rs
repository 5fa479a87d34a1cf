//! `use_skill`: loads a skill's instructions into the conversation (or one of its files) and
//! records the use.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::catalog::Skills;

/// Input of [`UseSkill`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseSkillInput {
    /// The skill's name (skill_search finds them).
    pub name: String,
    /// One of the skill's files to read instead of its instructions.
    #[serde(default)]
    pub file: Option<String>,
}

/// The `use_skill` tool.
#[derive(Debug, Clone)]
pub struct UseSkill {
    pub skills: Skills,
}

impl Tool for UseSkill {
    type Input = UseSkillInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "use_skill",
            "Load a skill: its instructions (follow them for the task at hand) and the list of its \
             files; with file, one of those files.",
            SideEffect::ReadOnly,
        )
        .in_group("skills")
    }

    async fn execute(&self, call: Authorized<UseSkillInput>) -> ToolOutput {
        let input = call.input();
        match super::load(&self.skills, call.ctx(), &input.name, input.file.as_deref()).await {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e),
        }
    }
}

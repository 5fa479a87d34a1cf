//! Claude Code's `Skill`: loads a skill by name over the same catalogue as `use_skill`
//! (GoClaw's), with Claude Code's input (`skill`, optional `args`).

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use crate::skills::catalog::Skills;

/// Input of [`Skill`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillInput {
    /// The skill's name, e.g. "pdf-forms".
    pub skill: String,
    /// Optional arguments for the skill.
    #[serde(default)]
    pub args: Option<String>,
}

/// The `Skill` tool.
#[derive(Debug, Clone)]
pub struct Skill {
    pub skills: Skills,
}

impl Tool for Skill {
    type Input = SkillInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Skill",
            "Execute a skill within the main conversation. Skills provide specialized capabilities \
             and domain knowledge; when a task matches an available skill's description, invoke it \
             by name and follow the instructions it returns.",
            SideEffect::ReadOnly,
        )
        .in_group("claude_code")
        .in_group("skills")
    }

    async fn execute(&self, call: Authorized<SkillInput>) -> ToolOutput {
        let input = call.input();
        match crate::skills::load(&self.skills, call.ctx(), &input.skill, None).await {
            Ok(text) => {
                let mut out = format!("Launching skill: {}\n\n{text}", input.skill);
                if let Some(args) = input.args.as_deref().filter(|a| !a.trim().is_empty()) {
                    out.push_str(&format!("\n\nARGUMENTS: {args}"));
                }
                ToolOutput::text(out)
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}

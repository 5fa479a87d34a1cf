//! `skill_search`: finds skills by what they do. GoClaw's BM25 (k1 1.2, b 0.75) over each
//! skill's name, description and tags, fused with meaning when an embedding model is
//! configured ([`talon_embed::fuse`]); names and descriptions only, loaded with `use_skill`.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

use super::catalog::Skills;

/// Input of [`SkillSearch`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillSearchInput {
    /// What you need a skill for, in a few words.
    pub query: String,
    /// How many skills (1-20, default 5).
    #[serde(default, rename = "maxResults", alias = "limit")]
    pub max_results: Option<usize>,
}

/// The `skill_search` tool.
#[derive(Debug, Clone)]
pub struct SkillSearch {
    pub skills: Skills,
    /// Ranks by meaning too; `None`: by words only.
    pub embedder: Option<talon_embed::CachedEmbedder>,
}

impl Tool for SkillSearch {
    type Input = SkillSearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "skill_search",
            "Search the available skills (packaged instructions and scripts for a kind of task) by \
             what you need; returns their names and descriptions. Load one with use_skill.",
            SideEffect::ReadOnly,
        )
        .in_group("knowledge")
    }

    async fn execute(&self, call: Authorized<SkillSearchInput>) -> ToolOutput {
        let input = call.input();
        if input.query.trim().is_empty() {
            return ToolOutput::error("query is empty: say what you need a skill for");
        }
        let limit = input.max_results.unwrap_or(5).clamp(1, 20);
        let found = self.skills.all(call.ctx()).await;
        if found.skills.is_empty() {
            return ToolOutput::text("No skills are installed.");
        }
        let documents: Vec<(&str, String)> = found
            .skills
            .iter()
            .map(|s| {
                (
                    s.md.name.as_str(),
                    format!("{} {} {}", s.md.name, s.md.description, s.md.tags.join(" ")),
                )
            })
            .collect();
        let words: Vec<(String, f64)> =
            talon_embed::bm25(&input.query, &documents, documents.len())
                .into_iter()
                .map(|(name, score)| (name.to_string(), score))
                .collect();
        let candidates: Vec<(String, String)> = found
            .skills
            .iter()
            .map(|s| {
                (
                    s.md.name.clone(),
                    format!("{}: {}", s.md.name, s.md.description),
                )
            })
            .collect();
        let near = talon_embed::nearest_if(
            self.embedder
                .as_ref()
                .map(|e| e as &dyn talon_embed::Embedder),
            "skill_search",
            &input.query,
            &candidates,
        )
        .await;
        let lines: Vec<String> = talon_embed::fuse(&words, &near)
            .into_iter()
            .take(limit)
            .filter_map(|f| found.skills.iter().find(|s| s.md.name == f.key))
            .map(|s| format!("{} ({}): {}", s.md.name, s.source.label(), s.md.description))
            .collect();
        if lines.is_empty() {
            return ToolOutput::text(format!(
                "No skill matches {:?}. Try other words, or do the task without one.",
                input.query
            ));
        }
        ToolOutput::text(format!(
            "{}\n\nLoad one with use_skill name=NAME.",
            lines.join("\n")
        ))
    }
}

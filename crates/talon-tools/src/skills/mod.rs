//! Skills (group `skills`; `skill_search` also in `knowledge`): directories with a `SKILL.md`
//! (frontmatter and instructions, [`skill_md`]) and the files it refers to, from the workspace,
//! the user's home, the store and the data directory ([`catalog`]). A model sees skills by name
//! and description and loads one when it uses it: `skill_search` finds them (BM25 over name,
//! description and tags, fused with meaning when an embedding model is configured),
//! `use_skill` (and Claude Code's `Skill`) loads the instructions and records the use,
//! `publish_skill` registers a workspace directory in the store after validating it.
//!
//! The operator's and published skills are instructions, as context files are: they are not
//! fenced. That is why a published skill is its publisher's user's alone, and publishing for
//! everyone is the operator's act (`talon skills publish`), never a model's: a call without a
//! user cannot publish. A workspace's skill is the repository's text: its description in the
//! system prompt and its instructions when used come inside the untrusted-content fence.

pub mod catalog;
pub mod publish_skill;
pub mod skill_md;
pub mod skill_search;
pub mod use_skill;

use talon_core::CallContext;

use catalog::{Skill, Skills};

/// What using a skill shows the model: its instructions, where they came from, its files (or
/// the one file asked for). Records the use.
pub(crate) async fn load(
    skills: &Skills,
    ctx: &CallContext,
    name: &str,
    file: Option<&str>,
) -> Result<String, String> {
    let (skill, note) = skills.get_noted(ctx, name).await?;
    let repository = skill.source == catalog::Source::Workspace;
    let fenced = |text: &str| {
        if repository {
            talon_core::untrusted::wrap(
                "use_skill",
                &format!("{}/{name}", catalog::WORKSPACE_SKILLS),
                text,
            )
        } else {
            text.to_string()
        }
    };
    if let Some(path) = file {
        let text = skills.file(ctx, &skill, path).await?;
        return Ok(format!("{path} of skill {name}:\n\n{}", fenced(&text)));
    }
    record(skills, ctx, &skill).await;
    let body = format!("{}\n\n{}", skill.md.description, skill.md.instructions);
    let mut out = if repository {
        format!(
            "Skill {} ({}):\n\n{}",
            skill.md.name,
            skill.source.label(),
            fenced(&body)
        )
    } else {
        format!("Skill {} ({}): {body}", skill.md.name, skill.source.label())
    };
    if let Some(note) = note {
        out.push_str("\n\n");
        out.push_str(&note);
    }
    if !skill.files.is_empty() {
        out.push_str(&format!(
            "\n\nFiles of this skill (read one with use_skill name={name:?} file=PATH): {}",
            skill.files.join(", ")
        ));
    }
    Ok(out)
}

async fn record(skills: &Skills, ctx: &CallContext, skill: &Skill) {
    let Some(store) = &skills.store else { return };
    let agent = ctx
        .agent_key
        .clone()
        .unwrap_or_else(|| talon_core::DEFAULT_AGENT.into());
    if let Err(e) = store
        .record_skill_use(
            &skill.md.name,
            skill.source.label(),
            &agent,
            ctx.user.as_deref().unwrap_or_default(),
        )
        .await
    {
        tracing::warn!(skill = %skill.md.name, error = %e, "cannot record a skill's use");
    }
}

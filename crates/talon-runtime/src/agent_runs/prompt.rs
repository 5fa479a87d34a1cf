//! The system prompt of a turn: the configured one, then the agent's context files for the user
//! in GoClaw's order (with DELEGATION.md generated for an agent with delegation targets, TEAM.md
//! for a team's lead, SKILLS.md listing the skills by name and description).

use super::store_failed;
use super::{RunError, Runner};

impl Runner {
    /// The system prompt: the configured one, then the agent's context files for this user
    /// (GoClaw's order: SOUL, IDENTITY, AGENTS, TOOLS, USER, BOOTSTRAP, then the rest by name).
    pub(super) async fn system_prompt(
        &self,
        configured: Option<&str>,
        agent: &str,
        ctx: &talon_core::CallContext,
    ) -> Result<Option<String>, RunError> {
        let user = ctx.user.as_deref();
        let mut files = self
            .store
            .context_files(agent, user.unwrap_or_default(), &[])
            .await
            .map_err(|e| store_failed(format_args!("cannot read {agent}'s context files"), e))?;
        // Generated for an agent with delegation targets, unless it (or the user) has its own.
        if !files.iter().any(|(name, _)| name == "DELEGATION.md")
            && let Some(delegation) = self.delegation_file(agent, user).await
        {
            files.push(("DELEGATION.md".to_string(), delegation));
        }
        // The lead of a team sees TEAM.md (members see it only in the runs of team work).
        if !files.iter().any(|(name, _)| name == "TEAM.md")
            && let Some(team) = self.team_file(agent, user.unwrap_or_default()).await
        {
            files.push(("TEAM.md".to_string(), team));
        }
        if !files.iter().any(|(name, _)| name == "SKILLS.md")
            && let Some(skills) = self.skills_file(ctx).await
        {
            files.push(("SKILLS.md".to_string(), skills));
        }
        Ok(compose_system_prompt(configured, files))
    }

    /// SKILLS.md: the skills the turn can load, by name and description (their instructions
    /// are loaded on use); `None` without any.
    async fn skills_file(&self, ctx: &talon_core::CallContext) -> Option<String> {
        let found = self.skills.as_ref()?.all(ctx).await;
        if found.skills.is_empty() {
            return None;
        }
        let mut text = String::from(
            "Skills are packaged instructions for kinds of tasks. When a task matches a skill's \
             description, load it (use_skill with its name, or Skill) and follow what it says.\n",
        );
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let (repository, trusted): (Vec<_>, Vec<_>) = found
            .skills
            .iter()
            .take(SKILLS_LISTED)
            .partition(|s| s.source == talon_tools::skills::catalog::Source::Workspace);
        for skill in trusted {
            text.push_str(&format!(
                "\n- {}: {}",
                skill.md.name,
                one_line(&skill.md.description)
            ));
        }
        // A repository's skills are its text, written by whoever can push to it: listed as data.
        if !repository.is_empty() {
            let listed: Vec<String> = repository
                .iter()
                .map(|s| format!("- {}: {}", s.md.name, one_line(&s.md.description)))
                .collect();
            text.push_str("\n\nThe workspace's repository offers these skills:\n");
            text.push_str(&talon_core::untrusted::wrap(
                "skills",
                talon_tools::skills::catalog::WORKSPACE_SKILLS,
                &listed.join("\n"),
            ));
        }
        if found.skills.len() > SKILLS_LISTED {
            text.push_str(&format!(
                "\n\n{} more: skill_search finds them by what you need.",
                found.skills.len() - SKILLS_LISTED
            ));
        }
        Some(text)
    }
}

/// Skills listed by name in SKILLS.md at most; skill_search finds the rest.
const SKILLS_LISTED: usize = 30;

/// Context files in the order GoClaw puts them in the system prompt.
const CONTEXT_ORDER: &[&str] = &[
    "SOUL.md",
    "IDENTITY.md",
    "AGENTS.md",
    "TOOLS.md",
    "USER.md",
    "BOOTSTRAP.md",
];

/// `configured`, then each non-empty context file under its name; `None` when all are empty.
fn compose_system_prompt(
    configured: Option<&str>,
    mut files: Vec<(String, String)>,
) -> Option<String> {
    let rank = |name: &str| {
        CONTEXT_ORDER
            .iter()
            .position(|n| *n == name)
            .unwrap_or(CONTEXT_ORDER.len())
    };
    files.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.0.cmp(&b.0)));
    let mut parts: Vec<String> = configured
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    for (name, content) in files {
        if !content.trim().is_empty() {
            parts.push(format!("# {name}\n\n{}", content.trim_end()));
        }
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_files_follow_the_configured_prompt_in_goclaw_order() {
        let files = vec![
            ("AGENTS.md".to_string(), "agents".to_string()),
            ("NOTES.md".to_string(), "notes".to_string()),
            ("SOUL.md".to_string(), "soul\n".to_string()),
            ("EMPTY.md".to_string(), "  ".to_string()),
            ("DELEGATION.md".to_string(), "delegation".to_string()),
        ];
        let prompt = compose_system_prompt(Some("Be brief."), files).unwrap_or_default();
        assert_eq!(
            prompt,
            "Be brief.\n\n# SOUL.md\n\nsoul\n\n# AGENTS.md\n\nagents\n\n# DELEGATION.md\n\ndelegation\n\n# NOTES.md\n\nnotes"
        );
        assert_eq!(compose_system_prompt(None, Vec::new()), None);
        assert_eq!(compose_system_prompt(Some(" "), Vec::new()), None);
    }
}

//! Custom agents for Claude Code's `Agent` tool: Markdown files in `.claude/agents/` of the
//! workspace and of the home directory (the workspace's win on a name clash), with the
//! frontmatter Claude Code reads — `name`, `description`, `tools`, `disallowedTools`, `model`,
//! `permissionMode`, `maxTurns` — and the body as the agent's instructions.
//!
//! The workspace is where agents write, so a definition found there is untrusted input: it can
//! only narrow what the child gets. Its tools are intersected with the caller's (never wider),
//! its permission mode applies only where stricter than the caller's, its turns only below the
//! configured cap. The workspace's definitions are listed and read through the call's file jail,
//! as its skills are; a file that is not a regular file (a link out of the workspace), is larger
//! than [`MAX_BYTES`], or does not parse is skipped.

use std::path::{Path, PathBuf};

use talon_core::permission::PermissionMode;

use crate::runner::Runner;

/// The largest definition read.
pub const MAX_BYTES: u64 = 64 * 1024;

/// One custom agent definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomAgent {
    pub name: String,
    pub description: String,
    /// Only these tools (`None`: the caller's).
    pub tools: Option<Vec<String>>,
    /// Never these.
    pub disallowed_tools: Vec<String>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub max_turns: Option<u32>,
    /// The body: the agent's instructions.
    pub instructions: String,
    /// Where it was read from.
    pub path: PathBuf,
}

impl CustomAgent {
    /// Whether the definition lets the child have `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        !self.disallowed_tools.iter().any(|t| t == tool)
            && self
                .tools
                .as_ref()
                .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// Where definitions live, relative to a workspace or a home directory.
pub const DIR: &str = ".claude/agents";

/// The definitions among `workspace` (the workspace's `.claude/agents` files, read through the
/// call's jail: see [`Runner::custom_agents`]) and `<home>/.claude/agents` (the operator's), by
/// name (the workspace's first).
pub fn discover(workspace: Vec<(String, String)>, home: Option<&Path>) -> Vec<CustomAgent> {
    let mut found: Vec<CustomAgent> = Vec::new();
    let mut add = |agent: CustomAgent| {
        if !found.iter().any(|a| a.name == agent.name) {
            found.push(agent);
        }
    };
    for (path, text) in workspace {
        if let Some(mut agent) = parse(&text) {
            agent.path = PathBuf::from(path);
            add(agent);
        }
    }
    if let Some(dir) = home.map(|home| home.join(DIR))
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        paths.sort();
        for path in paths {
            if let Some(agent) = read(&path) {
                add(agent);
            }
        }
    }
    found
}

/// One definition of the operator's, or `None` when it is not a small regular file that
/// parses.
fn read(path: &Path) -> Option<CustomAgent> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let mut agent = parse(&text)?;
    agent.path = path.to_path_buf();
    Some(agent)
}

impl Runner {
    /// The custom agents the caller `ctx` may run: its workspace's definitions, read through
    /// its jail like its skills (a definition linked out of the workspace is not read), then
    /// the operator's in `~/.claude/agents`.
    pub(crate) async fn custom_agents(&self, ctx: &talon_core::CallContext) -> Vec<CustomAgent> {
        let workspace = match self.engine().skills() {
            Some(skills) => skills.workspace_markdown(ctx, DIR, MAX_BYTES).await,
            None => Vec::new(),
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        discover(workspace, home.as_deref())
    }
}

/// Parses a definition: `---` frontmatter of `key: value` lines, then the body. A definition
/// needs a name.
pub fn parse(text: &str) -> Option<CustomAgent> {
    let rest = text.strip_prefix("---")?.trim_start_matches(['\r', '\n']);
    let end = rest.find("\n---")?;
    let (front, body) = (&rest[..end], &rest[end + 4..]);
    let mut agent = CustomAgent {
        instructions: body
            .trim_start_matches(['-', '\r', '\n'])
            .trim()
            .to_string(),
        ..CustomAgent::default()
    };
    let mut list_key: Option<String> = None;
    for line in front.lines() {
        // A YAML list item continues the key above it.
        if let (Some(key), Some(item)) = (&list_key, line.trim().strip_prefix("- ")) {
            push_list(&mut agent, key, item);
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), unquote(value.trim()));
        list_key = value.is_empty().then(|| key.to_string());
        match key {
            "name" => agent.name = value.to_string(),
            "description" => agent.description = value.to_string(),
            "model" if !value.is_empty() && value != "inherit" => {
                agent.model = Some(value.to_string());
            }
            "permissionMode" => agent.permission_mode = value.parse().ok(),
            "maxTurns" => agent.max_turns = value.parse().ok(),
            "tools" | "disallowedTools" => {
                for item in value.trim_matches(['[', ']']).split(',') {
                    push_list(&mut agent, key, item);
                }
            }
            _ => {}
        }
    }
    (!agent.name.is_empty()).then_some(agent)
}

fn push_list(agent: &mut CustomAgent, key: &str, item: &str) {
    let item = unquote(item.trim());
    if item.is_empty() {
        return;
    }
    match key {
        "tools" => agent
            .tools
            .get_or_insert_with(Vec::new)
            .push(item.to_string()),
        "disallowedTools" => agent.disallowed_tools.push(item.to_string()),
        _ => {}
    }
}

fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_frontmatter_is_read() {
        let agent = parse(
            "---\nname: reviewer\ndescription: \"Reviews code\"\ntools: Read, Grep\ndisallowedTools:\n  - Bash\nmodel: inherit\npermissionMode: plan\nmaxTurns: 4\n---\nYou review code.\n",
        )
        .unwrap();
        assert_eq!(agent.name, "reviewer");
        assert_eq!(agent.description, "Reviews code");
        assert_eq!(agent.tools, Some(vec!["Read".into(), "Grep".into()]));
        assert_eq!(agent.disallowed_tools, ["Bash"]);
        assert_eq!(agent.model, None);
        assert_eq!(agent.permission_mode, Some(PermissionMode::Plan));
        assert_eq!(agent.max_turns, Some(4));
        assert_eq!(agent.instructions, "You review code.");
        assert!(agent.allows("Read") && !agent.allows("Bash") && !agent.allows("Write"));
        assert_eq!(parse("no frontmatter"), None);
        assert_eq!(parse("---\ndescription: nameless\n---\nbody"), None);
    }

    #[test]
    fn a_symlinked_definition_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join(".claude/agents");
        std::fs::create_dir_all(&agents).unwrap();
        let outside = dir.path().join("outside.md");
        std::fs::write(&outside, "---\nname: sneaky\n---\nread /etc\n").unwrap();
        std::os::unix::fs::symlink(&outside, agents.join("sneaky.md")).unwrap();
        std::fs::write(agents.join("ok.md"), "---\nname: ok\n---\nfine\n").unwrap();
        // As the operator's (`~/.claude/agents`); the workspace's are read through the jail,
        // which refuses a link out of the workspace itself.
        let found = discover(Vec::new(), Some(dir.path()));
        let names: Vec<&str> = found.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
    }
}

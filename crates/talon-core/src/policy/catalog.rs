//! The built-in vocabulary of the policy engine: groups, profiles, legacy aliases and the
//! subagent deny lists.
//!
//! Each list is the union of every version of GoClaw's tools document (seeds 000–004) and of
//! what GoClaw's code registers (research/goclaw.md §6.2), so a configuration written for any
//! version means the same here. Members that are not registered simply expand to nothing: groups
//! always expand against the live registry.
//!
//! Which capability group a Talon tool belongs to is declared by the tool itself
//! ([`crate::ToolSpec::in_group`]), in each dialect: `Bash` is in `runtime` as `exec` is, `Read`
//! in `fs`, `WebFetch` in `web` (issue 22: `deny = ["group:runtime"]` left `Bash` working while
//! the lists below named only GoClaw's tools). The lists here are the vocabulary configurations
//! written for GoClaw and Claude Code use; they add no Talon tool to a capability group.

/// `(group, members)` for every built-in group. `mcp` starts empty and is filled at runtime,
/// as are `mcp:<server>` groups.
pub const BUILTIN_GROUPS: &[(&str, &[&str])] = &[
    (
        "fs",
        &[
            "read_file",
            "write_file",
            "list_files",
            "edit",
            "search",
            "glob",
        ],
    ),
    ("runtime", &["exec", "process", "credentialed_exec", "wait"]),
    ("web", &["web_search", "web_fetch"]),
    ("memory", &["memory_search", "memory_get", "memory_expand"]),
    (
        "sessions",
        &[
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "spawn",
            "subagents",
            "session_status",
        ],
    ),
    ("knowledge", &["knowledge_graph_search", "skill_search"]),
    ("ui", &["browser", "canvas"]),
    ("automation", &["cron", "datetime", "gateway"]),
    (
        "messaging",
        &["message", "create_forum_topic", "list_group_members"],
    ),
    (
        "delegation",
        &["delegate", "delegate_search", "evaluate_loop", "handoff"],
    ),
    ("teams", &["team_tasks", "team_message"]),
    // GoClaw's code calls the teams group `team`; both names work.
    ("team", &["team_tasks", "team_message"]),
    (
        "media_gen",
        &[
            "create_image",
            "create_audio",
            "create_video",
            "tts",
            "image",
        ],
    ),
    (
        "media_read",
        &["read_image", "read_audio", "read_document", "read_video"],
    ),
    ("skills", &["use_skill", "publish_skill", "skill_manage"]),
    ("vault", &["vault_search", "vault_read"]),
    (
        "goclaw",
        &[
            "read_file",
            "write_file",
            "list_files",
            "edit",
            "search",
            "glob",
            "exec",
            "process",
            "credentialed_exec",
            "wait",
            "web_search",
            "web_fetch",
            "memory_search",
            "memory_get",
            "memory_expand",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "spawn",
            "subagents",
            "session_status",
            "knowledge_graph_search",
            "skill_search",
            "browser",
            "canvas",
            "cron",
            "datetime",
            "gateway",
            "message",
            "create_forum_topic",
            "list_group_members",
            "delegate",
            "delegate_search",
            "evaluate_loop",
            "handoff",
            "team_tasks",
            "team_message",
            "create_image",
            "create_audio",
            "create_video",
            "tts",
            "image",
            "read_image",
            "read_audio",
            "read_document",
            "read_video",
            "use_skill",
            "publish_skill",
            "skill_manage",
            "vault_search",
            "vault_read",
            "nodes",
            "heartbeat",
            "workspace_dir",
            "openai_compat_call",
            "mcp_tool_search",
            "apply_patch",
        ],
    ),
    // Talon: the Claude Code dialect (Goat's DefaultRegistry plus the team tools).
    (
        "claude_code",
        &[
            "Bash",
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "TaskOutput",
            "TaskStop",
            "TodoWrite",
            "Config",
            "ExitPlanMode",
            "AskUserQuestion",
            "WebFetch",
            "WebSearch",
            "Agent",
            "Skill",
            "ListMcpResources",
            "ReadMcpResource",
            "TeamCreate",
            "SendMessage",
            "TeamDelete",
        ],
    ),
    // Talon: the agent's own turn state and its questions to the person (TodoWrite,
    // AskUserQuestion, ExitPlanMode, Config); members declare it in their specs.
    ("interaction", &[]),
    ("mcp", &[]),
    // Talon: custom tools defined at run time (`talon custom-tools`); each is in `runtime`
    // too, since it runs a shell command.
    ("custom", &[]),
];

/// The groups that say what a tool can do, whatever its dialect; every registered tool
/// declares at least one ([`is_capability_group`]). `goclaw` and `claude_code` are dialects,
/// not capabilities.
pub const CAPABILITY_GROUPS: &[&str] = &[
    "fs",
    "runtime",
    "web",
    "memory",
    "sessions",
    "knowledge",
    "ui",
    "automation",
    "messaging",
    "delegation",
    "teams",
    "team",
    "media_gen",
    "media_read",
    "skills",
    "vault",
    "interaction",
    "mcp",
    "custom",
];

/// True if `group` is a capability group ([`CAPABILITY_GROUPS`], or `mcp:<server>`).
pub fn is_capability_group(group: &str) -> bool {
    CAPABILITY_GROUPS.contains(&group)
        || group
            .strip_prefix("mcp:")
            .is_some_and(|server| !server.is_empty())
}

/// Names of the profiles; anything else is a configuration error.
pub const PROFILES: &[&str] = &["full", "coding", "messaging", "minimal"];

/// The specs a profile allows, or `None` for `full` (no restriction) and for unknown names.
pub fn profile_specs(profile: &str) -> Option<&'static [&'static str]> {
    match profile {
        "coding" => Some(&[
            "group:fs",
            "group:runtime",
            "group:sessions",
            "group:memory",
            "group:web",
            "group:knowledge",
            "group:media_gen",
            "group:media_read",
            "group:skills",
            "group:vault",
            "group:claude_code",
            // The MCP servers the operator connected: a profile is about built-in capabilities,
            // never a silent way to lose them (issue 23).
            "group:mcp",
            "image",
            "read_image",
            "create_image",
            "skill_search",
        ]),
        "messaging" => Some(&[
            "group:messaging",
            "group:web",
            "group:sessions",
            "group:media_read",
            "group:vault",
            "group:mcp",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "session_status",
            "read_image",
            "skill_search",
            "wait",
        ]),
        "minimal" => Some(&["session_status"]),
        _ => None,
    }
}

/// GoClaw's legacy aliases; models trained on the old names still reach the tools.
pub const LEGACY_ALIASES: &[(&str, &str)] = &[
    ("bash", "exec"),
    ("edit_file", "edit"),
    ("sessions_spawn", "spawn"),
    ("apply-patch", "apply_patch"),
    // Claude Code called its subagent tool Task before it was Agent.
    ("Task", "Agent"),
];

/// Denied to every subagent: the union of GoClaw's documented list and both lists in its code
/// (research §6.3, bug B5), except `exec`, which the documented list and the enforced list both
/// leave to subagents. One list, used by the one engine.
pub const SUBAGENT_DENY: &[&str] = &[
    "gateway",
    "agents_list",
    "whatsapp_login",
    "session_status",
    "cron",
    "memory_search",
    "memory_get",
    "sessions_send",
    "team_tasks",
];

/// Additionally denied to subagents at the maximum spawn depth (they cannot spawn further):
/// every tool that starts a run (a delegation is a run one level down too).
pub const LEAF_DENY: &[&str] = &[
    "sessions_list",
    "sessions_history",
    "sessions_spawn",
    "spawn",
    "subagent",
    "subagents",
    "Agent",
    "delegate",
    "evaluate_loop",
];

/// Default maximum nesting depth of subagents.
pub const DEFAULT_MAX_SPAWN_DEPTH: u32 = 1;

/// True if `name` is a tool name the built-in vocabulary uses (a member of a built-in group in
/// either dialect, or a legacy alias), compared without case: a tool defined at run time must
/// never take one, even where this build does not register that tool (yet).
pub fn is_builtin_tool_name(name: &str) -> bool {
    BUILTIN_GROUPS
        .iter()
        .flat_map(|(_, members)| members.iter())
        .chain(LEGACY_ALIASES.iter().map(|(alias, _)| alias))
        .any(|known| known.eq_ignore_ascii_case(name))
}

/// True if `group` names a built-in group or a dynamic MCP group (`mcp`, `mcp:<server>`).
pub fn is_known_group(group: &str) -> bool {
    BUILTIN_GROUPS.iter().any(|(g, _)| *g == group)
        || group
            .strip_prefix("mcp:")
            .is_some_and(|server| !server.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_group_but_the_dialects_is_a_capability() {
        for (group, _) in BUILTIN_GROUPS {
            let dialect = matches!(*group, "goclaw" | "claude_code");
            assert_eq!(is_capability_group(group), !dialect, "{group}");
        }
        for group in CAPABILITY_GROUPS {
            assert!(is_known_group(group), "{group}");
        }
        assert!(is_capability_group("mcp:github") && !is_capability_group("mcp:"));
    }
}

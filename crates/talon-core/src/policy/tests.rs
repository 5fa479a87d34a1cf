use super::*;
use crate::SideEffect;
use crate::test_tools::Named;

const TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "list_files",
    "edit",
    "exec",
    "web_fetch",
    "memory_search",
    "memory_get",
    "sessions_list",
    "sessions_history",
    "spawn",
    "session_status",
    "cron",
    "datetime",
    "message",
    "team_tasks",
    "read_image",
    "skill_search",
    "TodoWrite",
    "mcp__gh__search",
    "mcp__gh__issue",
    "mcp__fs__read",
];

fn registry() -> Registry {
    let r = Registry::new();
    for name in TOOLS {
        r.register(Named::new(name)).expect("register");
    }
    r.register_group(
        "mcp:gh",
        ["mcp__gh__search".to_string(), "mcp__gh__issue".to_string()],
    );
    r.register_group("mcp:fs", ["mcp__fs__read".to_string()]);
    r.merge_group(
        "mcp",
        [
            "mcp__gh__search".into(),
            "mcp__gh__issue".into(),
            "mcp__fs__read".into(),
        ],
    );
    r
}

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

struct Case {
    name: &'static str,
    config: PolicyConfig,
    agent: Option<&'static str>,
    provider: Option<&'static str>,
    depth: u32,
    tool_allow: Option<Vec<String>>,
    expect: &'static [&'static str],
}

fn case(name: &'static str, config: PolicyConfig, expect: &'static [&'static str]) -> Case {
    Case {
        name,
        config,
        agent: None,
        provider: None,
        depth: 0,
        tool_allow: None,
        expect,
    }
}

fn global(f: impl FnOnce(&mut ToolPolicy)) -> PolicyConfig {
    let mut config = PolicyConfig::default();
    f(&mut config.global);
    config
}

fn with_agent(
    mut config: PolicyConfig,
    key: &str,
    f: impl FnOnce(&mut AgentToolPolicy),
) -> PolicyConfig {
    f(config.agents.entry(key.to_string()).or_default());
    config
}

fn run(c: &Case) {
    let r = registry();
    let engine =
        PolicyEngine::new(c.config.clone()).unwrap_or_else(|e| panic!("{}: {e:?}", c.name));
    let got = engine.effective(
        &r,
        &PolicyRequest {
            agent: c.agent,
            provider: c.provider,
            spawn_depth: c.depth,
            tool_allow: c.tool_allow.as_deref(),
            dialect: None,
            in_run: c.depth > 0,
        },
    );
    let mut expect: Vec<String> = c.expect.iter().map(|s| (*s).to_string()).collect();
    expect.sort();
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        expect,
        "case {}",
        c.name
    );
}

#[test]
fn every_step_table_driven() {
    let all: &[&str] = TOOLS;
    let cases = vec![
        case("full by default", PolicyConfig::default(), all),
        case(
            "explicit full",
            global(|g| g.profile = Some("full".into())),
            all,
        ),
        case(
            "minimal",
            global(|g| g.profile = Some("minimal".into())),
            &["session_status"],
        ),
        case(
            "coding expands groups against the registry",
            global(|g| g.profile = Some("coding".into())),
            &[
                "read_file",
                "write_file",
                "list_files",
                "edit",
                "exec",
                "web_fetch",
                "memory_search",
                "memory_get",
                "sessions_list",
                "sessions_history",
                "spawn",
                "session_status",
                "read_image",
                "skill_search",
                "TodoWrite",
                // Issue 23: bridged MCP tools stay (the operator connected them).
                "mcp__fs__read",
                "mcp__gh__issue",
                "mcp__gh__search",
            ],
        ),
        case(
            "messaging",
            global(|g| g.profile = Some("messaging".into())),
            &[
                "message",
                "web_fetch",
                "sessions_list",
                "sessions_history",
                "spawn",
                "session_status",
                "read_image",
                "skill_search",
                "mcp__fs__read",
                "mcp__gh__issue",
                "mcp__gh__search",
            ],
        ),
        Case {
            provider: Some("openai"),
            ..case(
                "step 2: provider profile replaces the global profile",
                global(|g| {
                    g.profile = Some("minimal".into());
                    g.by_provider.insert(
                        "openai".into(),
                        ProviderPolicy {
                            profile: Some("full".into()),
                            ..Default::default()
                        },
                    );
                }),
                all,
            )
        },
        case(
            "step 3: global allow intersects",
            global(|g| g.allow = v(&["group:fs", "datetime", "nonexistent"])),
            &["read_file", "write_file", "list_files", "edit", "datetime"],
        ),
        Case {
            provider: Some("anthropic"),
            ..case(
                "step 4: provider allow intersects",
                global(|g| {
                    g.allow = v(&["group:fs"]);
                    g.by_provider.insert(
                        "anthropic".into(),
                        ProviderPolicy {
                            allow: v(&["read_file", "edit"]),
                            ..Default::default()
                        },
                    );
                }),
                &["read_file", "edit"],
            )
        },
        Case {
            agent: Some("bob"),
            ..case(
                "step 5: agent allow intersects",
                with_agent(global(|g| g.profile = Some("coding".into())), "bob", |a| {
                    a.allow = v(&["group:memory", "exec"])
                }),
                &["memory_search", "memory_get", "exec"],
            )
        },
        Case {
            agent: Some("bob"),
            provider: Some("openai"),
            ..case(
                "step 6: agent+provider allow intersects",
                with_agent(PolicyConfig::default(), "bob", |a| {
                    a.allow = v(&["group:fs"]);
                    a.by_provider.insert(
                        "openai".into(),
                        ProviderPolicy {
                            allow: v(&["read_file"]),
                            ..Default::default()
                        },
                    );
                }),
                &["read_file"],
            )
        },
        Case {
            agent: Some("alice"),
            ..case(
                "agent policy of another agent does not apply",
                with_agent(PolicyConfig::default(), "bob", |a| a.allow = v(&["exec"])),
                all,
            )
        },
        case(
            "deny subtracts names, aliases and groups",
            global(|g| {
                g.profile = Some("coding".into());
                g.deny = v(&["bash", "group:memory", "group:sessions", "mcp__*"]);
            }),
            &[
                "read_file",
                "write_file",
                "list_files",
                "edit",
                "web_fetch",
                "read_image",
                "skill_search",
                "TodoWrite",
            ],
        ),
        Case {
            agent: Some("bob"),
            ..case(
                "agent deny",
                with_agent(global(|g| g.allow = v(&["group:fs"])), "bob", |a| {
                    a.deny = v(&["edit_file", "write_file"])
                }),
                &["read_file", "list_files"],
            )
        },
        case(
            "alsoAllow adds from all tools",
            global(|g| {
                g.profile = Some("minimal".into());
                g.also_allow = v(&["datetime", "group:mcp:gh"]);
            }),
            &[
                "session_status",
                "datetime",
                "mcp__gh__search",
                "mcp__gh__issue",
            ],
        ),
        Case {
            agent: Some("bob"),
            ..case(
                "agent alsoAllow",
                with_agent(global(|g| g.profile = Some("minimal".into())), "bob", |a| {
                    a.also_allow = v(&["cron"])
                }),
                &["session_status", "cron"],
            )
        },
        Case {
            depth: 1,
            ..case(
                "subagent at max depth loses subagent and leaf lists",
                PolicyConfig::default(),
                &[
                    "read_file",
                    "write_file",
                    "list_files",
                    "edit",
                    "exec",
                    "web_fetch",
                    "datetime",
                    "message",
                    "read_image",
                    "skill_search",
                    "TodoWrite",
                    "mcp__gh__search",
                    "mcp__gh__issue",
                    "mcp__fs__read",
                ],
            )
        },
        Case {
            depth: 1,
            ..case(
                "subagent above max depth keeps the spawning tools",
                PolicyConfig {
                    subagents: SubagentPolicy {
                        max_spawn_depth: 3,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                &[
                    "read_file",
                    "write_file",
                    "list_files",
                    "edit",
                    "exec",
                    "web_fetch",
                    "sessions_list",
                    "sessions_history",
                    "spawn",
                    "datetime",
                    "message",
                    "read_image",
                    "skill_search",
                    "TodoWrite",
                    "mcp__gh__search",
                    "mcp__gh__issue",
                    "mcp__fs__read",
                ],
            )
        },
        Case {
            tool_allow: Some(v(&["read_file", "datetime", "exec"])),
            ..case(
                "per-request allow list is a final intersection (alsoAllow cannot widen it)",
                global(|g| {
                    g.deny = v(&["exec"]);
                    g.also_allow = v(&["cron"]);
                }),
                &["read_file", "datetime"],
            )
        },
        case(
            "mcp group and per-server groups expand live",
            global(|g| g.allow = v(&["group:mcp"])),
            &["mcp__gh__search", "mcp__gh__issue", "mcp__fs__read"],
        ),
        case(
            "wildcard allow",
            global(|g| g.allow = v(&["mcp__gh__*"])),
            &["mcp__gh__search", "mcp__gh__issue"],
        ),
    ];
    for c in &cases {
        run(c);
    }
}

// GoClaw's five policy bugs (research/goclaw.md §6.4) as regression tests.

#[test]
fn b1_groups_are_not_silently_dropped() {
    // GoClaw: with no registry wired into the engine, `profile: coding` shrank to three tools,
    // `allow: [group:fs]` yielded nothing and `deny: [group:runtime]` denied nothing.
    let r = registry();
    let engine = PolicyEngine::new(global(|g| {
        g.allow = v(&["group:fs"]);
        g.deny = v(&["group:runtime"]);
    }))
    .expect("valid");
    let set = engine.effective(&r, &PolicyRequest::default());
    assert_eq!(set.len(), 4, "{set:?}");
    let engine = PolicyEngine::new(global(|g| g.deny = v(&["group:runtime"]))).expect("valid");
    assert!(
        !engine
            .effective(&r, &PolicyRequest::default())
            .contains("exec")
    );
}

#[test]
fn b2_deny_is_final_over_also_allow() {
    let r = registry();
    let mut config = global(|g| {
        g.deny = v(&["exec", "group:mcp"]);
        g.also_allow = v(&["exec", "mcp__gh__search"]);
    });
    config.agents.insert(
        "bob".into(),
        AgentToolPolicy {
            also_allow: v(&["bash"]),
            ..Default::default()
        },
    );
    let engine = PolicyEngine::new(config).expect("valid");
    let set = engine.effective(
        &r,
        &PolicyRequest {
            agent: Some("bob"),
            ..Default::default()
        },
    );
    assert!(!set.contains("exec"));
    assert!(!set.contains("mcp__gh__search"));
}

#[test]
fn b3_group_deny_stops_tools_registered_later() {
    // GoClaw's lazy MCP activation re-checked denies without group expansion. Here a deny of
    // `group:mcp` applies to a tool that joins the group after the engine was built.
    let r = registry();
    let engine = PolicyEngine::new(global(|g| g.deny = v(&["group:mcp"]))).expect("valid");
    r.register(Named::new("mcp__late__tool")).expect("register");
    r.merge_group("mcp", ["mcp__late__tool".to_string()]);
    assert!(
        !engine
            .effective(&r, &PolicyRequest::default())
            .contains("mcp__late__tool")
    );
}

#[test]
fn b4_unknown_profile_or_group_is_a_config_error() {
    let err = PolicyEngine::new(global(|g| {
        g.profile = Some("codng".into());
        g.deny = v(&["group:fss", "group:mcp:anything", ""]);
    }))
    .expect_err("invalid");
    assert_eq!(err.len(), 3, "{err:?}");
    assert!(
        err[0]
            .to_string()
            .starts_with("tools.profile: unknown profile \"codng\""),
        "{}",
        err[0]
    );
    assert!(
        err[1]
            .to_string()
            .starts_with("tools.deny[0]: unknown tool group \"fss\""),
        "{}",
        err[1]
    );
    assert!(
        err[2].to_string().starts_with("tools.deny[2]: empty"),
        "{}",
        err[2]
    );

    let mut config = PolicyConfig::default();
    config.agents.insert(
        "bob".into(),
        AgentToolPolicy {
            by_provider: [(
                "openai".to_string(),
                ProviderPolicy {
                    profile: Some("huge".into()),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        },
    );
    let err = PolicyEngine::new(config).expect_err("invalid");
    assert!(
        err[0]
            .to_string()
            .starts_with("agents.bob.tools.by_provider.openai.profile"),
        "{}",
        err[0]
    );
}

#[test]
fn b5_one_subagent_deny_list() {
    // GoClaw had two diverging lists (exec vs team_tasks). Talon's one list covers team_tasks,
    // and the same engine applies it (GoClaw's FilterTools was never called with isSubagent).
    let r = registry();
    let engine = PolicyEngine::default();
    let sub = engine.effective(
        &r,
        &PolicyRequest {
            spawn_depth: 1,
            ..Default::default()
        },
    );
    for denied in [
        "team_tasks",
        "cron",
        "memory_search",
        "memory_get",
        "session_status",
        "spawn",
    ] {
        assert!(
            !sub.contains(denied),
            "{denied} must be denied to subagents"
        );
    }
    assert!(
        sub.contains("exec"),
        "exec stays available to subagents, as the seed documents"
    );
    let top = engine.effective(&r, &PolicyRequest::default());
    assert!(top.contains("team_tasks") && top.contains("spawn"));
}

/// Issue 23: by default a model sees one tool per job. With a dialect chosen, the twin of the
/// other dialect (declared with `same_as`) is not offered, though still callable (it is in the
/// effective set); tools only one dialect has stay; an agent's dialect wins over the global
/// one, which wins over the entry point's; `both` offers every tool.
#[test]
fn one_dialect_offers_one_tool_per_job() {
    let registry = Registry::new();
    for tool in [
        Named::new("read_file"),
        Named {
            same_as: Some("read_file"),
            ..Named::new("Read")
        },
        Named::new("memory_search"),
        Named::new("TodoWrite"),
    ] {
        registry.register(tool).expect("registers");
    }
    let offered = |config: PolicyConfig, dialect: Option<Dialect>| -> Vec<String> {
        let engine = PolicyEngine::new(config).expect("valid");
        let request = PolicyRequest {
            agent: Some("bob"),
            dialect,
            ..Default::default()
        };
        let allowed = engine.effective(&registry, &request);
        assert_eq!(allowed.len(), 4, "both stay callable");
        let mut tools: Vec<_> = registry
            .tools()
            .into_iter()
            .filter(|t| allowed.contains(&t.spec().name))
            .collect();
        one_tool_per_job(engine.dialect(&request), &mut tools);
        tools.iter().map(|t| t.spec().name.clone()).collect()
    };
    let with = |global: Option<Dialect>, agent: Option<Dialect>| {
        let mut config = PolicyConfig::default();
        config.global.dialect = global;
        config.agents.insert(
            "bob".into(),
            AgentToolPolicy {
                dialect: agent,
                ..Default::default()
            },
        );
        config
    };
    assert_eq!(
        offered(with(None, None), Some(Dialect::Goclaw)),
        ["TodoWrite", "memory_search", "read_file"]
    );
    assert_eq!(
        offered(with(None, None), Some(Dialect::ClaudeCode)),
        ["Read", "TodoWrite", "memory_search"]
    );
    assert_eq!(
        offered(with(None, None), None),
        ["Read", "TodoWrite", "memory_search", "read_file"]
    );
    assert_eq!(
        offered(with(Some(Dialect::ClaudeCode), None), Some(Dialect::Goclaw)),
        ["Read", "TodoWrite", "memory_search"],
        "the configuration wins over the entry point"
    );
    assert_eq!(
        offered(
            with(Some(Dialect::ClaudeCode), Some(Dialect::Both)),
            Some(Dialect::Goclaw)
        ),
        ["Read", "TodoWrite", "memory_search", "read_file"],
        "the agent's wins over the global one"
    );
}

/// Issue 36 (2): whatever the configured lists say, a run never administers the gateway nor
/// hands a chat off (its target would answer as a person's turn, outside the run's limits),
/// and a run at the deepest level starts no runs. A person's turn keeps all three.
#[test]
fn h36_2_runs_never_get_the_gateway_handoff_or_spawning_at_the_leaf() {
    let r = Registry::new();
    for tool in [
        Named {
            operator_only: true,
            ..Named::new("gateway")
        },
        Named {
            hands_off: true,
            starts_runs: true,
            ..Named::with("handoff", SideEffect::Spawns)
        },
        Named {
            starts_runs: true,
            ..Named::with("spawn", SideEffect::Spawns)
        },
        // A shell spawns processes, not runs: a leaf keeps it.
        Named::with("exec", SideEffect::Spawns),
    ] {
        r.register(tool).expect("registers");
    }
    // Lists emptied: the floor does not come from them.
    let mut config = PolicyConfig::default();
    config.subagents.deny.clear();
    config.subagents.leaf_deny.clear();
    config.subagents.max_spawn_depth = 2;
    let engine = PolicyEngine::new(config).expect("valid");
    let top = engine.effective(&r, &PolicyRequest::default());
    assert_eq!(top.len(), 4, "{top:?}");
    for (depth, expected) in [
        (0, &["exec", "spawn"][..]),
        (1, &["exec", "spawn"][..]),
        (2, &["exec"][..]),
    ] {
        let run = engine.effective(
            &r,
            &PolicyRequest {
                spawn_depth: depth,
                in_run: true,
                ..Default::default()
            },
        );
        assert_eq!(
            run.iter().map(String::as_str).collect::<Vec<_>>(),
            expected,
            "depth {depth}"
        );
    }
}

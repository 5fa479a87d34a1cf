use super::*;
use crate::test_tools::{Named, NeedsArgs};
use std::sync::Arc;

#[test]
fn register_get_unregister() {
    let r = Registry::new();
    r.register(Named::new("b_tool")).expect("register");
    r.register(Named::new("a_tool")).expect("register");
    assert_eq!(
        r.names(),
        vec!["a_tool", "b_tool"],
        "sorted for prompt-cache stability"
    );
    assert_eq!(
        r.register(Named::new("a_tool")),
        Err(RegistryError::Duplicate("a_tool".into()))
    );
    assert!(r.resolve("a_tool").is_some());
    assert!(r.unregister("a_tool"));
    assert!(!r.unregister("a_tool"));
    assert!(r.resolve("a_tool").is_none());
    assert_eq!(r.len(), 1);
}

#[test]
fn replace_swaps_a_registered_tool_and_adds_none() {
    let r = Registry::new();
    r.register(Named::new("a_tool")).expect("register");
    let before = r.generation();
    let mut mutating = Named::new("a_tool");
    mutating.side_effect = crate::tool::SideEffect::Mutating;
    mutating.groups = &["reading"];
    assert_eq!(r.replace(mutating), Ok(true));
    assert!(r.generation() > before);
    let tool = r.resolve("a_tool").expect("still registered");
    assert_eq!(
        tool.spec.side_effect,
        crate::tool::SideEffect::Mutating,
        "the new version runs"
    );
    assert_eq!(r.group("reading"), Some(vec!["a_tool".to_string()]));
    assert_eq!(r.replace(Named::new("absent")), Ok(false));
    assert!(r.resolve("absent").is_none(), "nothing added");
    assert_eq!(r.len(), 1);
}

#[test]
fn invalid_names_are_refused() {
    let r = Registry::new();
    assert!(matches!(
        r.register(Named::new("has space")),
        Err(RegistryError::InvalidName(_))
    ));
    assert!(matches!(
        r.register(Named::new("")),
        Err(RegistryError::InvalidName(_))
    ));
}

#[test]
fn legacy_aliases_resolve_to_canonical_tools() {
    let r = Registry::new();
    r.register(Named::new("exec")).expect("register");
    r.register(Named::new("edit")).expect("register");
    r.register(Named::new("spawn")).expect("register");
    r.register(Named::new("apply_patch")).expect("register");
    for (alias, canonical) in [
        ("bash", "exec"),
        ("edit_file", "edit"),
        ("sessions_spawn", "spawn"),
        ("apply-patch", "apply_patch"),
    ] {
        let tool = r
            .resolve(alias)
            .unwrap_or_else(|| panic!("{alias} resolves"));
        assert_eq!(tool.spec().name, canonical);
        assert_eq!(r.canonical_name(alias).as_deref(), Some(canonical));
    }
    // Aliases are not tools: they are not listed.
    assert!(!r.names().contains(&"bash".to_string()));
}

#[test]
fn alias_may_not_shadow_a_real_tool() {
    let r = Registry::new();
    r.register(Named::new("read_file")).expect("register");
    r.register(Named::new("Read")).expect("register");
    assert_eq!(
        r.add_alias("Read", "read_file"),
        Err(RegistryError::AliasShadowsTool("Read".into()))
    );
    r.add_alias("cat", "read_file").expect("alias");
    assert!(matches!(
        r.add_alias("cat", "Read"),
        Err(RegistryError::AliasTaken { .. })
    ));
    // Registering a tool over a custom alias is refused; over a built-in legacy alias the tool wins.
    assert!(matches!(
        r.register(Named::new("cat")),
        Err(RegistryError::NameIsAlias(..))
    ));
    r.register(Named::new("bash"))
        .expect("a real bash tool replaces the legacy alias");
    assert_eq!(
        r.resolve("bash").map(|t| t.spec().name.clone()).as_deref(),
        Some("bash")
    );
}

#[test]
fn disabled_tools_do_not_resolve_or_list() {
    let r = Registry::new();
    r.register(Named::new("exec")).expect("register");
    r.disable("exec");
    assert!(r.resolve("exec").is_none());
    assert!(
        r.resolve("bash").is_none(),
        "an alias of a disabled tool does not resolve"
    );
    assert!(r.names().is_empty());
    r.enable("exec");
    assert!(r.resolve("bash").is_some());
}

#[test]
fn unregister_by_prefix() {
    let r = Registry::new();
    for n in [
        "mcp__gh__search",
        "mcp__gh__issue",
        "mcp__fs__read",
        "datetime",
    ] {
        r.register(Named::new(n)).expect("register");
    }
    assert_eq!(
        r.unregister_prefix("mcp__gh__"),
        vec!["mcp__gh__issue", "mcp__gh__search"]
    );
    assert_eq!(r.names(), vec!["datetime", "mcp__fs__read"]);
}

#[test]
fn groups_builtin_dynamic_and_declared() {
    let r = Registry::new();
    assert!(
        r.group("fs")
            .expect("builtin")
            .contains(&"read_file".to_string())
    );
    assert_eq!(r.group("mcp"), Some(vec![]));
    r.register(Named::new("read_file")).expect("register");
    r.register(Named {
        name: "custom",
        side_effect: crate::tool::SideEffect::None,
        groups: &["fs", "extra"],
        ..Named::new("custom")
    })
    .expect("register");
    // Expansion is against the live registry: only registered members.
    let fs = r.expand_group("fs").expect("fs");
    assert_eq!(
        fs.into_iter().collect::<Vec<_>>(),
        vec!["custom", "read_file"]
    );
    assert_eq!(r.group("extra"), Some(vec!["custom".to_string()]));

    r.register_group("mcp:github", ["mcp__github__search".to_string()]);
    r.merge_group("mcp", ["mcp__github__search".to_string()]);
    r.merge_group(
        "mcp",
        [
            "mcp__github__search".to_string(),
            "mcp__fs__read".to_string(),
        ],
    );
    assert_eq!(r.group("mcp").map(|g| g.len()), Some(2), "merge dedups");
    assert!(
        r.expand_group("mcp:github").expect("group").is_empty(),
        "members not registered yet"
    );
    r.register(Named::new("mcp__github__search"))
        .expect("register");
    assert_eq!(r.expand_group("mcp:github").map(|g| g.len()), Some(1));
    assert!(r.unregister_group("mcp:github"));
    assert!(r.group("mcp:github").is_none());
}

#[test]
fn clone_is_independent_and_shares_implementations() {
    let r = Registry::new();
    r.register(Named::new("a")).expect("register");
    let c = r.clone_registry();
    c.register(Named::new("b")).expect("register");
    c.register_group("mine", ["a".to_string()]);
    assert_eq!(r.names(), vec!["a"]);
    assert!(r.group("mine").is_none(), "groups are deep-copied");
    let (ra, ca) = (r.resolve("a").expect("a"), c.resolve("a").expect("a"));
    assert!(Arc::ptr_eq(&ra, &ca));
}

#[test]
fn generation_changes_on_every_write() {
    let r = Registry::new();
    let g0 = r.generation();
    r.register(Named::new("a")).expect("register");
    let g1 = r.generation();
    r.disable("a");
    assert!(g0 < g1 && g1 < r.generation());
}

#[test]
fn concurrent_readers_and_writers() {
    let r = Arc::new(Registry::new());
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let name: &'static str = Box::leak(format!("t_{w}_{i}").into_boxed_str());
                    r.register(Named::new(name)).expect("register");
                    r.merge_group("mcp", [name.to_string()]);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let names = r.names();
                    let mut sorted = names.clone();
                    sorted.sort();
                    assert_eq!(names, sorted);
                    let _ = r.expand_group("mcp");
                }
            })
        })
        .collect();
    for h in writers.into_iter().chain(readers) {
        h.join().expect("thread");
    }
    assert_eq!(r.len(), 800);
    assert_eq!(r.expand_group("mcp").map(|g| g.len()), Some(800));
}

#[test]
fn schema_is_derived_and_required_listed() {
    let r = Registry::new();
    r.register(NeedsArgs).expect("register");
    let t = r.resolve("needs_args").expect("tool");
    assert_eq!(
        crate::schema::required_fields(t.schema()),
        vec!["path", "content"]
    );
    assert_eq!(
        t.schema()["properties"]["mode"]["enum"],
        serde_json::json!(["overwrite", "append", null]),
        "optional fields accept null"
    );
}

#[test]
fn schemas_with_newer_keywords_keep_their_draft() {
    use serde_json::json;
    assert!(!super::uses_newer_keywords(&json!({
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"enum": [1, 2]}}},
        "required": ["a"],
        "additionalProperties": false
    })));
    assert!(super::uses_newer_keywords(&json!({
        "type": "object",
        "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}]}}
    })));
    assert!(super::uses_newer_keywords(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema"
    })));
}

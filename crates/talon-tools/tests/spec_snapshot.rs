//! Snapshot of every built-in tool's model-facing spec. Models see these bytes; a change here is a
//! change to the model interface and must be deliberate. Update with `UPDATE_SNAPSHOTS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use talon_core::Registry;
use talon_core::wire::{WireFormat, definition};

#[test]
fn tool_specs_match_the_snapshot() {
    let registry = Registry::new();
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default()).unwrap();
    let specs: Vec<serde_json::Value> = registry
        .tools()
        .iter()
        .map(|t| {
            let mut spec = serde_json::json!({
                "mcp": definition(WireFormat::Mcp, t.spec(), t.schema()),
                "side_effect": t.spec().side_effect,
                "risk": t.spec().risk,
                "parallel_safe": t.spec().parallel_safe,
                "groups": t.spec().groups,
            });
            // Which tools the pipeline fences as untrusted, which hand calls to others, and
            // which take a shell script, is part of what the model is told and of what governs
            // a call.
            if t.spec().untrusted_output {
                spec["untrusted_output"] = true.into();
            }
            if !t.spec().delegates.is_empty() {
                spec["delegates"] = t.spec().delegates.clone().into();
            }
            // Which argument the permission step analyses as a shell script.
            if let Some(arg) = &t.spec().shell_script_arg {
                spec["shell_script_arg"] = arg.clone().into();
            }
            spec
        })
        .collect();
    for tool in registry.tools() {
        assert!(
            jsonschema::validator_for(tool.schema()).is_ok(),
            "{} has an invalid schema",
            tool.spec().name
        );
    }
    let actual = serde_json::to_string_pretty(&specs).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/tool_specs.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "tool specs changed; review and rerun with UPDATE_SNAPSHOTS=1\n{actual}"
    );
}

//! Snapshot of the tools the runtime owns — the run, team, cron and gateway tools, the built-ins
//! it replaces with versions that run on it, and the store's built-ins (which talon-tools'
//! snapshot, taken without a store, cannot register) — as models see them and as the
//! pipeline and policy read them (every declared property: untrusted output, starting runs,
//! handing off, for the operator only). A change here changes the model interface or what
//! governs a call, and must be deliberate. The built-in tools' own snapshot is talon-tools'.
//! Update with `UPDATE_SNAPSHOTS=1`.

use std::path::Path;
use std::sync::Arc;

use talon_runtime::config::Config;
use talon_runtime::runtime::{Overrides, build};

/// The spec and schema of `tool` as the snapshot holds them.
fn entry(tool: &talon_core::registry::RegisteredTool) -> serde_json::Value {
    serde_json::json!({"spec": tool.spec(), "input_schema": tool.schema()})
}

#[tokio::test]
async fn the_runtimes_tools_match_the_snapshot() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let rt = build(
        Config::default(),
        Overrides {
            data_dir: Some(data.path().to_path_buf()),
            workspace: Some(workspace.path().to_path_buf()),
            one_shot: true,
            ..Overrides::default()
        },
    )
    .await
    .unwrap();
    let registry = rt.pipeline.registry();
    // `talon serve` registers the gateway tool with its control; the same here.
    registry
        .register(talon_runtime::gateway_tool::Gateway {
            control: talon_runtime::gateway_tool::GatewayControl {
                config_file: None,
                operators: Arc::from(Vec::new()),
                bind: "127.0.0.1:0".into(),
                data_dir: data.path().to_path_buf(),
                store: rt.store.clone(),
                registry: Arc::clone(registry),
                channels: Vec::new(),
                started: std::time::Instant::now(),
                restart: Default::default(),
                reloading: Default::default(),
            },
        })
        .unwrap();
    // The built-ins as talon-tools registers them alone: what the runtime adds or replaces
    // differs from these.
    let builtins = talon_core::Registry::new();
    talon_tools::register_builtin(&builtins, &talon_tools::BuiltinConfig::default()).unwrap();
    let own: Vec<serde_json::Value> = registry
        .tools()
        .iter()
        .filter(|tool| {
            builtins
                .resolve(&tool.spec().name)
                .is_none_or(|builtin| entry(&builtin) != entry(tool))
        })
        .map(|tool| entry(tool))
        .collect();
    assert!(own.len() >= 20, "{} tools", own.len());
    for tool in registry.tools() {
        assert!(
            jsonschema::validator_for(tool.schema()).is_ok(),
            "{} has an invalid schema",
            tool.spec().name
        );
    }
    let actual = serde_json::to_string_pretty(&own).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/runtime_tools.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "the runtime's tool specs changed; review and rerun with UPDATE_SNAPSHOTS=1\n{actual}"
    );
}

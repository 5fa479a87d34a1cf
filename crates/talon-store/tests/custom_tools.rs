//! Issue 27 on both engines: custom tools stored with their variables encrypted, refused with
//! what to fix, and every change announced to the other processes sharing the database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use talon_store::{CustomToolSpec, EncryptionKey, Engine, Store, StoreConfig};

suite!(
    custom_tools_round_trip_with_encrypted_variables,
    bad_custom_tools_are_refused_with_what_to_fix,
    custom_tool_changes_bump_the_revision_and_notify,
);

async fn open_with(config: &StoreConfig, key: EncryptionKey) -> Store {
    Store::open(config)
        .await
        .unwrap()
        .unlock(key)
        .await
        .unwrap()
}

fn tool() -> CustomToolSpec {
    let mut spec = CustomToolSpec::new("count_lines", "Count lines.", "wc -l < {{.path}}");
    spec.parameters =
        serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}});
    spec.agent = "ops".into();
    spec
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([("REPORT_KEY".to_string(), "rk-secret-value-91".to_string())])
}

async fn custom_tools_round_trip_with_encrypted_variables(config: &StoreConfig) {
    let store = open_with(config, EncryptionKey::generate()).await;
    store
        .put_custom_tool(&tool(), Some(&env()), false, "alice")
        .await
        .unwrap();
    let stored = store.custom_tool("count_lines").await.unwrap().unwrap();
    assert_eq!(stored.spec, tool());
    assert_eq!(stored.env_names, vec!["REPORT_KEY".to_string()]);
    assert_eq!(stored.created_by, "alice");
    assert_eq!(store.custom_tool_env(&stored).await.unwrap(), env());
    // The value is a secret: scrubbed from every output, never stored as it is.
    let (values, broken) = store.secret_values().await.unwrap();
    assert!(broken.is_empty());
    assert!(
        values.iter().any(|v| v == "rk-secret-value-91"),
        "{values:?}"
    );

    // An add of an existing name fails; a replace without variables keeps them.
    let e = store
        .put_custom_tool(&tool(), None, false, "bob")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already defined"), "{e}");
    let mut changed = tool();
    changed.timeout_secs = 5;
    changed.enabled = false;
    store
        .put_custom_tool(&changed, None, true, "bob")
        .await
        .unwrap();
    let stored = store.custom_tool("count_lines").await.unwrap().unwrap();
    assert_eq!(stored.spec, changed);
    assert_eq!(store.custom_tool_env(&stored).await.unwrap(), env());
    // An empty map removes them.
    store
        .put_custom_tool(&changed, Some(&BTreeMap::new()), true, "bob")
        .await
        .unwrap();
    let stored = store.custom_tool("count_lines").await.unwrap().unwrap();
    assert!(stored.env_names.is_empty());
    assert!(store.custom_tool_env(&stored).await.unwrap().is_empty());

    // A store without the key cannot read the values, and says so instead of running
    // the tool half-configured.
    store
        .put_custom_tool(&changed, Some(&env()), true, "bob")
        .await
        .unwrap();
    let locked = Store::open(config).await.unwrap();
    let stored = locked.custom_tool("count_lines").await.unwrap().unwrap();
    assert!(locked.custom_tool_env(&stored).await.is_err());

    assert!(store.remove_custom_tool("count_lines").await.unwrap());
    assert!(!store.remove_custom_tool("count_lines").await.unwrap());
    assert!(store.custom_tools().await.unwrap().is_empty());
    let (values, _) = store.secret_values().await.unwrap();
    assert!(!values.iter().any(|v| v == "rk-secret-value-91"));
}

async fn bad_custom_tools_are_refused_with_what_to_fix(config: &StoreConfig) {
    let store = open_with(config, EncryptionKey::generate()).await;
    type Change = Box<dyn Fn(&mut CustomToolSpec)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|s| s.name = "Upper".into()), "lowercase"),
        (Box::new(|s| s.name = "mcp_github".into()), "MCP"),
        (Box::new(|s| s.name = "a__b".into()), "MCP"),
        (Box::new(|s| s.description = " ".into()), "description"),
        (Box::new(|s| s.command = String::new()), "command"),
        (Box::new(|s| s.working_dir = "../out".into()), "relative"),
        (Box::new(|s| s.working_dir = "/etc".into()), "relative"),
        (Box::new(|s| s.timeout_secs = 0), "1 to 3600"),
        (
            Box::new(|s| s.parameters = serde_json::json!([])),
            "object schema",
        ),
        (Box::new(|s| s.agent = "bad agent".into()), "agent key"),
    ];
    for (change, says) in cases {
        let mut spec = tool();
        change(&mut spec);
        let e = store
            .put_custom_tool(&spec, None, false, "x")
            .await
            .unwrap_err();
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    let bad_env = BTreeMap::from([("TALON_DATABASE_URL".to_string(), "x".to_string())]);
    let e = store
        .put_custom_tool(&tool(), Some(&bad_env), false, "x")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Talon's own"), "{e}");
    assert!(
        store.custom_tools().await.unwrap().is_empty(),
        "nothing was stored"
    );
}

async fn custom_tool_changes_bump_the_revision_and_notify(config: &StoreConfig) {
    let key = EncryptionKey::generate();
    let store = open_with(config, key.clone()).await;
    let wake = Arc::new(tokio::sync::Notify::new());
    store.notify_custom_tool_changes(Arc::clone(&wake));
    if store.engine() == Engine::Postgres {
        // The listener's own first wake-up, once it is listening.
        tokio::time::timeout(Duration::from_secs(30), wake.notified())
            .await
            .expect("the listener connects");
    }
    let before = store.custom_tools_revision().await.unwrap();
    // Another process (a second store on the same database) makes the change.
    let other = open_with(config, key).await;
    other
        .put_custom_tool(&tool(), None, false, "x")
        .await
        .unwrap();
    if store.engine() == Engine::Postgres {
        tokio::time::timeout(Duration::from_secs(30), wake.notified())
            .await
            .expect("NOTIFY reaches the other process");
    }
    let after = store.custom_tools_revision().await.unwrap();
    assert!(after > before, "{after} after {before}");
    other.remove_custom_tool("count_lines").await.unwrap();
    assert!(store.custom_tools_revision().await.unwrap() > after);
}

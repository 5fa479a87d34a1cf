//! The shared store suite: every test runs against SQLite, and against PostgreSQL whenever
//! `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets it and fails if the server is unreachable).
//! Each PostgreSQL test gets its own schema, so tests run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use talon_store::{AgentType, EncryptionKey, Engine, Store, StoreConfig, StoreError};

suite!(
    migrations_apply_once_and_are_recorded,
    a_newer_database_is_refused,
    concurrent_starts_migrate_once,
    agents_and_users,
    context_files_per_agent_and_user,
    secrets_are_encrypted_and_need_the_right_key,
    a_corrupted_secret_fails_alone,
    key_rotation_reencrypts_everything,
    memory_per_user_with_global_fallback,
    memory_search_ranks_and_scopes,
    memory_rewrite_reindexes,
    concurrent_memory_updates_lose_nothing,
    base_context_files_survive_user_overrides,
    the_pool_recovers_when_connections_drop,
    audit_entries_round_trip,
    allowed_commands_are_whole_commands_per_agent,
    cli_credentials_are_encrypted_and_granted_per_agent,
    cli_credential_updates_and_removal,
    binary_names_are_cached_briefly_and_refreshed_on_local_changes,
);

async fn migrations_apply_once_and_are_recorded(config: &StoreConfig) {
    let store = Store::connect(config).await.unwrap();
    let status = store.migration_status().await.unwrap();
    assert_eq!(status.current, 0);
    assert_eq!(status.pending.len(), talon_store::MIGRATIONS.len());
    assert_eq!(
        store.migrate().await.unwrap(),
        talon_store::MIGRATIONS
            .iter()
            .map(|m| m.version)
            .collect::<Vec<_>>()
    );
    assert!(
        store.migrate().await.unwrap().is_empty(),
        "second run applies nothing"
    );
    let status = store.migration_status().await.unwrap();
    assert_eq!((status.current, status.pending.len()), (status.latest, 0));
}

async fn a_newer_database_is_refused(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .execute_admin(
            "INSERT INTO talon_migrations (version, name, applied_at) VALUES (999, 'future', 0)",
        )
        .await
        .unwrap();
    let err = Store::open(config).await.expect_err("too new");
    assert!(
        matches!(err, StoreError::TooNew { found: 999, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade Talon"), "{err}");
}

async fn concurrent_starts_migrate_once(config: &StoreConfig) {
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let config = config.clone();
            tokio::spawn(async move { Store::open(&config).await.map(|_| ()) })
        })
        .collect();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let store = Store::connect(config).await.unwrap();
    let status = store.migration_status().await.unwrap();
    assert_eq!(status.current, status.latest);
    assert!(status.pending.is_empty());
}

async fn agents_and_users(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .upsert_agent("helper", AgentType::Open, "{}")
        .await
        .unwrap();
    store
        .upsert_agent("bot", AgentType::Predefined, "{\"x\":1}")
        .await
        .unwrap();
    store
        .upsert_agent("bot", AgentType::Predefined, "{\"x\":2}")
        .await
        .unwrap();
    let agents = store.agents().await.unwrap();
    assert_eq!(
        agents.iter().map(|a| a.key.as_str()).collect::<Vec<_>>(),
        vec!["bot", "helper"]
    );
    assert_eq!(
        store.agent("bot").await.unwrap().unwrap().settings,
        "{\"x\":2}"
    );
    assert!(store.agent("nobody").await.unwrap().is_none());
    assert!(matches!(
        store.upsert_agent("bad key", AgentType::Open, "{}").await,
        Err(StoreError::Invalid { .. })
    ));
    store.ensure_user("alice").await.unwrap();
    store.ensure_user("alice").await.unwrap();
}

async fn context_files_per_agent_and_user(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .upsert_agent("helper", AgentType::Open, "{}")
        .await
        .unwrap();
    store
        .set_agent_file("helper", "SOUL.md", "be kind")
        .await
        .unwrap();
    store
        .set_agent_file("helper", "SOUL.md", "be very kind")
        .await
        .unwrap();
    store
        .set_user_file("helper", "alice", "SOUL.md", "alice's soul")
        .await
        .unwrap();
    assert_eq!(
        store
            .agent_file("helper", "SOUL.md")
            .await
            .unwrap()
            .as_deref(),
        Some("be very kind")
    );
    assert_eq!(
        store
            .user_file("helper", "alice", "SOUL.md")
            .await
            .unwrap()
            .as_deref(),
        Some("alice's soul")
    );
    assert!(
        store
            .user_file("helper", "bob", "SOUL.md")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.agent_files("helper").await.unwrap(), vec!["SOUL.md"]);
    assert!(
        store
            .delete_user_file("helper", "alice", "SOUL.md")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_user_file("helper", "alice", "SOUL.md")
            .await
            .unwrap()
    );
    let err = store
        .set_agent_file("ghost", "SOUL.md", "x")
        .await
        .expect_err("no agent");
    assert_eq!(err.to_string(), "agent \"ghost\" does not exist");
}

async fn secrets_are_encrypted_and_need_the_right_key(config: &StoreConfig) {
    let key = EncryptionKey::generate();
    let store = Store::open(config).await.unwrap();
    let locked = store.set_secret("x", "y").await.expect_err("locked");
    assert!(
        locked
            .to_string()
            .contains("nothing is stored in plaintext"),
        "{locked}"
    );
    let store = store.unlock(key.clone()).await.unwrap();
    store.set_secret("github_token", "ghp_value").await.unwrap();
    assert_eq!(
        store.secret("github_token").await.unwrap().as_deref(),
        Some("ghp_value")
    );
    assert!(store.secret("missing").await.unwrap().is_none());
    let raw = store.raw_secret_bytes("github_token").await.unwrap();
    assert!(
        !raw.windows(9).any(|w| w == b"ghp_value"),
        "stored encrypted"
    );

    let wrong = Store::open(config)
        .await
        .unwrap()
        .unlock(EncryptionKey::generate())
        .await
        .expect_err("wrong key");
    assert!(wrong.to_string().contains("does not match"), "{wrong}");
    let again = Store::open(config)
        .await
        .unwrap()
        .unlock(key)
        .await
        .unwrap();
    assert_eq!(again.secret_names().await.unwrap(), vec!["github_token"]);
}

async fn a_corrupted_secret_fails_alone(config: &StoreConfig) {
    let store = Store::open(config)
        .await
        .unwrap()
        .unlock(EncryptionKey::generate())
        .await
        .unwrap();
    store.set_secret("good", "fine").await.unwrap();
    store.set_secret("bad", "value").await.unwrap();
    store.corrupt_secret_for_tests("bad").await.unwrap();
    let err = store.secret("bad").await.expect_err("corrupted");
    assert!(
        err.to_string()
            .starts_with("secret \"bad\" cannot be decrypted"),
        "{err}"
    );
    assert_eq!(store.secret("good").await.unwrap().as_deref(), Some("fine"));
    let (values, broken) = store.secret_values().await.unwrap();
    assert_eq!(values, vec!["fine"]);
    assert_eq!(broken.len(), 1);
}

async fn key_rotation_reencrypts_everything(config: &StoreConfig) {
    let old = EncryptionKey::generate();
    let mut store = Store::open(config)
        .await
        .unwrap()
        .unlock(old.clone())
        .await
        .unwrap();
    for i in 0..5 {
        store
            .set_secret(&format!("s{i}"), &format!("v{i}"))
            .await
            .unwrap();
    }
    let new = EncryptionKey::generate();
    assert_eq!(store.rotate_key(new.clone()).await.unwrap(), 5);
    assert_eq!(store.secret("s3").await.unwrap().as_deref(), Some("v3"));
    assert!(
        Store::open(config)
            .await
            .unwrap()
            .unlock(old)
            .await
            .is_err(),
        "the old key no longer unlocks"
    );
    let reopened = Store::open(config)
        .await
        .unwrap()
        .unlock(new)
        .await
        .unwrap();
    assert_eq!(reopened.secret("s0").await.unwrap().as_deref(), Some("v0"));
    assert_eq!(
        reopened.engine() == Engine::Postgres,
        config.url.starts_with("postgres")
    );
}

async fn memory_per_user_with_global_fallback(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    assert_eq!(
        store
            .put_memory("helper", "", "MEMORY.md", "global facts")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .put_memory("helper", "", "MEMORY.md", "global facts v2")
            .await
            .unwrap(),
        2
    );
    store
        .put_memory("helper", "alice", "MEMORY.md", "alice facts")
        .await
        .unwrap();
    assert_eq!(
        store
            .memory("helper", "alice", "MEMORY.md")
            .await
            .unwrap()
            .unwrap()
            .content,
        "alice facts"
    );
    let bob = store
        .memory("helper", "bob", "MEMORY.md")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (bob.content.as_str(), bob.version, bob.user.as_str()),
        ("global facts v2", 2, "")
    );
    assert!(
        store
            .memory("other-agent", "alice", "MEMORY.md")
            .await
            .unwrap()
            .is_none()
    );
    store
        .put_memory("helper", "alice", "memory/2026-11-22.md", "notes")
        .await
        .unwrap();
    assert_eq!(
        store.memory_paths("helper", "alice").await.unwrap(),
        vec!["MEMORY.md", "memory/2026-11-22.md"]
    );
    assert_eq!(
        store.memory_paths("helper", "bob").await.unwrap(),
        vec!["MEMORY.md"]
    );
    // All at once, each as `memory` returns it: the user's own copy over the global one.
    let docs = |found: Vec<talon_store::MemoryDocument>| -> Vec<(String, String, String)> {
        found
            .into_iter()
            .map(|d| (d.path, d.user, d.content))
            .collect()
    };
    let doc = |path: &str, user: &str, content: &str| {
        (path.to_string(), user.to_string(), content.to_string())
    };
    assert_eq!(
        docs(store.memory_documents("helper", "alice").await.unwrap()),
        vec![
            doc("MEMORY.md", "alice", "alice facts"),
            doc("memory/2026-11-22.md", "alice", "notes")
        ]
    );
    for user in ["bob", ""] {
        assert_eq!(
            docs(store.memory_documents("helper", user).await.unwrap()),
            vec![doc("MEMORY.md", "", "global facts v2")]
        );
    }
}

async fn memory_search_ranks_and_scopes(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .put_memory(
            "helper",
            "",
            "memory/pets.md",
            "The cat is named Miso.\nThe cat likes tuna.",
        )
        .await
        .unwrap();
    store
        .put_memory(
            "helper",
            "",
            "memory/work.md",
            "Deploys happen on Tuesday.\nThe cat sat on the keyboard once.",
        )
        .await
        .unwrap();
    store
        .put_memory("helper", "bob", "memory/private.md", "Bob's cat is secret")
        .await
        .unwrap();
    let hits = store
        .search_memory("helper", "alice", "cat tuna", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(
        hits[0].path, "memory/pets.md",
        "the chunk with both words ranks first: {hits:?}"
    );
    assert!(
        hits.iter().all(|h| h.user.is_empty()),
        "bob's memory is not visible to alice"
    );
    assert_eq!(
        store
            .search_memory("helper", "bob", "secret", 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .search_memory("helper", "alice", "\"cat\" AND (tuna* OR", 10)
            .await
            .unwrap()
            .len()
            == 2,
        "query syntax is data"
    );
    assert!(
        store
            .search_memory("helper", "alice", "   ", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search_memory("helper", "alice", "tuesday", 10)
            .await
            .unwrap()[0]
            .start_line,
        1
    );
}

async fn memory_rewrite_reindexes(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .put_memory("helper", "", "MEMORY.md", "alpha bravo")
        .await
        .unwrap();
    assert_eq!(
        store
            .search_memory("helper", "", "alpha", 10)
            .await
            .unwrap()
            .len(),
        1
    );
    store
        .put_memory("helper", "", "MEMORY.md", "charlie delta")
        .await
        .unwrap();
    assert!(
        store
            .search_memory("helper", "", "alpha", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search_memory("helper", "", "charlie", 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn concurrent_memory_updates_lose_nothing(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .update_memory::<std::convert::Infallible, _>(
                        "helper",
                        "",
                        "MEMORY.md",
                        |current| Ok(format!("{current}entry {i}\n")),
                    )
                    .await
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    let doc = store
        .memory("helper", "", "MEMORY.md")
        .await
        .unwrap()
        .unwrap();
    for i in 0..16 {
        assert!(
            doc.content.contains(&format!("entry {i}\n")),
            "entry {i} lost: {}",
            doc.content
        );
    }
    assert_eq!(doc.version, 16);
    let rejected = store
        .update_memory("helper", "", "MEMORY.md", |_| {
            Err::<String, _>("old_string not found")
        })
        .await
        .expect_err("rejected");
    assert_eq!(rejected.to_string(), "old_string not found");
}

async fn base_context_files_survive_user_overrides(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .upsert_agent("open", AgentType::Open, "{}")
        .await
        .unwrap();
    store
        .upsert_agent("pre", AgentType::Predefined, "{}")
        .await
        .unwrap();
    for agent in ["open", "pre"] {
        store
            .set_agent_file(agent, "SOUL.md", "agent soul")
            .await
            .unwrap();
        store
            .set_user_file(agent, "alice", "SOUL.md", "alice soul")
            .await
            .unwrap();
        store
            .set_user_file(agent, "alice", "USER.md", "alice user")
            .await
            .unwrap();
    }
    let base = vec![
        ("DELEGATION.md".to_string(), "delegate to x".to_string()),
        ("SOUL.md".to_string(), "base soul".to_string()),
    ];
    let open = store.context_files("open", "alice", &base).await.unwrap();
    assert_eq!(
        open,
        vec![
            ("DELEGATION.md".to_string(), "delegate to x".to_string()),
            ("SOUL.md".to_string(), "alice soul".to_string()),
            ("USER.md".to_string(), "alice user".to_string()),
        ]
    );
    let pre = store.context_files("pre", "alice", &base).await.unwrap();
    assert_eq!(
        pre[1],
        ("SOUL.md".to_string(), "agent soul".to_string()),
        "predefined: only USER.md is per user"
    );
    assert_eq!(pre[2], ("USER.md".to_string(), "alice user".to_string()));
    let bob = store.context_files("open", "bob", &base).await.unwrap();
    assert_eq!(bob[1].1, "agent soul");
}

async fn the_pool_recovers_when_connections_drop(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .upsert_agent("a", AgentType::Open, "{}")
        .await
        .unwrap();
    if store.engine() == Engine::Postgres {
        // Kill this pool's server sessions (they are named after the schema), as a restart would.
        let mut admin_config = config.clone();
        admin_config.schema = None;
        let admin = Store::connect(&admin_config).await.unwrap();
        let sql = format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'talon/{}'",
            config.schema.as_deref().unwrap()
        );
        admin.execute_admin(&sql).await.unwrap();
    }
    // The pool tests connections before handing them out, so the next call reconnects.
    assert!(
        store.agent("a").await.unwrap().is_some(),
        "the store recovers after its connections are dropped"
    );
}

async fn audit_entries_round_trip(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let entry = |tool: &str, is_error: bool| talon_store::AuditEntry {
        tool: tool.to_string(),
        session_key: "s1".into(),
        agent_key: Some("a".into()),
        user_id: None,
        args_digest: "00ff".into(),
        is_error,
        duration_us: 42,
        stage: is_error.then(|| "policy".to_string()),
    };
    store
        .record_audit(&[entry("read_file", false), entry("exec", true)])
        .await
        .unwrap();
    let got = store.audit_for_session("s1", 10).await.unwrap();
    assert_eq!(got, vec![entry("exec", true), entry("read_file", false)]);
    assert!(
        store
            .audit_for_session("other", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A batch larger than one statement's rows keeps every entry, in order.
    let many: Vec<_> = (0..150)
        .map(|i| talon_store::AuditEntry {
            session_key: "s2".into(),
            ..entry(&format!("tool{i}"), i % 2 == 0)
        })
        .collect();
    store.record_audit(&many).await.unwrap();
    let got = store.audit_for_session("s2", 200).await.unwrap();
    let mut expected = many;
    expected.reverse();
    assert_eq!(got, expected);
}

async fn allowed_commands_are_whole_commands_per_agent(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store.allow_command("ops", "git status").await.unwrap();
    store.allow_command("ops", "git status").await.unwrap();
    store
        .allow_command("dev", "git status && npm test")
        .await
        .unwrap();
    assert_eq!(
        store.allowed_commands().await.unwrap(),
        vec![
            ("dev".to_string(), "git status && npm test".to_string()),
            ("ops".to_string(), "git status".to_string()),
        ]
    );
    assert!(store.revoke_command("ops", "git status").await.unwrap());
    assert!(!store.revoke_command("ops", "git status").await.unwrap());
    let err = store.allow_command("ops", "").await.expect_err("empty");
    assert!(err.to_string().contains("1 to 8192 bytes"), "{err}");
}

fn gh_spec() -> talon_store::CliCredentialSpec {
    talon_store::CliCredentialSpec {
        binary_name: "gh".into(),
        binary_path: "/usr/bin/gh".into(),
        deny_args: vec![r"auth\s+".into()],
        deny_verbose: vec!["-v".into()],
        timeout_seconds: 30,
        tips: "GitHub CLI".into(),
        destinations: vec!["github.com".into()],
    }
}

async fn cli_credentials_are_encrypted_and_granted_per_agent(config: &StoreConfig) {
    let store = Store::open(config)
        .await
        .unwrap()
        .unlock(EncryptionKey::generate())
        .await
        .unwrap();
    let env =
        std::collections::BTreeMap::from([("GH_TOKEN".to_string(), "ghp_s3cretvalue".to_string())]);
    store.add_cli_credential(&gh_spec(), &env).await.unwrap();
    let again = store
        .add_cli_credential(&gh_spec(), &env)
        .await
        .expect_err("exists");
    assert!(again.to_string().contains("already registered"), "{again}");

    // The values are a secret (encrypted), the row only names them.
    let secret = talon_store::cli_credential_secret("gh");
    assert_eq!(secret, "cli-credential/gh");
    let raw = store.raw_secret_bytes(&secret).await.unwrap();
    assert!(!raw.windows(15).any(|w| w == b"ghp_s3cretvalue"));
    let listed = store.cli_credentials().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].spec, gh_spec());
    assert_eq!(listed[0].env_names, vec!["GH_TOKEN"]);
    assert!(listed[0].grants.is_empty());

    // Not granted: nothing, even though it is registered.
    assert!(store.credential_for("ops", "gh").await.unwrap().is_none());
    store.grant_cli_credential("gh", "ops").await.unwrap();
    store.grant_cli_credential("gh", "ops").await.unwrap();
    let granted = store.credential_for("ops", "gh").await.unwrap().unwrap();
    assert_eq!(granted.spec, gh_spec());
    assert_eq!(granted.env, env);
    assert!(store.credential_for("dev", "gh").await.unwrap().is_none());
    assert!(store.credential_for("ops", "aws").await.unwrap().is_none());
    assert_eq!(
        store.cli_binaries_granted_to("ops").await.unwrap(),
        vec!["gh"]
    );
    assert!(
        store
            .cli_binaries_granted_to("dev")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.cli_credential("gh").await.unwrap().unwrap().grants,
        vec!["ops"]
    );
    let missing = store
        .grant_cli_credential("aws", "ops")
        .await
        .expect_err("unknown binary");
    assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    let bad_agent = store
        .grant_cli_credential("gh", "a b")
        .await
        .expect_err("bad agent key");
    assert!(
        matches!(bad_agent, StoreError::Invalid { .. }),
        "{bad_agent}"
    );

    // The scrubber's list holds the value itself, not only the JSON around it.
    let (values, broken) = store.secret_values().await.unwrap();
    assert!(broken.is_empty());
    assert!(values.iter().any(|v| v == "ghp_s3cretvalue"), "{values:?}");

    // Revoking and validation.
    assert!(store.revoke_cli_credential("gh", "ops").await.unwrap());
    assert!(!store.revoke_cli_credential("gh", "ops").await.unwrap());
    assert!(store.credential_for("ops", "gh").await.unwrap().is_none());
    for (spec, needle) in [
        (
            talon_store::CliCredentialSpec {
                binary_name: "./gh".into(),
                ..gh_spec()
            },
            "without a path",
        ),
        (
            talon_store::CliCredentialSpec {
                binary_path: "gh".into(),
                ..gh_spec()
            },
            "absolute path",
        ),
        (
            talon_store::CliCredentialSpec {
                timeout_seconds: 0,
                ..gh_spec()
            },
            "1 to 3600",
        ),
        (
            talon_store::CliCredentialSpec {
                deny_args: vec![String::new()],
                ..gh_spec()
            },
            "every command",
        ),
    ] {
        let err = store
            .add_cli_credential(&spec, &Default::default())
            .await
            .expect_err(needle);
        assert!(err.to_string().contains(needle), "{err}");
    }
    let bad_env = std::collections::BTreeMap::from([("1X".to_string(), "v".to_string())]);
    let spec = talon_store::CliCredentialSpec {
        binary_name: "aws".into(),
        ..gh_spec()
    };
    let err = store
        .add_cli_credential(&spec, &bad_env)
        .await
        .expect_err("bad name");
    assert!(err.to_string().contains("variable name"), "{err}");
    assert!(
        store.cli_credential("aws").await.unwrap().is_none(),
        "nothing half-written"
    );
}

async fn cli_credential_updates_and_removal(config: &StoreConfig) {
    let key = EncryptionKey::generate();
    let mut store = Store::open(config)
        .await
        .unwrap()
        .unlock(key)
        .await
        .unwrap();
    let env =
        std::collections::BTreeMap::from([("GH_TOKEN".to_string(), "ghp_first_value".to_string())]);
    store.add_cli_credential(&gh_spec(), &env).await.unwrap();
    store.grant_cli_credential("gh", "ops").await.unwrap();

    // Updating the configuration without an environment keeps the stored values and grants.
    let changed = talon_store::CliCredentialSpec {
        timeout_seconds: 90,
        ..gh_spec()
    };
    store.update_cli_credential(&changed, None).await.unwrap();
    let got = store.credential_for("ops", "gh").await.unwrap().unwrap();
    assert_eq!((got.spec.timeout_seconds, got.env), (90, env));
    let env2 = std::collections::BTreeMap::from([
        ("GH_TOKEN".to_string(), "ghp_second_value".to_string()),
        ("GH_HOST".to_string(), "github.example".to_string()),
    ]);
    store
        .update_cli_credential(&changed, Some(&env2))
        .await
        .unwrap();
    let got = store.credential_for("ops", "gh").await.unwrap().unwrap();
    assert_eq!(got.env, env2);
    assert_eq!(
        store.cli_credential("gh").await.unwrap().unwrap().env_names,
        vec!["GH_HOST", "GH_TOKEN"]
    );
    let err = store
        .update_cli_credential(
            &talon_store::CliCredentialSpec {
                binary_name: "aws".into(),
                ..gh_spec()
            },
            None,
        )
        .await
        .expect_err("missing");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");

    // Key rotation covers the environment like any secret.
    let rotated = store.rotate_key(EncryptionKey::generate()).await.unwrap();
    assert!(rotated >= 1);
    assert_eq!(
        store
            .credential_for("ops", "gh")
            .await
            .unwrap()
            .unwrap()
            .env,
        env2
    );

    // A binary with no environment (git) stores no secret.
    let git = talon_store::CliCredentialSpec {
        binary_name: "git".into(),
        binary_path: "/usr/bin/git".into(),
        ..gh_spec()
    };
    store
        .add_cli_credential(&git, &Default::default())
        .await
        .unwrap();
    store.grant_cli_credential("git", "ops").await.unwrap();
    assert!(
        store
            .credential_for("ops", "git")
            .await
            .unwrap()
            .unwrap()
            .env
            .is_empty()
    );
    assert!(store.secret("cli-credential/git").await.unwrap().is_none());

    // A missing environment fails closed instead of running the binary without it.
    store.delete_secret("cli-credential/gh").await.unwrap();
    let err = store
        .credential_for("ops", "gh")
        .await
        .expect_err("missing env");
    assert!(err.to_string().contains("cli-credential/gh"), "{err}");
    store
        .update_cli_credential(&changed, Some(&env2))
        .await
        .unwrap();

    // Removal takes the grants and the secret with it.
    assert!(store.remove_cli_credential("gh").await.unwrap());
    assert!(!store.remove_cli_credential("gh").await.unwrap());
    assert!(store.secret("cli-credential/gh").await.unwrap().is_none());
    assert!(store.credential_for("ops", "gh").await.unwrap().is_none());
    assert_eq!(
        store.cli_binaries_granted_to("ops").await.unwrap(),
        vec!["git"]
    );
    let names: Vec<_> = store
        .cli_credentials()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.spec.binary_name)
        .collect();
    assert_eq!(names, vec!["git"]);
}

async fn binary_names_are_cached_briefly_and_refreshed_on_local_changes(config: &StoreConfig) {
    use std::time::Duration;
    let store = Store::open(config).await.unwrap();
    let store = store.unlock(EncryptionKey::generate()).await.unwrap();
    let long = Duration::from_secs(3600);
    assert!(
        store
            .cli_binary_names_recent(long)
            .await
            .unwrap()
            .is_empty()
    );
    let env =
        std::collections::BTreeMap::from([("GH_TOKEN".to_string(), "t0k3n-value".to_string())]);
    // A change through this store is seen at once, however long the cache could live.
    store.add_cli_credential(&gh_spec(), &env).await.unwrap();
    assert_eq!(
        *store.cli_binary_names_recent(long).await.unwrap(),
        vec!["gh".to_string()]
    );
    // Another process (another store) sees it once its list is older than the limit.
    let other = Store::open(config).await.unwrap();
    other.remove_cli_credential("gh").await.unwrap();
    assert_eq!(
        store.cli_binary_names_recent(long).await.unwrap().len(),
        1,
        "cached"
    );
    assert!(
        store
            .cli_binary_names_recent(Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

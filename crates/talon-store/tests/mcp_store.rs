//! Stored MCP servers, grants and access requests, on both engines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use talon_store::{
    EncryptionKey, Engine, GrantSpec, McpServerSecrets, McpServerSpec, RequestStatus, Store,
    StoreConfig, SubjectKind,
};

suite!(
    servers_round_trip_with_encrypted_secrets,
    bad_servers_are_refused_with_what_to_fix,
    grants_replace_and_revoke,
    approving_a_request_creates_its_grant_once,
    every_change_bumps_the_revision_and_notifies,
    grants_kept_in_memory_follow_changes_by_other_processes,
);

async fn open(config: &StoreConfig) -> Store {
    open_with(config, EncryptionKey::generate()).await
}

async fn open_with(config: &StoreConfig, key: EncryptionKey) -> Store {
    Store::open(config)
        .await
        .unwrap()
        .unlock(key)
        .await
        .unwrap()
}

fn remote() -> McpServerSpec {
    let mut spec = McpServerSpec::new("remote", "http");
    spec.url = "https://mcp.example.com/mcp".into();
    spec.require_grant = true;
    spec
}

fn header_secrets() -> McpServerSecrets {
    McpServerSecrets {
        headers: BTreeMap::from([("X-Api-Key".to_string(), "k3y-s3cret-value".to_string())]),
        ..McpServerSecrets::default()
    }
}

async fn servers_round_trip_with_encrypted_secrets(config: &StoreConfig) {
    let store = open(config).await;
    store
        .put_mcp_server(&remote(), Some(&header_secrets()), false)
        .await
        .unwrap();
    let again = store
        .put_mcp_server(&remote(), Some(&header_secrets()), false)
        .await
        .expect_err("an add never replaces");
    assert!(again.to_string().contains("already added"), "{again}");

    let listed = store.mcp_servers().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].spec, remote());
    assert_eq!(listed[0].header_names, vec!["X-Api-Key"]);
    // The value is encrypted at rest, readable through the store, and scrubbed from outputs.
    let raw = store
        .raw_secret_bytes(&talon_store::mcp_server_secret("remote"))
        .await
        .unwrap();
    assert!(!raw.windows(16).any(|w| w == b"k3y-s3cret-value"));
    assert_eq!(
        store.mcp_server_secrets(&listed[0]).await.unwrap(),
        header_secrets()
    );
    let (values, broken) = store.secret_values().await.unwrap();
    assert!(broken.is_empty());
    assert!(values.iter().any(|v| v == "k3y-s3cret-value"));

    // A change without secrets keeps them; with --replace semantics the row is updated.
    let mut changed = remote();
    changed.tool_timeout_secs = 5;
    changed.enabled = false;
    store.put_mcp_server(&changed, None, true).await.unwrap();
    let got = store.mcp_server("remote").await.unwrap().unwrap();
    assert_eq!(got.spec, changed);
    assert_eq!(
        store.mcp_server_secrets(&got).await.unwrap(),
        header_secrets()
    );

    // Removal takes the secrets (the tokens and what the bridge keeps beside them, but not a
    // server's of a longer name) and the grants with it.
    store
        .put_mcp_grant(&grant("remote", SubjectKind::Agent, "a", &[], &[]))
        .await
        .unwrap();
    let beside = format!("{}/challenge", talon_store::mcp_oauth_secret("remote"));
    let other = format!("{}/challenge", talon_store::mcp_oauth_secret("remote_2"));
    for name in [&beside, &other] {
        store.set_secret(name, "Bearer scope=\"a\"").await.unwrap();
    }
    // The noted challenge is no credential: it is not scrubbed from outputs.
    let (values, _) = store.secret_values().await.unwrap();
    assert!(!values.iter().any(|v| v.contains("scope=")), "{values:?}");
    assert!(store.remove_mcp_server("remote").await.unwrap());
    assert!(store.secret(&beside).await.unwrap().is_none());
    assert!(store.secret(&other).await.unwrap().is_some());
    assert!(!store.remove_mcp_server("remote").await.unwrap());
    assert!(store.mcp_servers().await.unwrap().is_empty());
    assert!(store.mcp_grants(None).await.unwrap().is_empty());
    assert!(
        store
            .secret(&talon_store::mcp_server_secret("remote"))
            .await
            .unwrap()
            .is_none()
    );
}

async fn bad_servers_are_refused_with_what_to_fix(config: &StoreConfig) {
    let store = open(config).await;
    let cases: Vec<(McpServerSpec, &str)> = vec![
        (McpServerSpec::new("bad name", "stdio"), "letters, digits"),
        (McpServerSpec::new("s", "stdio"), "needs a command"),
        (McpServerSpec::new("s", "ws"), "use stdio, http"),
        (
            {
                let mut s = McpServerSpec::new("s", "http");
                s.url = "ftp://x".into();
                s
            },
            "http:// or https://",
        ),
        (
            {
                let mut s = remote();
                s.tool_timeout_secs = 0;
                s
            },
            "use 1 to 3600",
        ),
    ];
    for (spec, expected) in cases {
        let e = store
            .put_mcp_server(&spec, None, false)
            .await
            .expect_err("refused");
        assert!(
            e.to_string().contains(expected),
            "{e} should say {expected}"
        );
    }
    let bad_header = McpServerSecrets {
        headers: BTreeMap::from([("X-Key".to_string(), "a\r\nInjected: yes".to_string())]),
        ..McpServerSecrets::default()
    };
    let e = store
        .put_mcp_server(&remote(), Some(&bad_header), false)
        .await
        .expect_err("header injection refused");
    assert!(e.to_string().contains("line breaks"), "{e}");
    assert!(store.mcp_servers().await.unwrap().is_empty());
}

fn grant(
    server: &str,
    kind: SubjectKind,
    subject: &str,
    allow: &[&str],
    deny: &[&str],
) -> GrantSpec {
    GrantSpec {
        server: server.into(),
        kind,
        subject: subject.into(),
        enabled: true,
        tool_allow: allow.iter().map(|s| s.to_string()).collect(),
        tool_deny: deny.iter().map(|s| s.to_string()).collect(),
        granted_by: "admin".into(),
    }
}

async fn grants_replace_and_revoke(config: &StoreConfig) {
    let store = open(config).await;
    // Servers of talon.toml are not stored: grants need no stored server.
    store
        .put_mcp_grant(&grant("files", SubjectKind::Agent, "coder", &["read"], &[]))
        .await
        .unwrap();
    store
        .put_mcp_grant(&grant(
            "files",
            SubjectKind::User,
            "u@example.com",
            &[],
            &["write"],
        ))
        .await
        .unwrap();
    store
        .put_mcp_grant(&grant(
            "files",
            SubjectKind::Agent,
            "coder",
            &["read", "list"],
            &[],
        ))
        .await
        .unwrap();
    let both = store
        .mcp_grants_for("files", Some("coder"), Some("u@example.com"))
        .await
        .unwrap();
    assert_eq!(both.len(), 2);
    let agent = both.iter().find(|g| g.kind == SubjectKind::Agent).unwrap();
    assert_eq!(
        agent.tool_allow,
        vec!["read", "list"],
        "replaced, not added"
    );
    // Only the caller's own grants concern a call.
    assert!(
        store
            .mcp_grants_for("files", Some("other"), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .mcp_grants_for("files", None, Some("u@example.com"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .remove_mcp_grant("files", SubjectKind::Agent, "coder")
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_mcp_grant("files", SubjectKind::Agent, "coder")
            .await
            .unwrap()
    );
    assert_eq!(store.mcp_grants(Some("files")).await.unwrap().len(), 1);
    let e = store
        .put_mcp_grant(&grant("files", SubjectKind::User, "bad\u{7}", &[], &[]))
        .await
        .expect_err("control characters refused");
    assert!(e.to_string().contains("control"), "{e}");
}

async fn approving_a_request_creates_its_grant_once(config: &StoreConfig) {
    let store = open(config).await;
    let tools = vec!["echo".to_string()];
    let id = store
        .request_mcp_access(
            "everything",
            SubjectKind::Agent,
            "helper",
            &tools,
            "needs echo",
            "bob",
        )
        .await
        .unwrap();
    let other = store
        .request_mcp_access(
            "everything",
            SubjectKind::User,
            "mallory",
            &[],
            "",
            "mallory",
        )
        .await
        .unwrap();
    let pending = store
        .mcp_access_requests(Some(RequestStatus::Pending))
        .await
        .unwrap();
    assert_eq!(
        pending.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![id, other]
    );

    // Two reviewers at once: exactly one wins, and the grant exists once.
    let (a, b) = tokio::join!(
        store.review_mcp_access(id, true, "alice", "ok"),
        store.review_mcp_access(id, true, "carol", "ok too"),
    );
    assert!(a.is_ok() ^ b.is_ok(), "{a:?} {b:?}");
    let loser = a.err().or(b.err()).unwrap();
    assert!(loser.to_string().contains("already approved"), "{loser}");
    let grants = store.mcp_grants(Some("everything")).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(
        (grants[0].subject.as_str(), grants[0].tool_allow.clone()),
        ("helper", tools)
    );

    let rejected = store
        .review_mcp_access(other, false, "alice", "no")
        .await
        .unwrap();
    assert_eq!(rejected.id, other);
    assert_eq!(
        store
            .mcp_access_requests(Some(RequestStatus::Rejected))
            .await
            .unwrap()[0]
            .review_note,
        "no"
    );
    assert_eq!(
        store.mcp_grants(None).await.unwrap().len(),
        1,
        "no grant on rejection"
    );
    let e = store
        .review_mcp_access(9999, true, "alice", "")
        .await
        .expect_err("unknown");
    assert!(e.to_string().contains("does not exist"), "{e}");
}

async fn every_change_bumps_the_revision_and_notifies(config: &StoreConfig) {
    let key = EncryptionKey::generate();
    let store = open_with(config, key.clone()).await;
    let wake = Arc::new(tokio::sync::Notify::new());
    store.notify_mcp_changes(Arc::clone(&wake));
    let mut last = store.mcp_revision().await.unwrap();
    if store.engine() == Engine::Postgres {
        // The listener's own first wake-up, once it is listening.
        tokio::time::timeout(Duration::from_secs(30), wake.notified())
            .await
            .expect("the listener connects");
    }
    let mut expect_bump = |revision: i64| {
        assert!(revision > last, "{revision} after {last}");
        last = revision;
    };
    // Another process (a second store on the same database) makes the changes.
    let other = open_with(config, key).await;
    other
        .put_mcp_server(&remote(), Some(&header_secrets()), false)
        .await
        .unwrap();
    if store.engine() == Engine::Postgres {
        tokio::time::timeout(Duration::from_secs(30), wake.notified())
            .await
            .expect("NOTIFY reaches the other process");
    }
    expect_bump(store.mcp_revision().await.unwrap());
    other
        .put_mcp_grant(&grant("remote", SubjectKind::Agent, "a", &[], &[]))
        .await
        .unwrap();
    expect_bump(store.mcp_revision().await.unwrap());
    let id = other
        .request_mcp_access("remote", SubjectKind::User, "u", &[], "", "u")
        .await
        .unwrap();
    expect_bump(store.mcp_revision().await.unwrap());
    other.review_mcp_access(id, true, "a", "").await.unwrap();
    expect_bump(store.mcp_revision().await.unwrap());
    other.remove_mcp_server("remote").await.unwrap();
    expect_bump(store.mcp_revision().await.unwrap());
}

async fn grants_kept_in_memory_follow_changes_by_other_processes(config: &StoreConfig) {
    let key = EncryptionKey::generate();
    let gateway = open_with(config, key.clone()).await;
    let cli = open_with(config, key).await;
    let read = || gateway.mcp_grants_for_current("files", Some("coder"), None);
    assert!(read().await.unwrap().is_empty());
    // Another process grants: the very next read sees it.
    cli.put_mcp_grant(&grant("files", SubjectKind::Agent, "coder", &["read"], &[]))
        .await
        .unwrap();
    assert_eq!(read().await.unwrap()[0].tool_allow, vec!["read"]);
    assert_eq!(
        read().await.unwrap()[0].tool_allow,
        vec!["read"],
        "from memory"
    );
    cli.put_mcp_grant(&grant("files", SubjectKind::Agent, "coder", &[], &["read"]))
        .await
        .unwrap();
    assert_eq!(read().await.unwrap()[0].tool_deny, vec!["read"]);
    cli.remove_mcp_grant("files", SubjectKind::Agent, "coder")
        .await
        .unwrap();
    assert!(read().await.unwrap().is_empty());
}

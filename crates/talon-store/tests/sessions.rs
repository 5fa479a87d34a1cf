//! Sessions and their messages on both engines: turns saved whole, history in order, an
//! interrupted turn reported and never half-saved, sessions belong to one agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use talon_store::{Store, StoreConfig};

mod common;

suite!(
    turns_append_in_order_and_count_tokens,
    an_unfinished_turn_is_reported_as_interrupted,
    a_session_belongs_to_its_agent,
    listing_and_limits,
    concurrent_turns_do_not_lock_each_other_out,
    compaction_keeps_messages_and_moves_the_live_history,
    settings_are_kept_per_session_and_replaced_one_by_one,
    h22_4_a_session_is_seen_and_continued_only_by_its_owner,
);

async fn open(config: &StoreConfig) -> Store {
    Store::open(config).await.unwrap()
}

fn msgs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn turns_append_in_order_and_count_tokens(config: &StoreConfig) {
    let store = open(config).await;
    let first = store.begin_turn("k1", "default", None).await.unwrap();
    assert_eq!(first.turn, 1);
    assert!(!first.previous_interrupted);
    assert_eq!(store.session("k1").await.unwrap().unwrap().state, "running");
    store
        .finish_turn("k1", first.turn, &msgs(&["u1", "a1"]), "final", 10, 3)
        .await
        .unwrap();
    let second = store.begin_turn("k1", "default", None).await.unwrap();
    assert_eq!(second.turn, 2);
    store
        .finish_turn(
            "k1",
            second.turn,
            &msgs(&["u2", "a2", "r2", "a3"]),
            "final",
            5,
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        store.session_messages("k1", None).await.unwrap(),
        ["u1", "a1", "u2", "a2", "r2", "a3"]
    );
    assert_eq!(
        store.session_messages("k1", Some(2)).await.unwrap(),
        ["r2", "a3"],
        "the newest, oldest first"
    );
    let s = store.session("k1").await.unwrap().unwrap();
    assert_eq!(
        (s.state.as_str(), s.turns, s.input_tokens, s.output_tokens),
        ("idle", 2, 15, 5)
    );
    assert_eq!(s.last_stop, "final");
}

async fn an_unfinished_turn_is_reported_as_interrupted(config: &StoreConfig) {
    let store = open(config).await;
    let t = store.begin_turn("k2", "default", None).await.unwrap();
    store
        .finish_turn("k2", t.turn, &msgs(&["u1", "a1"]), "final", 1, 1)
        .await
        .unwrap();
    // A turn starts and its process dies: nothing of it is saved.
    store.begin_turn("k2", "default", None).await.unwrap();
    // A starting gateway marks it.
    assert_eq!(store.mark_interrupted_turns().await.unwrap(), 1);
    let s = store.session("k2").await.unwrap().unwrap();
    assert_eq!(
        (s.state.as_str(), s.last_stop.as_str()),
        ("interrupted", "interrupted")
    );
    assert_eq!(
        store.session_messages("k2", None).await.unwrap(),
        ["u1", "a1"]
    );
    // Without a gateway in between, the next turn finds it still running.
    store.begin_turn("k2", "default", None).await.unwrap();
    let next = store.begin_turn("k2", "default", None).await.unwrap();
    assert!(next.previous_interrupted);
    assert_eq!(next.turn, 4);
}

async fn a_session_belongs_to_its_agent(config: &StoreConfig) {
    let store = open(config).await;
    store.begin_turn("k3", "alice", None).await.unwrap();
    let err = store
        .begin_turn("k3", "bob", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("taken by another agent or user"), "{err}");
    let err = store
        .begin_turn("", "bob", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("session key"), "{err}");
    let err = store
        .finish_turn("never-begun", 1, &msgs(&["x"]), "final", 0, 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("begin_turn first"), "{err}");
    assert!(
        store
            .session_messages("never-begun", None)
            .await
            .unwrap()
            .is_empty(),
        "rolled back"
    );
}

async fn listing_and_limits(config: &StoreConfig) {
    let store = open(config).await;
    for (key, agent) in [("a1", "alice"), ("b1", "bob"), ("a2", "alice")] {
        let t = store.begin_turn(key, agent, None).await.unwrap();
        store
            .finish_turn(key, t.turn, &msgs(&["m"]), "final", 0, 0)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let all: Vec<String> = store
        .sessions(None, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(all, ["a2", "b1", "a1"], "most recent first");
    let alice: Vec<String> = store
        .sessions(Some("alice"), None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(alice, ["a2", "a1"]);
    assert_eq!(store.sessions(None, None, 1).await.unwrap().len(), 1);
}

async fn concurrent_turns_do_not_lock_each_other_out(config: &StoreConfig) {
    let store = open(config).await;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    let key = format!("busy-{}", i % 8);
                    let t = store.begin_turn(&key, "default", None).await.unwrap();
                    store
                        .finish_turn(&key, t.turn, &[format!("m{i}")], "final", 1, 1)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let total: i64 = store
        .sessions(None, None, 100)
        .await
        .unwrap()
        .iter()
        .map(|s| s.turns)
        .sum();
    assert_eq!(total, 72);
    let messages: usize = message_count(&store).await;
    assert_eq!(messages, 72);
}

async fn message_count(store: &Store) -> usize {
    let mut n = 0;
    for i in 0..8 {
        n += store
            .session_messages(&format!("busy-{i}"), None)
            .await
            .unwrap()
            .len();
    }
    n
}

async fn compaction_keeps_messages_and_moves_the_live_history(config: &StoreConfig) {
    let store = open(config).await;
    let t = store.begin_turn("c1", "default", None).await.unwrap();
    store
        .finish_turn(
            "c1",
            t.turn,
            &msgs(&["u1", "a1", "u2", "a2"]),
            "final",
            0,
            0,
        )
        .await
        .unwrap();
    let all = store.session_messages_after("c1", 0).await.unwrap();
    assert_eq!(all.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert!(
        store
            .compact_session("c1", 2, "u1 was answered")
            .await
            .unwrap()
    );
    assert!(
        !store.compact_session("c1", 1, "shorter").await.unwrap(),
        "never goes back"
    );
    let s = store.session("c1").await.unwrap().unwrap();
    assert_eq!(
        (s.summary.as_str(), s.summary_through),
        ("u1 was answered", 2)
    );
    let live: Vec<String> = store
        .session_messages_after("c1", s.summary_through)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.1)
        .collect();
    assert_eq!(live, ["u2", "a2"]);
    assert_eq!(
        store.session_messages("c1", None).await.unwrap().len(),
        4,
        "nothing deleted"
    );
}

async fn settings_are_kept_per_session_and_replaced_one_by_one(config: &StoreConfig) {
    use serde_json::json;
    let store = open(config).await;
    assert!(store.session_settings("s1").await.unwrap().is_empty());
    let missing = store.set_session_setting("s1", "model", &json!("m")).await;
    assert!(
        missing.is_err_and(|e| e.to_string().contains("not a stored session")),
        "a setting needs its session"
    );
    store.begin_turn("s1", "default", None).await.unwrap();
    store.begin_turn("s2", "default", None).await.unwrap();
    store
        .set_session_setting("s1", "model", &json!("small"))
        .await
        .unwrap();
    store
        .set_session_setting("s1", "autoCompactEnabled", &json!(false))
        .await
        .unwrap();
    store
        .set_session_setting("s1", "model", &json!("large"))
        .await
        .unwrap();
    let settings = store.session_settings("s1").await.unwrap();
    assert_eq!(
        serde_json::Value::Object(settings),
        json!({"model": "large", "autoCompactEnabled": false})
    );
    assert!(store.session_settings("s2").await.unwrap().is_empty());
}

/// Issue 22 item 4: sessions record their user; another user's session (or an owned one, for a
/// call naming no user) is not found, is not listed, and is never continued.
async fn h22_4_a_session_is_seen_and_continued_only_by_its_owner(config: &StoreConfig) {
    let store = open(config).await;
    for (key, owner) in [
        ("alice-1", Some("alice")),
        ("bob-1", Some("bob")),
        ("open-1", None),
    ] {
        let t = store.begin_turn(key, "default", owner).await.unwrap();
        store
            .finish_turn(key, t.turn, &msgs(&["m"]), "final", 0, 0)
            .await
            .unwrap();
    }
    let keys = |list: Vec<talon_store::SessionRecord>| -> Vec<String> {
        list.into_iter().map(|s| s.key).collect()
    };
    for (owner, own) in [
        (Some("alice"), "alice-1"),
        (Some("bob"), "bob-1"),
        (None, "open-1"),
    ] {
        assert_eq!(
            keys(store.sessions(None, owner, 10).await.unwrap()),
            [own],
            "{owner:?}"
        );
        assert_eq!(
            keys(store.sessions(Some("default"), owner, 10).await.unwrap()),
            [own]
        );
        for key in ["alice-1", "bob-1", "open-1"] {
            let found = store
                .owned_session(key, Some("default"), owner)
                .await
                .unwrap();
            assert_eq!(found.is_some(), key == own, "{owner:?} looking up {key}");
        }
    }
    let alice = store
        .owned_session("alice-1", None, Some("alice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.owner, "alice");
    assert!(
        store
            .owned_session("alice-1", Some("other"), Some("alice"))
            .await
            .unwrap()
            .is_none(),
        "another agent's"
    );
    // Bob (or a call naming no user) cannot write into Alice's session.
    for intruder in [Some("bob"), None] {
        let err = store
            .begin_turn("alice-1", "default", intruder)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("taken by another agent or user"), "{err}");
        assert!(!err.contains("alice\""), "whose it is stays unsaid: {err}");
    }
    let after = store.session("alice-1").await.unwrap().unwrap();
    assert_eq!((after.turns, after.state.as_str()), (1, "idle"));
    assert_eq!(
        store
            .begin_turn("alice-1", "default", Some("alice"))
            .await
            .unwrap()
            .turn,
        2
    );
}

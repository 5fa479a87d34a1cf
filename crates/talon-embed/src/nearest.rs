//! Ranking a handful of candidates by meaning (the agents one may delegate to, the tools of MCP
//! servers): the query and every candidate's text are embedded (through a
//! [`crate::CachedEmbedder`] the candidates' vectors are remembered between searches) and the
//! candidates at least [`MIN_SIMILARITY`] similar to the query come back, most similar first.

use crate::{EmbedError, Embedder, dot};

/// Below this cosine a candidate is not a match by meaning (sentence models put unrelated
/// short texts near 0 and paraphrases above 0.4).
pub const MIN_SIMILARITY: f64 = 0.3;

/// [`nearest`] with `embedder` if there is one; none without, or when it fails (logged, naming
/// `search`): the caller ranks by words alone then, as memory search does.
pub async fn nearest_if<K: Clone>(
    embedder: Option<&dyn Embedder>,
    search: &str,
    query: &str,
    candidates: &[(K, String)],
) -> Vec<(K, f64)> {
    let Some(embedder) = embedder else {
        return Vec::new();
    };
    nearest(embedder, query, candidates)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(search, error = %e, "ranking by words only");
            Vec::new()
        })
}

/// `candidates` (key and text) at least [`MIN_SIMILARITY`] similar to `query`, with their
/// cosine, most similar first.
pub async fn nearest<K: Clone>(
    embedder: &dyn Embedder,
    query: &str,
    candidates: &[(K, String)],
) -> Result<Vec<(K, f64)>, EmbedError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut texts = Vec::with_capacity(candidates.len() + 1);
    texts.push(query.to_string());
    texts.extend(candidates.iter().map(|(_, t)| t.clone()));
    let vectors = embedder.embed(&texts).await?;
    let Some((query, rest)) = vectors.split_first() else {
        return Err(EmbedError::Malformed("no vector for the query".into()));
    };
    let mut near: Vec<(K, f64)> = candidates
        .iter()
        .zip(rest)
        .map(|((k, _), v)| (k.clone(), f64::from(dot(query, v))))
        .filter(|(_, s)| *s >= MIN_SIMILARITY)
        .collect();
    near.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(near)
}

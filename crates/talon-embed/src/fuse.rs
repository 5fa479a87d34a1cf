//! One ranking out of a full-text ranking and a vector ranking.
//!
//! The fused score of an item is its cosine similarity to the query plus [`WORDS_WEIGHT`] times
//! its full-text score relative to the query's best full-text match (so in [0, 1]): meaning
//! decides, shared words add up to a fifth of the scale of meaning, and an exact term (a name,
//! an error code) still lifts the passage that has it.
//!
//! Why not reciprocal-rank fusion (RRF, `Σ 1 / (60 + rank)`)? RRF rewards appearing in both
//! lists, and for a question worded differently from its answer the full-text list is made of
//! passages that share incidental words with the question; each of them that is also
//! somewhere in the vector list outranks the answer that only the vectors found. On Talon's
//! paraphrase corpus (240 notes, 60 questions, `tests/data/memory_corpus.json`) the answer was
//! in the top 5 for 40–46 questions with RRF (equal or 0.3 / 0.7 weights), 55 with this
//! fusion, 58 with vectors alone (and 0 with words alone). Why not GoClaw's weighted sum of
//! raw scores? bm25 is unbounded and `ts_rank` mostly below 0.1, so the same weights mean
//! different things on each engine; relative to the best match they mean the same.

use std::collections::HashMap;
use std::hash::Hash;

/// The weight of the full-text score (relative to the query's best match) against the cosine.
pub const WORDS_WEIGHT: f64 = 0.2;

/// One fused result.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused<K> {
    pub key: K,
    /// Higher is better.
    pub score: f64,
    /// Its rank (from 1) in the full-text ranking, if it was in it.
    pub words_rank: Option<usize>,
    /// Its cosine similarity, if it was in the vector ranking.
    pub similarity: Option<f64>,
}

/// The items of `words` (key and full-text score, higher better) and `near` (key and cosine
/// similarity), each once, best first; ties keep the order in which items were first met
/// (`words` first).
pub fn fuse<K: Eq + Hash + Clone>(words: &[(K, f64)], near: &[(K, f64)]) -> Vec<Fused<K>> {
    let best = words
        .iter()
        .map(|(_, s)| *s)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut order: HashMap<K, usize> = HashMap::new();
    let mut fused: Vec<Fused<K>> = Vec::new();
    fn entry<K: Eq + Hash + Clone>(
        order: &mut HashMap<K, usize>,
        fused: &mut Vec<Fused<K>>,
        key: &K,
    ) -> usize {
        let next = fused.len();
        let index = *order.entry(key.clone()).or_insert(next);
        if index == next {
            fused.push(Fused {
                key: key.clone(),
                score: 0.0,
                words_rank: None,
                similarity: None,
            });
        }
        index
    }
    for (rank, (key, score)) in words.iter().enumerate() {
        let i = entry(&mut order, &mut fused, key);
        fused[i].words_rank.get_or_insert(rank + 1);
        fused[i].score += WORDS_WEIGHT * (score.max(0.0) / best);
    }
    for (key, similarity) in near {
        let i = entry(&mut order, &mut fused, key);
        if fused[i].similarity.is_none() {
            fused[i].similarity = Some(*similarity);
            fused[i].score += similarity;
        }
    }
    // A stable sort: ties stay in the order met.
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meaning_decides_and_words_add() {
        let words = [("a", 8.0), ("b", 4.0)];
        let near = [("c", 0.7), ("b", 0.6), ("d", 0.1)];
        let fused = fuse(&words, &near);
        let keys: Vec<&str> = fused.iter().map(|f| f.key).collect();
        // b: 0.6 + 0.2 * 0.5 = 0.7; c: 0.7; a: 0.2; d: 0.1. b and c tie: b was met first.
        assert_eq!(keys, ["b", "c", "a", "d"]);
        assert_eq!(fused[0].words_rank, Some(2));
        assert_eq!(fused[0].similarity, Some(0.6));
        assert_eq!(fused[2].similarity, None);
        assert!(
            (fused[2].score - WORDS_WEIGHT).abs() < 1e-12,
            "the best match adds the weight"
        );
        assert!(fuse::<&str>(&[], &[]).is_empty());
        // Words alone keep their order.
        let alone: Vec<&str> = fuse(&words, &[]).into_iter().map(|f| f.key).collect();
        assert_eq!(alone, ["a", "b"]);
    }
}

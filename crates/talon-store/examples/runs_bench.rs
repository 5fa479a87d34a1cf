//! The run record's claim statement on both engines, in one run (docs/BENCHMARKS.md): runs per
//! second through `create_run` (the limit-checked `INSERT … SELECT` under the tenant's lock)
//! and `finish_run` (the end and its outbox row in one transaction), one caller at a time and
//! from 8 callers at once (as 8 gateways' workers would), with each statement's median latency.
//!
//! `TALON_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p talon-store --example runs_bench`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

mod support {
    pub mod engines;
}

use talon_store::{NewRun, RunLimits, RunStatus, RunUsage, Store, StoreConfig};

const CYCLES: usize = 2000;

fn new_run<'a>(session: &'a str) -> NewRun<'a> {
    NewRun {
        parent_session: session,
        session_prefix: "agent:a:subagent:direct:",
        agent: "a",
        origin: "subagent",
        context_mode: "fresh",
        task: "bench",
        owner: "bench",
        lease_until: i64::MAX,
        ..Default::default()
    }
}

/// `CYCLES` create + finish cycles from `workers` callers at once: cycles per second, and the
/// median latency of each statement.
async fn cycles(store: &Store, workers: usize) -> (f64, Duration, Duration) {
    let limits = RunLimits {
        max_concurrent: 10_000,
        ..RunLimits::default()
    };
    let per = CYCLES / workers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let session = format!("bench-{w}");
            let mut samples = Vec::with_capacity(per);
            for _ in 0..per {
                let t = Instant::now();
                let run = store.create_run(&new_run(&session), limits).await.unwrap();
                let created = t.elapsed();
                let t = Instant::now();
                store
                    .finish_run(
                        &run.id,
                        None,
                        RunStatus::Completed,
                        "done",
                        RunUsage::default(),
                        false,
                    )
                    .await
                    .unwrap();
                samples.push((created, t.elapsed()));
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let creates = median(samples.iter().map(|s| s.0).collect());
    let finishes = median(samples.iter().map(|s| s.1).collect());
    (rate, creates, finishes)
}

async fn bench(name: &str, config: StoreConfig) -> Vec<String> {
    let store = Store::open(&config).await.unwrap();
    let mut rows = Vec::new();
    for workers in [1, 8] {
        let (rate, creates, finishes) = cycles(&store, workers).await;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        rows.push(format!(
            "| {name} | {workers} | {rate:.0} runs/s | {:.3} ms | {:.3} ms |",
            ms(creates),
            ms(finishes)
        ));
    }
    rows
}

#[tokio::main]
async fn main() {
    support::engines::on_each_engine(
        "runs",
        "| engine | callers | runs started and ended | create_run median | finish_run median |",
        bench,
    )
    .await;
}

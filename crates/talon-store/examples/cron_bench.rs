//! The scheduler's statements with 10,000 jobs on each engine (docs/BENCHMARKS.md): the
//! wake-up query an idle scheduler runs (the earliest due time, one indexed read), the claim of
//! a batch of 16 due jobs (the one `UPDATE … RETURNING` with `SKIP LOCKED` on PostgreSQL), and,
//! for comparison, reading every job (what a scheduler that re-reads its job list each tick
//! pays, as GoClaw's does), each as p50 and p99.
//!
//! `TALON_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p talon-store --example cron_bench`
//!
//! With `TALON_BENCH_FILL_URL` (a store URL, and `TALON_BENCH_FILL_SCHEMA` on PostgreSQL) it
//! only fills that store with 10,000 jobs none of which is due for a day, for measuring an idle
//! `talon serve` on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

mod support {
    pub mod engines;
}

use talon_store::{MissedPolicy, NewCronJob, Schedule, ScheduleKind, Store, StoreConfig};

const JOBS: usize = 10_000;
const USERS: usize = 10;
const SAMPLES: usize = 300;
const BATCH: usize = 16;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Adds `JOBS` jobs (every 1 to 24 hours, none due now); how long that took.
async fn fill(store: &Store) -> Duration {
    let started = Instant::now();
    for i in 0..JOBS {
        let user = format!("user{}", i % USERS);
        let name = format!("job {i}");
        let every = format!("{}h", 1 + i % 24);
        let schedule = Schedule::parse(ScheduleKind::Every, &every, "").unwrap();
        store
            .add_cron_job(&NewCronJob {
                user: &user,
                agent: "helper",
                name: &name,
                schedule,
                message: "summarise what changed since the last run",
                session_key: "",
                delete_after_run: false,
                enabled: true,
                missed: MissedPolicy::RunOnce,
                delivery: None,
            })
            .await
            .unwrap();
    }
    started.elapsed()
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (ms(at(0.50)), ms(at(0.99)))
}

async fn bench(name: &str, config: StoreConfig) -> Vec<String> {
    let store = Store::open(&config).await.unwrap();
    let filled = fill(&store).await;
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for u in 0..USERS {
            ids.extend(
                store
                    .cron_jobs(&format!("user{u}"))
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|j| j.id),
            );
        }
        ids
    };
    assert_eq!(ids.len(), JOBS);
    let (mut wake, mut claims, mut idle_claims, mut full_reads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in 0..SAMPLES {
        // Nothing due: what an idle scheduler runs.
        let t = Instant::now();
        let due = store.next_cron_due().await.unwrap();
        wake.push(t.elapsed());
        assert!(due.unwrap() > now(), "nothing due");
        let t = Instant::now();
        assert!(
            store
                .claim_due_cron_jobs("bench", now() + 60_000, BATCH)
                .await
                .unwrap()
                .is_empty()
        );
        idle_claims.push(t.elapsed());
        // 16 jobs fall due: one claim takes them.
        let batch: Vec<String> = (0..BATCH)
            .map(|i| format!("'{}'", ids[(s * BATCH + i * 611) % JOBS]))
            .collect();
        store
            .execute_admin(&format!(
                "UPDATE cron_jobs SET next_run_at = {} WHERE id IN ({})",
                now() - 1000,
                batch.join(", ")
            ))
            .await
            .unwrap();
        let t = Instant::now();
        let claimed = store
            .claim_due_cron_jobs("bench", now() + 60_000, BATCH)
            .await
            .unwrap();
        claims.push(t.elapsed());
        assert_eq!(claimed.len(), BATCH);
        store
            .execute_admin(&format!(
                "UPDATE cron_jobs SET next_run_at = {}, lease_owner = '', lease_until = 0, claim_due = 0 WHERE lease_owner = 'bench'",
                now() + 3_600_000
            ))
            .await
            .unwrap();
        // Every job, as a scheduler re-reading its list each tick does.
        if s % 10 == 0 {
            let t = Instant::now();
            let mut n = 0;
            for u in 0..USERS {
                n += store.cron_jobs(&format!("user{u}")).await.unwrap().len();
            }
            full_reads.push(t.elapsed());
            assert_eq!(n, JOBS);
        }
    }
    let row = |what: &str, samples: Vec<Duration>| {
        let (p50, p99) = percentiles(samples);
        format!("| {name} | {what} | {p50:.3} ms | {p99:.3} ms |")
    };
    vec![
        format!(
            "| {name} | adding 10,000 jobs | {:.3} ms each | total {:.1} s |",
            filled.as_secs_f64() * 1000.0 / JOBS as f64,
            filled.as_secs_f64()
        ),
        row("next due time (idle wake-up)", wake),
        row("claim, nothing due", idle_claims),
        row("claim 16 due jobs", claims),
        row("read all 10,000 jobs (re-read per tick)", full_reads),
    ]
}

#[tokio::main]
async fn main() {
    if let Ok(url) = std::env::var("TALON_BENCH_FILL_URL") {
        let mut config = StoreConfig::url(url);
        config.schema = std::env::var("TALON_BENCH_FILL_SCHEMA").ok();
        let store = Store::open(&config).await.unwrap();
        let took = fill(&store).await;
        println!("filled 10,000 jobs in {:.1} s", took.as_secs_f64());
        return;
    }
    support::engines::on_each_engine(
        "cron",
        "| engine | statement (10,000 jobs) | p50 | p99 |",
        bench,
    )
    .await;
}

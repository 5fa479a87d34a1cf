//! The team board's claim on both engines, in one run (docs/BENCHMARKS.md): 2,000 tasks posted,
//! then claimed (the one-statement `claim_task`, highest priority first) and completed by 1 and
//! by 8 claimers at once (as 8 gateways' dispatchers would), claims per second and each
//! statement's median latency. Every task must be claimed exactly once.
//!
//! `TALON_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p talon-store --example teams_bench`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

mod support {
    pub mod engines;
}

use talon_store::{NewTask, Store, StoreConfig};

const TASKS: usize = 2000;

/// Posts `TASKS` tasks on `team`, then claims and completes them from `workers` claimers at
/// once: claims per second, the median claim and the median completion.
async fn round(store: &Store, team: &str, workers: usize) -> (f64, Duration, Duration) {
    store.create_team(team, "lead", "").await.unwrap();
    for i in 0..TASKS {
        let subject = format!("task {i}");
        store
            .create_task(&NewTask {
                team,
                subject: &subject,
                priority: i64::try_from(i % 7).unwrap(),
                created_by: "lead",
                ..NewTask::default()
            })
            .await
            .unwrap();
    }
    let started = Instant::now();
    let mut claimers = Vec::new();
    for w in 0..workers {
        let (store, team) = (store.clone(), team.to_string());
        claimers.push(tokio::spawn(async move {
            let member = format!("member-{w}");
            let mut samples = Vec::new();
            loop {
                let t = Instant::now();
                let Some(task) = store
                    .claim_task(&team, &member, None, i64::MAX, None)
                    .await
                    .unwrap()
                else {
                    return samples;
                };
                let claimed = t.elapsed();
                let t = Instant::now();
                store
                    .complete_task(&team, task.id, &member, "", "done")
                    .await
                    .unwrap();
                samples.push((task.id, claimed, t.elapsed()));
            }
        }));
    }
    let mut samples = Vec::new();
    for claimer in claimers {
        samples.extend(claimer.await.unwrap());
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    let mut ids: Vec<i64> = samples.iter().map(|s| s.0).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), TASKS, "every task claimed exactly once");
    assert_eq!(samples.len(), TASKS);
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let claims = median(samples.iter().map(|s| s.1).collect());
    let completions = median(samples.iter().map(|s| s.2).collect());
    (rate, claims, completions)
}

async fn bench(name: &str, config: StoreConfig) -> Vec<String> {
    let store = Store::open(&config).await.unwrap();
    let mut rows = Vec::new();
    for workers in [1, 8] {
        let (rate, claims, completions) = round(&store, &format!("bench-{workers}"), workers).await;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        rows.push(format!(
            "| {name} | {workers} | {rate:.0} claims/s | {:.3} ms | {:.3} ms |",
            ms(claims),
            ms(completions)
        ));
    }
    rows
}

#[tokio::main]
async fn main() {
    support::engines::on_each_engine(
        "teams",
        "| engine | claimers | tasks claimed and completed | claim_task median | complete_task median |",
        bench,
    )
    .await;
}

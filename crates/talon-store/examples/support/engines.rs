//! What the store benchmarks share: one measurement on SQLite (in a temporary directory) and,
//! where `TALON_BENCH_DATABASE_URL` names a PostgreSQL server, on it too (in a schema of its
//! own, dropped afterwards), printed as one Markdown table.

use std::future::Future;

use talon_store::{Store, StoreConfig};

/// Runs `bench` (engine name, configuration → table rows) on each engine there is, then prints
/// `header` and every row.
pub async fn on_each_engine<F, Fut>(tag: &str, header: &str, bench: F)
where
    F: Fn(&'static str, StoreConfig) -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let dir = tempfile::tempdir().unwrap();
    let mut rows = bench("SQLite", StoreConfig::sqlite_in(dir.path())).await;
    if let Ok(url) = std::env::var("TALON_BENCH_DATABASE_URL") {
        let schema = format!("bench_{tag}_{}", std::process::id());
        let mut config = StoreConfig::url(url.clone());
        config.schema = Some(schema.clone());
        rows.extend(bench("PostgreSQL", config).await);
        let admin = Store::connect(&StoreConfig::url(url)).await.unwrap();
        admin
            .execute_admin(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }
    println!("{header}");
    let columns = header.matches('|').count().saturating_sub(1);
    println!("|{}", " --- |".repeat(columns));
    for row in rows {
        println!("{row}");
    }
}

//! Issue 36: each migration is one source with per-engine fragments (tokens and blocks), and
//! the fragments may differ by more than spelling; this keeps the engines the same schema. Both engines are migrated from empty and must end
//! with the same tables and columns, but for the differences listed here on purpose.

use std::collections::BTreeSet;

use talon_store::Store;

use crate::common;

/// Columns only one engine has, on purpose: full-text search is an FTS5 virtual table on
/// SQLite (left out of the comparison) and a generated `tsvector` column on PostgreSQL.
const ONLY_POSTGRES: &[(&str, &str)] = &[("memory_chunks", "tsv"), ("team_tasks", "search")];
const ONLY_SQLITE: &[(&str, &str)] = &[];

fn listed(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    pairs
        .iter()
        .map(|(t, c)| (t.to_string(), c.to_string()))
        .collect()
}

#[tokio::test]
async fn h36_both_engines_end_with_the_same_schema() {
    let Some(postgres) = common::postgres_target() else {
        eprintln!("TALON_TEST_DATABASE_URL is not set; the engines' schemas not compared here");
        return;
    };
    let sqlite = common::sqlite_target();
    let on_sqlite = Store::open(&sqlite.config)
        .await
        .unwrap()
        .schema_columns()
        .await
        .unwrap();
    let on_postgres = Store::open(&postgres.config)
        .await
        .unwrap()
        .schema_columns()
        .await
        .unwrap();
    common::drop_schema(&postgres).await;
    assert!(on_sqlite.len() > 100, "{on_sqlite:?}");
    let only_sqlite: BTreeSet<_> = on_sqlite.difference(&on_postgres).cloned().collect();
    let only_postgres: BTreeSet<_> = on_postgres.difference(&on_sqlite).cloned().collect();
    assert_eq!(only_sqlite, listed(ONLY_SQLITE), "columns only SQLite has");
    assert_eq!(
        only_postgres,
        listed(ONLY_POSTGRES),
        "columns only PostgreSQL has"
    );
}

/// Issue 36: each applied migration's checksum is recorded; a database whose applied migration
/// differs from this binary's (the file was edited after release) is refused at start, naming
/// it, on both engines.
async fn h36_an_edited_migration_is_refused_at_start(config: &talon_store::StoreConfig) {
    let store = Store::open(config).await.unwrap();
    store
        .execute_admin(
            "UPDATE talon_migrations SET checksum = '0123456789abcdef' WHERE version = 5",
        )
        .await
        .unwrap();
    drop(store);
    let refused = Store::open(config).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("migration 5 (sessions) is not the one applied"),
        "{refused}"
    );
}

suite!(h36_an_edited_migration_is_refused_at_start);

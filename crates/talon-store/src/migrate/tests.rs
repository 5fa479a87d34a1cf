//! Every migration renders on both engines, and applied migrations keep their checksums.

use super::{MIGRATIONS, checksum, migrations_for};
use crate::Engine;

/// Each version's checksum on SQLite and on PostgreSQL, as recorded in databases already
/// migrated: computed from the files applied, before the two engines' files became one source.
const CHECKSUMS: &[(i64, &str, &str)] = &[
    (1, "2abe276ec488054f", "0d95c7e707285933"),
    (2, "99acf3338d1f41a7", "a01200823a2cc66a"),
    (3, "466443bb5fababbc", "df95af811f310dd4"),
    (4, "5d12e350aebb6163", "9411e2bda4d51946"),
    (5, "cdc463f94708149b", "42c72cc24de5689c"),
    (6, "4d6a1598e2c4f13e", "8aab914cc031fe09"),
    (7, "b20dce9f4e75a9c3", "b20dce9f4e75a9c3"),
    (8, "1b85d48ce5d3e8de", "1b85d48ce5d3e8de"),
    (9, "d909ec963f487bb9", "d909ec963f487bb9"),
    (10, "8ee1f8d0d45fd574", "8ee1f8d0d45fd574"),
    (11, "d70fbb71cb35bd13", "d70fbb71cb35bd13"),
    (12, "caa9660b72f3be6a", "caa9660b72f3be6a"),
    (13, "0bba3a945d92aeb1", "62f80fc3da82554a"),
    (14, "94579eecfb919e00", "b90580c3c06205d5"),
    (15, "b138ef14bfb80dfc", "b8d288b0f290c9e9"),
    (16, "3f6e3cb57b3d9f8d", "a957084342c0d987"),
    (17, "6b1a80497bc09c98", "6b1a80497bc09c98"),
    (18, "6c48bcfefc5b82c8", "43ae2d60d16c3350"),
    (19, "3a9c7dc1d938ec45", "3a9c7dc1d938ec45"),
    (20, "b6a3e99f8b87bfbb", "b6a3e99f8b87bfbb"),
    (21, "00c6c64aa1577d71", "00c6c64aa1577d71"),
    (22, "26ca3d0363f85b15", "26ca3d0363f85b15"),
    (23, "af96f6f5f0397bd5", "af96f6f5f0397bd5"),
];

fn checksums(engine: Engine) -> Vec<(i64, String)> {
    migrations_for(engine)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|(m, sql)| (m.version, checksum(sql)))
        .collect()
}

#[test]
fn every_migration_renders_on_both_engines() {
    for engine in [Engine::Sqlite, Engine::Postgres] {
        let rendered: Vec<_> = migrations_for(engine)
            .unwrap_or_else(|e| panic!("{e}"))
            .collect();
        assert_eq!(rendered.len(), MIGRATIONS.len());
        for (m, sql) in rendered {
            assert!(
                !sql.contains("{{") && !sql.lines().any(|l| l.trim().starts_with("-- @")),
                "migration {} ({}) keeps a fragment on {engine:?}",
                m.version,
                m.name
            );
        }
    }
}

#[test]
fn versions_count_from_one_without_gaps() {
    let versions: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
    let expected: Vec<i64> = (1..).take(MIGRATIONS.len()).collect();
    assert_eq!(versions, expected);
}

#[test]
fn applied_migrations_keep_their_checksums() {
    const NEVER_EDIT: &str = "an applied migration must never be edited: databases already \
        migrated record its checksum and Talon refuses to start on them. Restore the migration \
        (its rendered SQL, byte for byte, on both engines) and add a new migration instead";
    let sqlite = checksums(Engine::Sqlite);
    let postgres = checksums(Engine::Postgres);
    let unpinned: Vec<String> = sqlite
        .iter()
        .zip(&postgres)
        .filter(|((v, _), _)| !CHECKSUMS.iter().any(|(pinned, _, _)| pinned == v))
        .map(|((v, s), (_, p))| format!("    ({v}, \"{s}\", \"{p}\"),"))
        .collect();
    assert!(
        unpinned.is_empty(),
        "pin the new migrations' checksums in CHECKSUMS:\n{}",
        unpinned.join("\n")
    );
    for (version, want_sqlite, want_postgres) in CHECKSUMS {
        for (engine, ours, want) in [
            ("SQLite", &sqlite, want_sqlite),
            ("PostgreSQL", &postgres, want_postgres),
        ] {
            let got = ours
                .iter()
                .find(|(v, _)| v == version)
                .map(|(_, c)| c.as_str());
            assert_eq!(
                got,
                Some(*want),
                "migration {version} on {engine}: its checksum changed; {NEVER_EDIT}"
            );
        }
    }
}

//! Versioned migrations: applied in order, recorded in `talon_migrations`, each in its own
//! transaction, and never on a database newer than this binary.
//!
//! **One source per version.** Each migration is one file, `migrations/NNNN_name.sql`, for both
//! engines: the two dialects share almost all their text, and two copies drift apart. Where they
//! differ, the file holds per-engine fragments (inline tokens such as `{{bigint}}`, whole-line
//! `-- @sqlite` / `-- @postgres` / `-- @end` blocks), rendered per engine by [`render`] once, on
//! first use (`migrations/README.md` says how to write one).
//!
//! **Checksums.** From v23 each applied migration's checksum, over the engine's rendered SQL, is
//! recorded, and a database whose applied migration's text changed is refused at start. So the
//! rendering of an applied migration must never change, byte for byte: the unit tests pin every
//! version's checksums on both engines, and a change goes in a new migration.
//!
//! Concurrent starts are safe: PostgreSQL serialises migrators with an advisory lock; SQLite
//! takes the write lock up front (`BEGIN IMMEDIATE`) and re-reads the version under it.

mod render;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use sqlx::{Acquire, Row};

pub use render::MigrationSourceError;

use crate::{Engine, Store, StoreError, now_ms};

/// One schema change, written once for both engines (see the module comment).
#[derive(Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    /// The SQL source, with the engines' fragments ([`render`]).
    source: &'static str,
}

const fn migration(version: i64, name: &'static str, source: &'static str) -> Migration {
    Migration {
        version,
        name,
        source,
    }
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    migration(1, "init", include_str!("../migrations/0001_init.sql")),
    migration(2, "exec", include_str!("../migrations/0002_exec.sql")),
    migration(3, "mcp", include_str!("../migrations/0003_mcp.sql")),
    migration(
        4,
        "mcp_oauth",
        include_str!("../migrations/0004_mcp_oauth.sql"),
    ),
    migration(
        5,
        "sessions",
        include_str!("../migrations/0005_sessions.sql"),
    ),
    migration(
        6,
        "session_settings",
        include_str!("../migrations/0006_session_settings.sql"),
    ),
    migration(
        7,
        "session_owner",
        include_str!("../migrations/0007_session_owner.sql"),
    ),
    migration(8, "runs", include_str!("../migrations/0008_runs.sql")),
    migration(
        9,
        "run_delivery",
        include_str!("../migrations/0009_run_delivery.sql"),
    ),
    migration(
        10,
        "agent_links",
        include_str!("../migrations/0010_agent_links.sql"),
    ),
    migration(
        11,
        "handoff_routes",
        include_str!("../migrations/0011_handoff_routes.sql"),
    ),
    migration(
        12,
        "run_overrides",
        include_str!("../migrations/0012_run_overrides.sql"),
    ),
    migration(13, "teams", include_str!("../migrations/0013_teams.sql")),
    migration(
        14,
        "memory_vectors",
        include_str!("../migrations/0014_memory_vectors.sql"),
    ),
    migration(15, "skills", include_str!("../migrations/0015_skills.sql")),
    migration(
        16,
        "knowledge_graph",
        include_str!("../migrations/0016_knowledge_graph.sql"),
    ),
    migration(
        17,
        "custom_tools",
        include_str!("../migrations/0017_custom_tools.sql"),
    ),
    migration(18, "cron", include_str!("../migrations/0018_cron.sql")),
    migration(
        19,
        "cron_delivery",
        include_str!("../migrations/0019_cron_delivery.sql"),
    ),
    migration(
        20,
        "cli_credential_destinations",
        include_str!("../migrations/0020_cli_credential_destinations.sql"),
    ),
    migration(
        21,
        "mcp_protocol_version",
        include_str!("../migrations/0021_mcp_protocol_version.sql"),
    ),
    migration(
        22,
        "turn_checkpoints",
        include_str!("../migrations/0022_turn_checkpoints.sql"),
    ),
    migration(
        23,
        "migration_checksums",
        include_str!("../migrations/0023_migration_checksums.sql"),
    ),
];

/// Both engines' SQL of one migration.
struct Rendered {
    sqlite: String,
    postgres: String,
}

impl Rendered {
    fn sql(&self, engine: Engine) -> &str {
        match engine {
            Engine::Sqlite => &self.sqlite,
            Engine::Postgres => &self.postgres,
        }
    }
}

type RenderFailure = (&'static Migration, MigrationSourceError);

/// Every migration with its SQL for `engine`, in order. Rendered once, on first use (the sources
/// are compiled in, and a unit test renders them all, so this does not fail in a shipped binary).
fn migrations_for(
    engine: Engine,
) -> Result<impl Iterator<Item = (&'static Migration, &'static str)>, StoreError> {
    static RENDERED: OnceLock<Result<Vec<Rendered>, RenderFailure>> = OnceLock::new();
    let rendered = RENDERED.get_or_init(|| {
        MIGRATIONS
            .iter()
            .map(|m| {
                let sqlite = render::render(m.source, Engine::Sqlite).map_err(|e| (m, e))?;
                let postgres = render::render(m.source, Engine::Postgres).map_err(|e| (m, e))?;
                Ok(Rendered { sqlite, postgres })
            })
            .collect()
    });
    match rendered {
        Ok(all) => Ok(MIGRATIONS
            .iter()
            .zip(all)
            .map(move |(m, r)| (m, r.sql(engine)))),
        Err((m, e)) => Err(StoreError::MigrationSource {
            version: m.version,
            name: m.name,
            source: e.clone(),
        }),
    }
}

/// The version from which `talon_migrations` records checksums.
const CHECKSUMS_FROM: i64 = 23;

/// FNV-1a 64 of `sql`, in hex: enough to notice an edited migration (not a defence against a
/// forger, who could edit the bookkeeping row as well).
fn checksum(sql: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sql.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Arbitrary, fixed key for `pg_advisory_lock` ("talon" in ASCII).
const ADVISORY_LOCK: i64 = 0x74_61_6c_6f_6e;

const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS talon_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

/// Where the database stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// Highest applied version (0 for an empty database).
    pub current: i64,
    /// Highest version this binary knows.
    pub latest: i64,
    /// Versions and names still to apply.
    pub pending: Vec<(i64, &'static str)>,
}

fn latest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

async fn current_version(conn: &mut sqlx::AnyConnection) -> Result<i64, sqlx::Error> {
    let row = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM talon_migrations")
        .fetch_one(&mut *conn)
        .await?;
    row.try_get::<i64, _>("v")
}

impl Store {
    /// The applied and pending migrations.
    pub async fn migration_status(&self) -> Result<MigrationStatus, StoreError> {
        let mut conn = self.pool().acquire().await?;
        self.lock_migrations(&mut conn).await?;
        let created = sqlx::query(BOOKKEEPING).execute(&mut *conn).await;
        let current = match created {
            Ok(_) => current_version(&mut conn).await,
            Err(e) => Err(e),
        };
        self.unlock_migrations(&mut conn).await;
        let current = current?;
        Ok(MigrationStatus {
            current,
            latest: latest(),
            pending: MIGRATIONS
                .iter()
                .filter(|m| m.version > current)
                .map(|m| (m.version, m.name))
                .collect(),
        })
    }

    /// Applies pending migrations; returns the versions applied.
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        // Fast path for every start but the first: an up-to-date schema needs no lock and no
        // write (one read; `talon mcp` starts in milliseconds).
        if matches!(current_version(&mut conn).await, Ok(v) if v == latest()) {
            self.check_checksums(&mut conn, latest()).await?;
            return Ok(Vec::new());
        }
        // Lock first: even CREATE TABLE IF NOT EXISTS races between PostgreSQL sessions.
        self.lock_migrations(&mut conn).await?;
        let result = match sqlx::query(BOOKKEEPING).execute(&mut *conn).await {
            Ok(_) => match self.apply_pending(&mut conn).await {
                // `apply_pending` has made the database the latest version (or refused).
                Ok(applied) => self
                    .check_checksums(&mut conn, latest())
                    .await
                    .map(|()| applied),
                Err(e) => Err(e),
            },
            Err(e) => Err(e.into()),
        };
        self.unlock_migrations(&mut conn).await;
        result
    }

    /// Records the checksums of applied migrations that have none yet, and refuses a database
    /// where an applied migration's checksum differs from this binary's: the file was edited
    /// after it was applied, and the schema is not what the version says.
    async fn check_checksums(
        &self,
        conn: &mut sqlx::AnyConnection,
        current: i64,
    ) -> Result<(), StoreError> {
        if current < CHECKSUMS_FROM {
            return Ok(());
        }
        let rows = sqlx::query("SELECT version, checksum FROM talon_migrations")
            .fetch_all(&mut *conn)
            .await?;
        for row in rows {
            let version: i64 = row.try_get("version")?;
            let stored: String = row.try_get("checksum")?;
            let Some((migration, sql)) =
                migrations_for(self.engine)?.find(|(m, _)| m.version == version)
            else {
                continue;
            };
            let ours = checksum(sql);
            if stored.is_empty() {
                sqlx::query("UPDATE talon_migrations SET checksum = $2 WHERE version = $1")
                    .bind(version)
                    .bind(&ours)
                    .execute(&mut *conn)
                    .await?;
            } else if stored != ours {
                return Err(StoreError::MigrationChanged {
                    version,
                    name: migration.name,
                });
            }
        }
        Ok(())
    }

    /// Serialises migrators on PostgreSQL (SQLite serialises with `BEGIN IMMEDIATE`).
    async fn lock_migrations(&self, conn: &mut sqlx::AnyConnection) -> Result<(), StoreError> {
        if self.engine == Engine::Postgres {
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(ADVISORY_LOCK)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    async fn unlock_migrations(&self, conn: &mut sqlx::AnyConnection) {
        if self.engine == Engine::Postgres {
            // Released on disconnect anyway; release now so the pooled connection is clean.
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(ADVISORY_LOCK)
                .execute(&mut *conn)
                .await;
        }
    }

    async fn apply_pending(&self, conn: &mut sqlx::AnyConnection) -> Result<Vec<i64>, StoreError> {
        let mut applied = Vec::new();
        for (migration, sql) in migrations_for(self.engine)? {
            let fail = |source| StoreError::Migration {
                version: migration.version,
                name: migration.name,
                source,
            };
            if self.engine == Engine::Sqlite {
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut *conn)
                    .await
                    .map_err(fail)?;
            } else {
                sqlx::raw_sql("BEGIN")
                    .execute(&mut *conn)
                    .await
                    .map_err(fail)?;
            }
            let outcome: Result<bool, sqlx::Error> = async {
                let current = current_version(conn).await?;
                if current > latest() {
                    return Ok(false);
                }
                if migration.version <= current {
                    return Ok(false);
                }
                sqlx::raw_sql(sql).execute(&mut *conn).await?;
                sqlx::query(
                    "INSERT INTO talon_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                )
                .bind(migration.version)
                .bind(migration.name)
                .bind(now_ms())
                .execute(&mut *conn)
                .await?;
                Ok(true)
            }
            .await;
            match outcome {
                Ok(did) => {
                    sqlx::raw_sql("COMMIT")
                        .execute(&mut *conn)
                        .await
                        .map_err(fail)?;
                    if did {
                        tracing::info!(
                            version = migration.version,
                            name = migration.name,
                            engine = self.engine.dir(),
                            "migration applied"
                        );
                        applied.push(migration.version);
                    }
                }
                Err(e) => {
                    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
                    return Err(fail(e));
                }
            }
        }
        let current = current_version(conn.acquire().await?).await?;
        if current > latest() {
            return Err(StoreError::TooNew {
                found: current,
                supported: latest(),
            });
        }
        Ok(applied)
    }
}

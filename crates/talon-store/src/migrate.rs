//! Versioned migrations: applied in order, recorded in `talon_migrations`, each in its own
//! transaction, and never on a database newer than this binary.
//!
//! Concurrent starts are safe: PostgreSQL serialises migrators with an advisory lock; SQLite
//! takes the write lock up front (`BEGIN IMMEDIATE`) and re-reads the version under it.

use sqlx::{Acquire, Row};

use crate::{Engine, Store, StoreError, now_ms};

/// One schema change, in both dialects.
#[derive(Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sqlite: include_str!("../migrations/sqlite/0001_init.sql"),
        postgres: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "exec",
        sqlite: include_str!("../migrations/sqlite/0002_exec.sql"),
        postgres: include_str!("../migrations/postgres/0002_exec.sql"),
    },
    Migration {
        version: 3,
        name: "mcp",
        sqlite: include_str!("../migrations/sqlite/0003_mcp.sql"),
        postgres: include_str!("../migrations/postgres/0003_mcp.sql"),
    },
    Migration {
        version: 4,
        name: "mcp_oauth",
        sqlite: include_str!("../migrations/sqlite/0004_mcp_oauth.sql"),
        postgres: include_str!("../migrations/postgres/0004_mcp_oauth.sql"),
    },
    Migration {
        version: 5,
        name: "sessions",
        sqlite: include_str!("../migrations/sqlite/0005_sessions.sql"),
        postgres: include_str!("../migrations/postgres/0005_sessions.sql"),
    },
    Migration {
        version: 6,
        name: "session_settings",
        sqlite: include_str!("../migrations/sqlite/0006_session_settings.sql"),
        postgres: include_str!("../migrations/postgres/0006_session_settings.sql"),
    },
    Migration {
        version: 7,
        name: "session_owner",
        sqlite: include_str!("../migrations/sqlite/0007_session_owner.sql"),
        postgres: include_str!("../migrations/postgres/0007_session_owner.sql"),
    },
    Migration {
        version: 8,
        name: "runs",
        sqlite: include_str!("../migrations/sqlite/0008_runs.sql"),
        postgres: include_str!("../migrations/postgres/0008_runs.sql"),
    },
    Migration {
        version: 9,
        name: "run_delivery",
        sqlite: include_str!("../migrations/sqlite/0009_run_delivery.sql"),
        postgres: include_str!("../migrations/postgres/0009_run_delivery.sql"),
    },
    Migration {
        version: 10,
        name: "agent_links",
        sqlite: include_str!("../migrations/sqlite/0010_agent_links.sql"),
        postgres: include_str!("../migrations/postgres/0010_agent_links.sql"),
    },
    Migration {
        version: 11,
        name: "handoff_routes",
        sqlite: include_str!("../migrations/sqlite/0011_handoff_routes.sql"),
        postgres: include_str!("../migrations/postgres/0011_handoff_routes.sql"),
    },
    Migration {
        version: 12,
        name: "run_overrides",
        sqlite: include_str!("../migrations/sqlite/0012_run_overrides.sql"),
        postgres: include_str!("../migrations/postgres/0012_run_overrides.sql"),
    },
    Migration {
        version: 13,
        name: "teams",
        sqlite: include_str!("../migrations/sqlite/0013_teams.sql"),
        postgres: include_str!("../migrations/postgres/0013_teams.sql"),
    },
    Migration {
        version: 14,
        name: "memory_vectors",
        sqlite: include_str!("../migrations/sqlite/0014_memory_vectors.sql"),
        postgres: include_str!("../migrations/postgres/0014_memory_vectors.sql"),
    },
    Migration {
        version: 15,
        name: "skills",
        sqlite: include_str!("../migrations/sqlite/0015_skills.sql"),
        postgres: include_str!("../migrations/postgres/0015_skills.sql"),
    },
    Migration {
        version: 16,
        name: "knowledge_graph",
        sqlite: include_str!("../migrations/sqlite/0016_knowledge_graph.sql"),
        postgres: include_str!("../migrations/postgres/0016_knowledge_graph.sql"),
    },
    Migration {
        version: 17,
        name: "custom_tools",
        sqlite: include_str!("../migrations/sqlite/0017_custom_tools.sql"),
        postgres: include_str!("../migrations/postgres/0017_custom_tools.sql"),
    },
    Migration {
        version: 18,
        name: "cron",
        sqlite: include_str!("../migrations/sqlite/0018_cron.sql"),
        postgres: include_str!("../migrations/postgres/0018_cron.sql"),
    },
    Migration {
        version: 19,
        name: "cron_delivery",
        sqlite: include_str!("../migrations/sqlite/0019_cron_delivery.sql"),
        postgres: include_str!("../migrations/postgres/0019_cron_delivery.sql"),
    },
    Migration {
        version: 20,
        name: "cli_credential_destinations",
        sqlite: include_str!("../migrations/sqlite/0020_cli_credential_destinations.sql"),
        postgres: include_str!("../migrations/postgres/0020_cli_credential_destinations.sql"),
    },
    Migration {
        version: 21,
        name: "mcp_protocol_version",
        sqlite: include_str!("../migrations/sqlite/0021_mcp_protocol_version.sql"),
        postgres: include_str!("../migrations/postgres/0021_mcp_protocol_version.sql"),
    },
    Migration {
        version: 22,
        name: "turn_checkpoints",
        sqlite: include_str!("../migrations/sqlite/0022_turn_checkpoints.sql"),
        postgres: include_str!("../migrations/postgres/0022_turn_checkpoints.sql"),
    },
    Migration {
        version: 23,
        name: "migration_checksums",
        sqlite: include_str!("../migrations/sqlite/0023_migration_checksums.sql"),
        postgres: include_str!("../migrations/postgres/0023_migration_checksums.sql"),
    },
];

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

    /// This engine's SQL of `migration`.
    fn sql_of(&self, migration: &Migration) -> &'static str {
        match self.engine {
            Engine::Sqlite => migration.sqlite,
            Engine::Postgres => migration.postgres,
        }
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
            let Some(migration) = MIGRATIONS.iter().find(|m| m.version == version) else {
                continue;
            };
            let ours = checksum(self.sql_of(migration));
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
        for migration in MIGRATIONS {
            let sql = self.sql_of(migration);
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

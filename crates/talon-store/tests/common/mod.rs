//! The harness of the store suites: every test runs against SQLite, and against PostgreSQL
//! whenever `TALON_TEST_DATABASE_URL` is set, each PostgreSQL test in its own schema.
#![allow(dead_code, clippy::unwrap_used)]

use talon_store::{Store, StoreConfig};

pub struct Target {
    pub config: StoreConfig,
    _dir: Option<tempfile::TempDir>,
}

pub fn sqlite_target() -> Target {
    let dir = tempfile::tempdir().unwrap();
    Target {
        config: StoreConfig::sqlite_in(dir.path()),
        _dir: Some(dir),
    }
}

pub fn postgres_target() -> Option<Target> {
    let url = std::env::var("TALON_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())?;
    let schema = format!("t_{:016x}", rand_u64());
    let mut config = StoreConfig::url(url);
    config.schema = Some(schema);
    Some(Target { config, _dir: None })
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

pub async fn drop_schema(target: &Target) {
    if let Some(schema) = &target.config.schema {
        let mut config = target.config.clone();
        config.schema = None;
        let store = Store::connect(&config).await.unwrap();
        store
            .execute_admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .unwrap();
    }
}

#[macro_export]
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let target = $crate::common::sqlite_target();
                    super::$name(&target.config).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(target) = $crate::common::postgres_target() else {
                        eprintln!("TALON_TEST_DATABASE_URL is not set; PostgreSQL variant not run here");
                        return;
                    };
                    super::$name(&target.config).await;
                    $crate::common::drop_schema(&target).await;
                }
            )*
        }
    };
}

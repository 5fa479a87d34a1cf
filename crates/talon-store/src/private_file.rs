//! The SQLite database kept private to its owner.
//!
//! SQLite creates a database with mode 0644 (less the umask), so `talon.db` — every session,
//! every user's memory, the audit log, the encrypted secrets — was readable by every local
//! account whenever the data directory itself was (an existing directory is left as it is). The
//! file is therefore created with mode 0600 before SQLite opens it; SQLite gives its WAL,
//! shared-memory and journal files the database's own mode, and files left readable by an
//! older Talon are narrowed at every start. A directory others can enter is worth a warning:
//! Talon does not change the operator's directory.

use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::StoreError;

/// The files SQLite keeps beside a database.
const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Makes the database of the SQLite `url` private (see the module docs) before it is opened:
/// creates it with mode 0600 when the URL lets SQLite create it (`mode=rwc`), and takes group
/// and other permissions off the database and its companion files that exist. An in-memory
/// database has no file.
pub(crate) fn prepare(url: &str) -> Result<(), StoreError> {
    let Some(path) = database_path(url) else {
        return Ok(());
    };
    if creates(url) {
        create_private(&path)?;
    }
    for file in std::iter::once(path.clone()).chain(COMPANIONS.iter().map(|s| companion(&path, s)))
    {
        narrow(&file);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(meta) = std::fs::metadata(dir)
        && open_to_others(meta.permissions().mode())
    {
        tracing::warn!(
            dir = %dir.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "the directory holding the database is open to other users; the database is kept \
             at mode 0600, but make the directory private too: chmod 700 {}",
            dir.display()
        );
    }
    Ok(())
}

/// The database file of a SQLite URL, as SQLite will open it; `None` for an in-memory one.
fn database_path(url: &str) -> Option<PathBuf> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    let path = options.get_filename();
    let name = path.to_string_lossy();
    let in_memory = name.is_empty()
        || name.starts_with("file:")
        || name == ":memory:"
        || query(url).any(|(k, v)| k == "mode" && v == "memory");
    (!in_memory).then(|| path.to_path_buf())
}

/// The URL's query parameters.
fn query(url: &str) -> impl Iterator<Item = (&str, &str)> {
    url.split_once('?')
        .map_or("", |(_, q)| q)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
}

/// Whether SQLite may create the database (`mode=rwc`).
fn creates(url: &str) -> bool {
    query(url).any(|(k, v)| k == "mode" && v == "rwc")
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Creates `path` empty with mode 0600 unless it exists (SQLite then initialises it).
fn create_private(path: &Path) -> Result<(), StoreError> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Takes group and other permissions off `path` if it exists; a failure is logged (the file
/// may belong to someone else), not fatal.
fn narrow(path: &Path) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode();
    if !open_to_others(mode) {
        return;
    }
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700)) {
        tracing::warn!(
            path = %path.display(),
            error = %e,
            "the database file is readable by other users and its mode could not be narrowed; \
             chmod 600 it"
        );
    }
}

/// Whether a mode gives group or others any access.
fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreConfig};

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn h22_17_the_database_and_its_wal_are_private_in_an_open_directory() {
        let dir = tempfile::tempdir().unwrap();
        // An existing data directory others can read, as a package or an operator makes it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
            .await
            .unwrap();
        // Migrations wrote through the open pool, so the WAL and shared memory exist.
        let db = dir.path().join("talon.db");
        for file in [db.clone(), companion(&db, "-wal"), companion(&db, "-shm")] {
            assert!(file.exists(), "{}", file.display());
            assert_eq!(format!("{:o}", mode(&file)), "600", "{}", file.display());
        }
        store.close().await;
    }

    #[tokio::test]
    async fn h22_17_files_left_readable_are_narrowed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig::sqlite_in(dir.path());
        Store::open(&config).await.unwrap().close().await;
        // As an older Talon left them.
        let db = dir.path().join("talon.db");
        let files = [db.clone(), companion(&db, "-wal"), companion(&db, "-shm")];
        for file in &files {
            if !file.exists() {
                std::fs::write(file, b"").unwrap();
            }
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let store = Store::open(&config).await.unwrap();
        for file in &files {
            assert_eq!(format!("{:o}", mode(file)), "600", "{}", file.display());
        }
        store.close().await;
    }

    #[test]
    fn only_files_on_disk_and_only_creatable_ones_are_created() {
        assert_eq!(database_path("sqlite::memory:"), None);
        assert_eq!(database_path("sqlite://?mode=memory"), None);
        assert_eq!(
            database_path("sqlite:///tmp/x/talon.db?mode=rwc"),
            Some(PathBuf::from("/tmp/x/talon.db"))
        );
        assert!(creates("sqlite:///a.db?mode=rwc"));
        assert!(!creates("sqlite:///a.db"));
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("no.db");
        prepare(&format!("sqlite://{}", db.display())).unwrap();
        assert!(
            !db.exists(),
            "without mode=rwc SQLite reports the missing file"
        );
        assert!(open_to_others(0o755) && open_to_others(0o701) && !open_to_others(0o700));
    }
}

//! Where the configuration may come from.
//!
//! Why: `talon.toml` runs commands on the host, outside the sandbox (`[[hooks.…]]`,
//! `[mcp_servers.x] command`) and can switch the sandbox off. A configuration file an agent can
//! write is therefore host code execution one run later. So the file is never picked up from the
//! current directory (an agent's workspace), and Talon refuses to start when the file in use lies
//! where its tools can write: a workspace (the shared one, or the root of the per-agent ones), a
//! writable root of the sandbox (`[exec] writable_roots`) or of the file tools
//! (`[fs] write_roots`); or when other users may write it. The runtime also denies the file to the
//! file tools and hides it from sandboxed commands, like the data directory.
//!
//! The data directory is held to the same rule ([`check_data_dir`]): its store lists MCP
//! servers that Talon starts as host commands.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A place the agents' tools can write, with what to call it in an error.
pub struct Writable {
    pub what: &'static str,
    pub path: PathBuf,
}

impl Writable {
    /// What else a person can do about something found inside this place, for an error.
    fn alternative(&self) -> &'static str {
        if self.what == "the workspace" {
            ", or pass --workspace DIR"
        } else {
            ""
        }
    }
}

/// `path` made absolute (against the current directory) with its longest existing head
/// canonicalised, so a path that does not exist yet (a data directory created on first start)
/// or is relative (`--data-dir ./data`) is still compared where it will really be.
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    };
    let mut head = absolute.clone();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&head) {
            return tail.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                head = parent.to_path_buf();
            }
            _ => return absolute,
        }
    }
}

/// The writable place `path` lies in, if any (both resolved as they are or will be).
pub fn inside<'a>(path: &Path, writable: &'a [Writable]) -> Option<&'a Writable> {
    let file = resolved(path);
    writable
        .iter()
        .find(|place| file.starts_with(resolved(&place.path)))
}

/// Why Talon does not start with this configuration file or data directory: where it lies, or
/// who may write it. Nothing is wrong with Talon; the operator moves the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error(
        "the data directory {} lies inside {what} {}, where the agents' tools can write; it \
         holds Talon's store (MCP servers it runs as commands on this host) and its \
         encryption key, so Talon does not start with it: choose one outside with \
         --data-dir or $TALON_DATA_DIR{hint}",
        data_dir.display(),
        place.display()
    )]
    DataDirInside {
        data_dir: PathBuf,
        what: &'static str,
        place: PathBuf,
        hint: &'static str,
    },
    #[error(
        "the configuration file {} lies inside {what} {}, where the agents' tools can write it; \
         configuration runs commands on this host (hooks, MCP servers), so Talon does not \
         start with it: move it out (for example to ~/.config/talon/talon.toml) and name \
         it with --config or $TALON_CONFIG{hint}",
        file.display(),
        place.display()
    )]
    ConfigInside {
        file: PathBuf,
        what: &'static str,
        place: PathBuf,
        hint: &'static str,
    },
    #[error(
        "the configuration file {} is writable by every user (chmod o-w it): \
         configuration runs commands on this host",
        .0.display()
    )]
    ConfigWritableByAll(PathBuf),
    #[error(
        "the configuration file {} is in a directory every user can write ({}): \
         move it to a directory of your own",
        file.display(),
        dir.display()
    )]
    ConfigDirWritableByAll { file: PathBuf, dir: PathBuf },
}

/// Refuses a data directory an agent could write, or replace by renaming a parent: it holds
/// the store, whose stdio MCP servers are commands this host runs, and the encryption key.
/// The jail denies it to the file tools and the sandbox hides it, but a command that renames a
/// directory above it and plants a fresh `talon.db` where it was would be host code at the
/// next start.
pub fn check_data_dir(data_dir: &Path, writable: &[Writable]) -> Result<(), LocationError> {
    match inside(data_dir, writable) {
        None => Ok(()),
        Some(place) => Err(LocationError::DataDirInside {
            data_dir: resolved(data_dir),
            what: place.what,
            place: resolved(&place.path),
            hint: place.alternative(),
        }),
    }
}

/// Refuses a configuration file that an agent (or another user) could write.
pub fn check(source: &Path, writable: &[Writable]) -> Result<(), LocationError> {
    let file = resolved(source);
    if let Some(place) = inside(&file, writable) {
        return Err(LocationError::ConfigInside {
            place: resolved(&place.path),
            file,
            what: place.what,
            hint: place.alternative(),
        });
    }
    let others_may_write = |path: &Path, sticky_ok: bool| {
        std::fs::metadata(path).is_ok_and(|m| {
            let mode = m.permissions().mode();
            mode & 0o002 != 0 && !(sticky_ok && mode & 0o1000 != 0)
        })
    };
    if others_may_write(&file, false) {
        return Err(LocationError::ConfigWritableByAll(file));
    }
    if let Some(dir) = file.parent()
        && others_may_write(dir, true)
    {
        return Err(LocationError::ConfigDirWritableByAll {
            dir: dir.to_path_buf(),
            file,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defence in depth behind the start-up refusal: wherever the active configuration file is,
    /// the file tools' jail denies it (as it denies the data directory).
    #[test]
    fn h21_02_file_tools_cannot_write_the_active_config() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("etc")).unwrap();
        let file = std::fs::canonicalize(&ws).unwrap().join("etc/talon.toml");
        std::fs::write(&file, "").unwrap();
        let config = crate::config::Config {
            source: Some(file.clone()),
            ..Default::default()
        };
        let fs = config.builtin(&dir.path().join("data")).fs;
        let mut ctx = talon_core::CallContext::new("s");
        ctx.workspace = Some(ws.clone());
        let jail = fs.files(&ctx).disk().unwrap();
        for path in ["etc/talon.toml", &file.display().to_string()] {
            let located = jail.locate(path).unwrap();
            assert!(jail.is_denied(located.rel()), "{path} is writable");
        }
        let other = jail.locate("etc/other.toml").unwrap();
        assert!(!jail.is_denied(other.rel()));
    }

    /// The open risk of issue 21's item 2: a data directory inside the workspace (given as it
    /// is, relative, or not created yet) is refused; one beside it, or the per-agent
    /// workspaces inside the data directory, are not.
    #[test]
    fn h22_data_dir_inside_a_writable_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("data")).unwrap();
        let places = [Writable {
            what: "the workspace",
            path: ws.clone(),
        }];
        for data in [
            ws.join("data"),
            ws.join("not/yet/there"),
            ws.clone(),
            ws.join("data/../other"),
        ] {
            let err = check_data_dir(&data, &places).unwrap_err().to_string();
            assert!(
                err.contains("data directory") && err.contains("inside the workspace"),
                "{err}"
            );
        }
        let relative = std::env::current_dir().unwrap().join("talon-data-here");
        let cwd = [Writable {
            what: "the workspace",
            path: std::env::current_dir().unwrap(),
        }];
        assert!(check_data_dir(Path::new("talon-data-here"), &cwd).is_err());
        assert!(!relative.exists());
        check_data_dir(&dir.path().join("data"), &places).unwrap();
        let per_agent = [Writable {
            what: "the workspace",
            path: dir.path().join("data/workspaces"),
        }];
        check_data_dir(&dir.path().join("data"), &per_agent).unwrap();
    }

    #[test]
    fn h21_02_config_inside_a_writable_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let inside = ws.join("sub/talon.toml");
        let outside = dir.path().join("talon.toml");
        for f in [&inside, &outside] {
            std::fs::write(f, "").unwrap();
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let places = [Writable {
            what: "the workspace",
            path: ws.clone(),
        }];
        let err = check(&inside, &places).unwrap_err().to_string();
        assert!(err.contains("inside the workspace"), "{err}");
        check(&outside, &places).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = check(&outside, &places).unwrap_err().to_string();
        assert!(err.contains("writable by every user"), "{err}");
    }
}

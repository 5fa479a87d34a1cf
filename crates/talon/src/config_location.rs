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

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A place the agents' tools can write, with what to call it in an error.
pub struct Writable {
    pub what: &'static str,
    pub path: PathBuf,
}

/// The writable place `path` lies in, if any (both canonicalised where they exist).
pub fn inside<'a>(path: &Path, writable: &'a [Writable]) -> Option<&'a Writable> {
    let file = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    writable.iter().find(|place| {
        let root = std::fs::canonicalize(&place.path).unwrap_or_else(|_| place.path.clone());
        file.starts_with(&root)
    })
}

/// Refuses a configuration file that an agent (or another user) could write.
pub fn check(source: &Path, writable: &[Writable]) -> Result<(), String> {
    let file = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    if let Some(place) = inside(&file, writable) {
        let root = std::fs::canonicalize(&place.path).unwrap_or_else(|_| place.path.clone());
        return Err(format!(
            "the configuration file {} lies inside {} {}, where the agents' tools can write it; \
             configuration runs commands on this host (hooks, MCP servers), so Talon does not \
             start with it: move it out (for example to ~/.config/talon/talon.toml) and name \
             it with --config or $TALON_CONFIG{}",
            file.display(),
            place.what,
            root.display(),
            if place.what == "the workspace" {
                ", or pass --workspace DIR"
            } else {
                ""
            },
        ));
    }
    let others_may_write = |path: &Path, sticky_ok: bool| {
        std::fs::metadata(path).is_ok_and(|m| {
            let mode = m.permissions().mode();
            mode & 0o002 != 0 && !(sticky_ok && mode & 0o1000 != 0)
        })
    };
    if others_may_write(&file, false) {
        return Err(format!(
            "the configuration file {} is writable by every user (chmod o-w it): \
             configuration runs commands on this host",
            file.display()
        ));
    }
    if let Some(dir) = file.parent()
        && others_may_write(dir, true)
    {
        return Err(format!(
            "the configuration file {} is in a directory every user can write ({}): \
             move it to a directory of your own",
            file.display(),
            dir.display()
        ));
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
        let err = check(&inside, &places).unwrap_err();
        assert!(err.contains("inside the workspace"), "{err}");
        check(&outside, &places).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = check(&outside, &places).unwrap_err();
        assert!(err.contains("writable by every user"), "{err}");
    }
}

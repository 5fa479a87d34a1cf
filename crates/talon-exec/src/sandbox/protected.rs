//! Paths inside writable roots that stay read-only: files other programs later run or load with
//! the user's full rights (the git repository, shell start-up files, MCP and editor
//! configuration, agent settings). A command that could write them would escape the sandbox
//! the next time the user runs git, opens a shell or starts an agent.
//!
//! The list and its expansion into mounts are `talon_fs::protected`'s, the same the file tools'
//! jail refuses to write, so `exec` and `write_file` keep to one rule. What is here is the
//! sandbox's part: removing, after a command, what it created under a protected name that was
//! missing — fd-relative, beneath the root, never following a symlink the command planted.

use std::path::{Path, PathBuf};

pub use talon_fs::protected::{PROTECTED, Protection};
use talon_fs::{Removal, remove_beneath};

/// The protections for every protected path under `root`, parents first (repository
/// directories are anchored before what inside them is bound read-only).
pub fn protected_paths(root: &Path) -> Vec<Protection> {
    talon_fs::protected::protections(root)
}

/// The writable root `path` lies in (the longest that holds it) and the path relative to it.
fn beneath<'a>(roots: &'a [PathBuf], path: &'a Path) -> Option<(&'a Path, &'a Path)> {
    roots
        .iter()
        .filter_map(|root| {
            path.strip_prefix(root)
                .ok()
                .map(|rel| (root.as_path(), rel))
        })
        .max_by_key(|(root, _)| root.as_os_str().len())
}

/// Removes each of `names` (missing protected names when a sandbox was set up, inside
/// `roots`) that exists now, because a sandboxed command created it; returns what it removed.
/// Every removal is relative to a descriptor of its root and follows no symlink: a command that
/// replaced a parent with a link to a host directory gets the link ignored, not the directory
/// emptied.
pub fn remove_created(roots: &[PathBuf], names: &[PathBuf]) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for path in names {
        let Some((root, rel)) = beneath(roots, path) else {
            tracing::error!(path = %path.display(), "a protected name outside every writable root");
            continue;
        };
        match remove_beneath(root, rel, Removal::Anything) {
            Ok(true) => removed.push(path.clone()),
            Ok(false) => {}
            Err(e) => tracing::error!(
                path = %path.display(),
                error = %e,
                "cannot remove a protected path a sandboxed command created"
            ),
        }
    }
    removed
}

/// Removes the placeholder pinning `path` (inside `roots`) if it is still an empty regular
/// file, fd-relative like [`remove_created`].
pub fn remove_pin(roots: &[PathBuf], path: &Path) {
    if let Some((root, rel)) = beneath(roots, path) {
        let _ = remove_beneath(root, rel, Removal::EmptyFile);
    }
}

/// Creates the harmless placeholder for the missing protected `path` in `root`
/// ([`talon_fs::protected::neutral_placeholder`]), fd-relative; the bytes it holds, or `None`
/// if there is no such placeholder or the name exists now.
pub fn seed(root: &Path, path: &Path) -> Option<&'static [u8]> {
    let content = talon_fs::protected::neutral_placeholder(path)?;
    let rel = path.strip_prefix(root).ok()?;
    match talon_fs::seed_beneath(root, rel, content) {
        Ok(true) => Some(content),
        Ok(false) => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot create a placeholder");
            None
        }
    }
}

/// Removes a placeholder [`seed`] made if it still holds `content`, fd-relative.
pub fn remove_seed(roots: &[PathBuf], path: &Path, content: &'static [u8]) {
    if let Some((root, rel)) = beneath(roots, path) {
        let _ = remove_beneath(root, rel, Removal::FileWith(content));
    }
}

/// What the model is told, after a command's output, about a protected name it created and
/// Talon removed.
pub fn removal_note(path: &Path) -> String {
    format!(
        "\ntalon: removed {}: sandboxed commands may not create it (it configures tools, \
         shells or agents outside the sandbox)\n",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn the_list_is_talon_fs_list() {
        assert_eq!(PROTECTED, talon_fs::protected::PROTECTED);
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(
            protected_paths(dir.path()),
            talon_fs::protected::protections(dir.path())
        );
    }

    /// A background command keeps its pins for its lifetime; a missing `commondir` is pinned
    /// with `.`, which git on the host reads as "this repository", not with an empty file
    /// that would make every git command fail meanwhile.
    #[test]
    fn h21_03_a_missing_commondir_is_pinned_harmlessly() {
        use crate::sandbox::{Bubblewrap, Policy, Sandbox};
        let dir = tempfile::tempdir().expect("dir");
        let ws = std::fs::canonicalize(dir.path()).expect("canonical");
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(&ws)
                .output()
                .expect("git runs")
        };
        assert!(git(&["init", "-q"]).status.success());
        let policy = Policy {
            writable_roots: vec![ws.clone()],
            skip_pins: false,
            ..Policy::default()
        };
        let bwrap = Bubblewrap::probe().expect("bubblewrap works here");
        let wrapped = bwrap
            .wrap(&policy, &ws, &["/bin/true".into()])
            .expect("wraps");
        let commondir = ws.join(".git/commondir");
        assert_eq!(std::fs::read(&commondir).expect("pinned"), b".\n");
        let shown = commondir.display().to_string();
        let args: Vec<String> = wrapped
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.windows(3).any(|w| w == ["--ro-bind", &shown, &shown]),
            "{args:?}"
        );
        let status = git(&["status", "--short"]);
        assert!(status.status.success(), "{status:?}");
        wrapped.placeholders.remove();
        assert!(!commondir.exists());
    }

    #[test]
    fn h21_05_removal_never_follows_a_planted_symlink() {
        let dir = tempfile::tempdir().expect("dir");
        let (ws, host) = (dir.path().join("ws"), dir.path().join("host"));
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::create_dir_all(host.join("hooks")).expect("host");
        std::fs::write(host.join("config"), "host config").expect("config");
        std::fs::write(host.join("hooks/keep"), "x").expect("hook");
        // A worktree-style workspace whose `.git` file the command replaced with a link.
        symlink(&host, ws.join(".git")).expect("link");
        let roots = vec![ws.clone()];
        let names = vec![ws.join(".git/config"), ws.join(".git/hooks")];
        assert!(remove_created(&roots, &names).is_empty());
        assert_eq!(
            std::fs::read_to_string(host.join("config")).expect("kept"),
            "host config"
        );
        assert!(host.join("hooks/keep").exists());
        // A link planted where a protected name was missing is removed as a link.
        symlink(&host, ws.join(".claude")).expect("link");
        let removed = remove_created(&roots, &[ws.join(".claude")]);
        assert_eq!(removed, vec![ws.join(".claude")]);
        assert!(host.join("hooks/keep").exists());
        // A placeholder that is no longer empty is left alone.
        std::fs::write(ws.join(".mcp.json"), "{}").expect("file");
        remove_pin(&roots, &ws.join(".mcp.json"));
        assert!(ws.join(".mcp.json").exists());
    }
}

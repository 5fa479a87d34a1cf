//! Paths inside writable roots that stay read-only: files other programs later run or load with
//! the user's full rights (git hooks, shell start-up files, MCP and editor configuration, agent
//! settings). A command that could write them would escape the sandbox the next time the user
//! runs git, opens a shell or starts an agent.

use std::path::{Path, PathBuf};

/// Relative to every writable root (Anthropic's sandbox-runtime list, plus Talon's own state and
/// the other agents' configuration directories).
pub const PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".gitconfig",
    ".gitmodules",
    ".talon",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".profile",
    ".ripgreprc",
    ".mcp.json",
    ".vscode",
    ".idea",
    ".claude",
    ".cursor",
    ".codex",
    ".gemini",
];

/// How to protect one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protection {
    /// It exists: bind it read-only over itself.
    ReadOnly(PathBuf),
    /// It does not exist: pin its first missing component with an empty read-only file, so
    /// the command cannot create it (nor, for `.git/hooks` in a workspace without `.git`, the
    /// directories above it).
    Pin(PathBuf),
}

/// The protections for every [`PROTECTED`] path under `root`.
pub fn protected_paths(root: &Path) -> Vec<Protection> {
    let mut out: Vec<Protection> = Vec::new();
    for rel in PROTECTED {
        let mut path = root.to_path_buf();
        let mut protection = None;
        for component in Path::new(rel).components() {
            path.push(component);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    // Whatever the link points at becomes read-only where it is reached.
                    protection = Some(Protection::ReadOnly(path.clone()));
                    break;
                }
                Ok(_) => {}
                Err(_) => {
                    protection = Some(Protection::Pin(path.clone()));
                    break;
                }
            }
        }
        let protection = protection.unwrap_or(Protection::ReadOnly(path));
        if !out.contains(&protection) {
            out.push(protection);
        }
    }
    out
}

/// Removes each of `names` (missing protected names when a sandbox was set up) that exists
/// now, because a sandboxed command created it, without following symlinks; returns what it
/// removed.
pub fn remove_created(names: &[PathBuf]) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for path in names {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let gone = if meta.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        match gone {
            Ok(()) => removed.push(path.clone()),
            Err(e) => tracing::error!(
                path = %path.display(),
                error = %e,
                "cannot remove a protected path a sandboxed command created"
            ),
        }
    }
    removed
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
    use super::*;

    #[test]
    fn existing_paths_are_read_only_and_missing_ones_pinned() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/hooks")).expect("git");
        std::fs::write(root.join(".bashrc"), "x").expect("rc");
        let got = protected_paths(root);
        assert!(got.contains(&Protection::ReadOnly(root.join(".git/hooks"))));
        assert!(got.contains(&Protection::Pin(root.join(".git/config"))));
        assert!(got.contains(&Protection::ReadOnly(root.join(".bashrc"))));
        assert!(got.contains(&Protection::Pin(root.join(".mcp.json"))));
        let empty = tempfile::tempdir().expect("dir");
        let got = protected_paths(empty.path());
        // Both .git entries pin the same missing `.git`; it is listed once.
        let git: Vec<_> = got
            .iter()
            .filter(|p| **p == Protection::Pin(empty.path().join(".git")))
            .collect();
        assert_eq!(git.len(), 1);
    }
}

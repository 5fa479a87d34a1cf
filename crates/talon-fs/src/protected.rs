//! The protected paths: files and directories inside a writable root that other programs later
//! load or run with the user's full rights — the git repository, shell start-up files, MCP,
//! editor and agent settings, Talon's own state. Whoever can write one escapes every sandbox the
//! next time the user runs git, opens a shell or starts an agent, so neither a file tool nor a
//! sandboxed command may change them.
//!
//! This is the one list. The jail refuses every write beneath it ([`crate::Jail`], checked on the
//! path the kernel resolved, so a symlink to a protected path is refused too), and the command
//! sandbox (talon-exec) mounts what [`protections`] lists read-only.
//!
//! The repository is protected as a unit, because git trusts more than `.git/config` and
//! `.git/hooks`: `commondir` redirects it to another repository's configuration,
//! `config.worktree` is configuration too, every submodule's and linked worktree's directory
//! under `.git/modules` and `.git/worktrees` is a repository of its own, and a `.git` *file*
//! (a linked worktree or a submodule) says where the repository is. A copy of `.git` under the
//! old name would carry none of the protections, so `.git` itself must not be renamed, removed
//! or replaced: the sandbox binds each repository directory over itself, which makes it a mount
//! point the kernel refuses to rename or remove, and the jail refuses any write to a path with
//! a `.git` component at all.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The repository's name; protected at any depth by the jail (nested repositories too).
pub const GIT: &str = ".git";

/// Names protected directly in every writable root (Anthropic's sandbox-runtime list, plus
/// Talon's own state and the other agents' configuration directories).
pub const PROTECTED: &[&str] = &[
    GIT,
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

/// Inside a repository directory (`.git`, `.git/modules/NAME`): what decides which programs git
/// runs and which configuration it reads. `info/attributes` is not here: attributes only pick
/// drivers, and drivers are defined in the configuration.
pub const GIT_CONTROL: &[&str] = &["config", "config.worktree", "hooks", "commondir"];

/// Inside a linked worktree's directory (`.git/worktrees/NAME`).
pub const WORKTREE_CONTROL: &[&str] = &["config.worktree", "commondir"];

/// Control names git cannot tolerate as an empty file (an empty `commondir` makes every git
/// command fail), so they are never pinned with an empty placeholder: see
/// [`Protection::Absent`] and [`neutral_placeholder`].
const NEVER_PIN: &[&str] = &["commondir"];

/// What a placeholder for the missing protected `path` (a [`Protection::Absent`]) can hold so
/// that git on the host keeps working while it is there: `commondir` reading `.` names the
/// repository it is in, as if it were absent. `None`: nothing harmless exists (a submodule's
/// `.git`), and the name can only be removed after the command.
pub fn neutral_placeholder(path: &Path) -> Option<&'static [u8]> {
    (path.file_name()? == OsStr::new("commondir")).then_some(b".\n".as_slice())
}

/// Repository directories looked at below one root, at most (submodules nest).
const MAX_REPOSITORIES: usize = 64;

/// Why `rel`, a path relative to a writable root (after symlinks), may not be written: the
/// reason, for the model, or `None` when writing it is fine. Names are compared without regard
/// to ASCII case, since the filesystem may not regard it either (`.GIT/config` is `.git/config`
/// on a case-insensitive filesystem).
pub fn refusal(rel: &Path) -> Option<&'static str> {
    let mut names = rel.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name),
        _ => None,
    });
    let first = names.next()?;
    if is(first, GIT) || names.any(|name| is(name, GIT)) {
        return Some(why(GIT));
    }
    PROTECTED
        .iter()
        .find(|name| is(first, name))
        .map(|name| why(name))
}

fn is(name: &OsStr, protected: &str) -> bool {
    name.as_bytes().eq_ignore_ascii_case(protected.as_bytes())
}

/// The reason a protected name is protected.
fn why(name: &str) -> &'static str {
    match name {
        GIT => {
            "git runs the hooks and the programs named in a repository's configuration (core.fsmonitor, \
             core.hooksPath, aliases) with the user's full rights, so the repository is protected as a whole"
        }
        ".gitconfig" | ".gitmodules" => "git reads configuration from it",
        ".talon" => "it holds Talon's own state",
        ".ripgreprc" => "ripgrep reads its options from it, and an option can run programs",
        ".mcp.json" | ".vscode" | ".idea" | ".claude" | ".cursor" | ".codex" | ".gemini" => {
            "editors and agents load it and run the commands it names with the user's full rights"
        }
        _ => "shells run it at start-up with the user's full rights",
    }
}

/// How the sandbox protects one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protection {
    /// A repository directory: bind it over itself, read-write, so it is a mount point that
    /// cannot be renamed, removed or replaced (git still writes its objects, index and refs).
    /// Listed before the paths inside it, which later mounts make read-only.
    Anchor(PathBuf),
    /// It exists: bind it read-only over itself.
    ReadOnly(PathBuf),
    /// It does not exist: pin it with an empty read-only file, so the command cannot create it
    /// (nor, for `.git` in a workspace without one, anything below it), or remove whatever the
    /// command created there once it has ended.
    Pin(PathBuf),
    /// It does not exist, and an empty placeholder would break git for the user meanwhile
    /// (`commondir`, a submodule's `.git`): pinned, where pins are wanted, only with a
    /// placeholder that reads as harmless ([`neutral_placeholder`]); otherwise whatever the
    /// command created there is removed once it has ended.
    Absent(PathBuf),
}

impl Protection {
    /// The protected path.
    pub fn path(&self) -> &Path {
        match self {
            Self::Anchor(p) | Self::ReadOnly(p) | Self::Pin(p) | Self::Absent(p) => p,
        }
    }
}

/// What exists at `path`, without following a symlink.
enum Kind {
    Missing,
    Dir,
    /// A file, symlink or anything else that exists.
    Other,
    /// Cannot be there (a parent is not a directory) or cannot be looked at.
    Unreachable,
}

fn kind(path: &Path) -> Kind {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_dir() => Kind::Dir,
        Ok(_) => Kind::Other,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kind::Missing,
        Err(_) => Kind::Unreachable,
    }
}

/// The protections for every protected path under `root`, parents before what lies inside
/// them. Existing paths are bound read-only (a symlink becomes read-only where it points),
/// repository directories anchored, and missing names pinned or kept absent.
pub fn protections(root: &Path) -> Vec<Protection> {
    let mut plan = Plan {
        root,
        out: Vec::new(),
        repositories: 0,
    };
    for name in PROTECTED {
        let path = root.join(name);
        if *name == GIT {
            plan.git_entry(&path, false);
            continue;
        }
        match kind(&path) {
            Kind::Missing => plan.push(Protection::Pin(path)),
            Kind::Dir | Kind::Other => plan.push(Protection::ReadOnly(path)),
            Kind::Unreachable => {}
        }
    }
    // Submodules checked out in the root: git status in the root looks into each, so their
    // `.git` (usually a file naming `.git/modules/NAME`) is protected like the root's.
    for sub in submodule_paths(root) {
        let dir = root.join(sub);
        if matches!(kind(&dir), Kind::Dir) {
            plan.git_entry(&dir.join(GIT), true);
        }
    }
    plan.out
}

struct Plan<'a> {
    root: &'a Path,
    out: Vec<Protection>,
    repositories: usize,
}

impl Plan<'_> {
    fn push(&mut self, protection: Protection) {
        if !self.out.contains(&protection) {
            self.out.push(protection);
        }
    }

    /// A `.git` entry: a repository directory, a file pointing at one, or missing.
    fn git_entry(&mut self, path: &Path, never_pin: bool) {
        match kind(path) {
            Kind::Missing if never_pin => self.push(Protection::Absent(path.to_path_buf())),
            Kind::Missing => self.push(Protection::Pin(path.to_path_buf())),
            Kind::Dir => self.repository(path, GIT_CONTROL),
            Kind::Other => {
                self.push(Protection::ReadOnly(path.to_path_buf()));
                // A linked worktree or submodule whose repository lies in this root too.
                if let Some(target) = gitdir_target(path)
                    && target.starts_with(self.root)
                {
                    self.repository(&target, GIT_CONTROL);
                }
            }
            Kind::Unreachable => {}
        }
    }

    fn repository(&mut self, dir: &Path, control: &[&str]) {
        if self.repositories >= MAX_REPOSITORIES {
            return;
        }
        self.repositories += 1;
        self.push(Protection::Anchor(dir.to_path_buf()));
        for name in control {
            let path = dir.join(name);
            match kind(&path) {
                Kind::Dir | Kind::Other => self.push(Protection::ReadOnly(path)),
                Kind::Missing if NEVER_PIN.contains(name) => self.push(Protection::Absent(path)),
                Kind::Missing => self.push(Protection::Pin(path)),
                Kind::Unreachable => {}
            }
        }
        for (nested, control) in [("modules", GIT_CONTROL), ("worktrees", WORKTREE_CONTROL)] {
            for sub in subdirectories(&dir.join(nested)) {
                if nested == "modules" && !sub.join("HEAD").exists() {
                    // A submodule name with a slash: modules/a/b is the repository.
                    for deeper in subdirectories(&sub) {
                        self.repository(&deeper, control);
                    }
                    continue;
                }
                self.repository(&sub, control);
            }
        }
    }
}

/// The directories (not symlinks) directly in `dir`, sorted.
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Where a `.git` file (`gitdir: PATH`) points, canonical; `None` if it does not say.
fn gitdir_target(file: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    if !meta.file_type().is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    let target = file.parent()?.join(target);
    std::fs::canonicalize(target).ok()
}

/// The `path = …` values of `root/.gitmodules` that stay inside the root.
fn submodule_paths(root: &Path) -> Vec<PathBuf> {
    let file = root.join(".gitmodules");
    let Ok(meta) = std::fs::symlink_metadata(&file) else {
        return Vec::new();
    };
    if !meta.file_type().is_file() || meta.len() > 1 << 20 {
        return Vec::new();
    }
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("path") {
            continue;
        }
        let value = value.trim().trim_matches('"');
        let path = Path::new(value);
        let inside = !value.is_empty()
            && path
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if inside && !out.iter().any(|p: &PathBuf| p == path) {
            out.push(path.to_path_buf());
        }
        if out.len() >= MAX_REPOSITORIES {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_covers_the_list_the_repository_at_any_depth_and_any_case() {
        for refused in [
            ".git",
            ".git/config",
            ".git/hooks/pre-commit",
            ".GIT/Config",
            "sub/.git/config",
            "a/b/.Git",
            ".mcp.json",
            ".claude/settings.json",
            ".Bashrc",
            "./.vscode/tasks.json",
        ] {
            assert!(refusal(Path::new(refused)).is_some(), "{refused}");
        }
        for allowed in [
            "src/main.rs",
            ".gitignore",
            ".github/workflows/ci.yml",
            ".talon-tasks/x.output",
            "sub/.bashrc",
            "sub/.mcp.json",
            "",
        ] {
            assert_eq!(refusal(Path::new(allowed)), None, "{allowed}");
        }
    }

    #[test]
    fn existing_paths_are_read_only_repositories_anchored_and_missing_ones_pinned() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/hooks")).expect("git");
        std::fs::create_dir_all(root.join(".git/modules/lib/hooks")).expect("module");
        std::fs::write(root.join(".git/modules/lib/HEAD"), "ref: x\n").expect("head");
        std::fs::write(root.join(".bashrc"), "x").expect("rc");
        let got = protections(root);
        let at = |p: &Protection| got.iter().position(|g| g == p).expect("listed");
        let anchor = at(&Protection::Anchor(root.join(".git")));
        assert!(anchor < at(&Protection::ReadOnly(root.join(".git/hooks"))));
        assert!(got.contains(&Protection::Pin(root.join(".git/config"))));
        assert!(got.contains(&Protection::Absent(root.join(".git/commondir"))));
        let module = root.join(".git/modules/lib");
        assert!(
            at(&Protection::Anchor(module.clone()))
                < at(&Protection::ReadOnly(module.join("hooks")))
        );
        assert!(got.contains(&Protection::Absent(module.join("commondir"))));
        assert!(got.contains(&Protection::ReadOnly(root.join(".bashrc"))));
        assert!(got.contains(&Protection::Pin(root.join(".mcp.json"))));
        let empty = tempfile::tempdir().expect("dir");
        let got = protections(empty.path());
        assert!(got.contains(&Protection::Pin(empty.path().join(".git"))));
        let git = empty.path().join(".git");
        assert!(
            !got.iter()
                .any(|p| p.path().starts_with(&git) && p.path() != git)
        );
    }

    #[test]
    fn a_git_file_and_checked_out_submodules_are_protected() {
        let dir = tempfile::tempdir().expect("dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::write(root.join(".git"), "gitdir: /elsewhere/.git/worktrees/x\n").expect("file");
        std::fs::write(
            root.join(".gitmodules"),
            "[submodule \"lib\"]\n\tpath = lib\n\turl = x\n[submodule \"up\"]\n\tpath = ../up\n",
        )
        .expect("modules");
        std::fs::create_dir(root.join("lib")).expect("lib");
        let got = protections(&root);
        assert!(got.contains(&Protection::ReadOnly(root.join(".git"))));
        assert!(got.contains(&Protection::Absent(root.join("lib/.git"))));
        std::fs::write(root.join("lib/.git"), "gitdir: ../.git/modules/lib\n").expect("file");
        assert!(protections(&root).contains(&Protection::ReadOnly(root.join("lib/.git"))));
    }
}

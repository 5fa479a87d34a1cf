//! Security regressions of the jail (issue 21): `h21_NN_…`, NN being the item of the review.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use talon_fs::{FsError, Jail, Resolver, WriteMode};

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    (dir, ws)
}

fn jails(ws: &Path) -> [Jail; 2] {
    let none: &[&str] = &[];
    [
        Jail::with_resolver(ws, none, Resolver::Openat2).unwrap(),
        Jail::with_resolver(ws, none, Resolver::Walk).unwrap(),
    ]
}

fn write(jail: &Jail, path: &str, mode: WriteMode) -> Result<(), FsError> {
    let located = jail.locate(path)?;
    jail.write(&located, b"evil\n", mode).map(|_| ())
}

fn assert_protected(result: Result<(), FsError>, what: &str) {
    match result {
        Err(e @ FsError::Protected { .. }) => {
            let text = e.to_string();
            assert!(text.contains("is protected:"), "{what}: {text}");
            assert!(text.contains("ask the user"), "{what}: {text}");
        }
        other => panic!("{what}: expected a protected-path refusal, got {other:?}"),
    }
}

#[test]
fn h21_04_every_write_door_refuses_protected_paths() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let (_dir, ws) = workspace();
        let none: &[&str] = &[];
        let jail = Jail::with_resolver(&ws, none, resolver).unwrap();
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".mcp.json",
            ".claude/settings.json",
            ".bashrc",
            ".vscode/tasks.json",
            ".gitmodules",
            "src/../.zshrc",
        ] {
            for mode in [WriteMode::CreateParents, WriteMode::ParentMustExist] {
                assert_protected(write(&jail, path, mode), &format!("{resolver:?} {path}"));
            }
            let located = jail.locate(path).unwrap();
            assert!(
                matches!(jail.create_new(&located), Err(FsError::Protected { .. })),
                "create_new {path}"
            );
        }
        // By absolute path too, and nothing was created on the way.
        let abs = ws.join(".claude/commands/x.md").display().to_string();
        assert_protected(write(&jail, &abs, WriteMode::CreateParents), "absolute");
        assert!(!ws.join(".claude").exists());
        assert!(!ws.join(".mcp.json").exists());
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n"
        );
        // Ordinary files are still written.
        write(&jail, "src/main.rs", WriteMode::CreateParents).unwrap();
        write(&jail, "sub/.bashrc", WriteMode::CreateParents).unwrap();
        write(&jail, ".gitignore", WriteMode::CreateParents).unwrap();
    }
}

#[test]
fn h21_04_protection_is_checked_where_symlinks_lead() {
    let (_dir, ws) = workspace();
    symlink(".git/hooks", ws.join("h")).unwrap();
    symlink(".git", ws.join("g")).unwrap();
    symlink("..", ws.join("src/up")).unwrap();
    symlink(".mcp.json", ws.join("m.json")).unwrap();
    std::fs::write(ws.join(".bashrc"), "# rc\n").unwrap();
    symlink(".bashrc", ws.join("rc")).unwrap();
    for jail in jails(&ws) {
        for path in ["h/x", "h/pre-commit", "g/config", "src/up/.mcp.json", "rc"] {
            for mode in [WriteMode::CreateParents, WriteMode::ParentMustExist] {
                assert_protected(write(&jail, path, mode), path);
            }
        }
        // A dangling link to a protected name, and a new directory through a link.
        assert!(write(&jail, "m.json", WriteMode::ParentMustExist).is_err());
        assert_protected(
            write(&jail, "g/newdir/x", WriteMode::CreateParents),
            "g/newdir/x",
        );
        assert!(!ws.join(".git/newdir").exists());
        assert!(!ws.join(".git/hooks/x").exists());
        assert!(!ws.join(".mcp.json").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join(".bashrc")).unwrap(),
            "# rc\n"
        );
    }
}

#[test]
fn h21_04_protected_names_match_without_regard_to_case() {
    let (_dir, ws) = workspace();
    for jail in jails(&ws) {
        for path in [
            ".GIT/config",
            ".Git/hooks/pre-commit",
            ".MCP.json",
            ".Claude/settings.json",
        ] {
            assert_protected(write(&jail, path, WriteMode::CreateParents), path);
        }
    }
}

#[test]
fn h21_03_the_repository_is_protected_as_a_unit() {
    let (_dir, ws) = workspace();
    // A worktree-style `.git` file, a nested repository, and git's other control files.
    std::fs::create_dir_all(ws.join("wt")).unwrap();
    std::fs::write(ws.join("wt/.git"), "gitdir: /repo/.git/worktrees/wt\n").unwrap();
    std::fs::create_dir_all(ws.join("vendor/lib/.git")).unwrap();
    for jail in jails(&ws) {
        for path in [
            ".git/commondir",
            ".git/config.worktree",
            ".git/modules/lib/config",
            ".git/modules/lib/hooks/post-checkout",
            ".git/worktrees/wt/commondir",
            ".git/info/attributes",
            "wt/.git",
            "vendor/lib/.git/config",
            ".gitold/../.git/config",
        ] {
            assert_protected(write(&jail, path, WriteMode::CreateParents), path);
        }
        // A `.git` where there is none may not be created either.
        assert_protected(
            write(&jail, "new/.git", WriteMode::CreateParents),
            "new/.git",
        );
        assert!(!ws.join("new/.git").exists());
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("wt/.git")).unwrap(),
        "gitdir: /repo/.git/worktrees/wt\n"
    );
    assert!(!ws.join(".git/commondir").exists());
    assert!(!ws.join(".git/modules").exists());
}

/// Runs `f` on its own thread and fails the test if it has not returned within 10 s (a hang
/// is the bug; the limit is not a performance assertion).
fn promptly<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    receive
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

#[test]
fn h21_11_fifos_and_devices_are_refused_without_blocking() {
    let (_dir, ws) = workspace();
    nix::unistd::mkfifo(
        &ws.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    symlink("pipe", ws.join("to_pipe")).unwrap();
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        for path in ["pipe", "to_pipe"] {
            let ws = ws.clone();
            let results = promptly(path, move || {
                let none: &[&str] = &[];
                let jail = Jail::with_resolver(&ws, none, resolver).unwrap();
                let located = jail.locate(path).unwrap();
                let mut results = vec![jail.open_read(&located).map(|_| ())];
                if path == "pipe" {
                    // The search tools' door (a walk never yields a symlink here).
                    results.push(jail.open_walked(&located).map(|_| ()));
                }
                results
            });
            for result in results {
                match result {
                    Err(FsError::NotRegular { .. }) => {}
                    other => panic!("{resolver:?} {path}: {other:?}"),
                }
            }
        }
        let none: &[&str] = &[];
        let jail = Jail::with_resolver(&ws, none, resolver).unwrap();
        let err = jail.open_read(&jail.locate("pipe").unwrap()).unwrap_err();
        assert!(err.to_string().contains("named pipe (FIFO)"), "{err}");
        // A device an extra root exposes streams forever: refused before a read.
        let jail = jail.allow_root(Path::new("/dev"), false).unwrap();
        let err = jail
            .open_read(&jail.locate("/dev/zero").unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
    }
}

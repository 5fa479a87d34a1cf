//! Confinement boundary cases, for both resolvers: the cases GoClaw's boundary tests cover plus
//! the escapes they miss.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use talon_fs::{EntryKind, FsError, Jail, Resolver, WriteMode};

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(ws.join(".talon")).unwrap();
    std::fs::create_dir_all(ws.join("denied")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("file.txt"), "inside\n").unwrap();
    std::fs::write(ws.join("sub/inner.txt"), "inner\n").unwrap();
    std::fs::write(ws.join(".talon/state"), "talon state\n").unwrap();
    std::fs::write(ws.join("denied/x"), "denied\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET\n").unwrap();
    symlink("file.txt", ws.join("link_in")).unwrap();
    symlink("sub", ws.join("link_dir_in")).unwrap();
    symlink("../outside/secret.txt", ws.join("link_out")).unwrap();
    symlink(outside.join("secret.txt"), ws.join("link_abs_out")).unwrap();
    symlink(ws.join("file.txt"), ws.join("link_abs_in")).unwrap();
    symlink("../outside", ws.join("link_dir_out")).unwrap();
    symlink("missing.txt", ws.join("dangling")).unwrap();
    symlink("../outside/nope.txt", ws.join("dangling_out")).unwrap();
    symlink("/proc/self/root", ws.join("proc_root")).unwrap();
    symlink(".talon/state", ws.join("to_denied")).unwrap();
    symlink("loop_b", ws.join("loop_a")).unwrap();
    symlink("loop_a", ws.join("loop_b")).unwrap();
    std::fs::hard_link(outside.join("secret.txt"), ws.join("hard")).unwrap();
    Fixture {
        _dir: dir,
        ws,
        outside,
    }
}

#[derive(Debug, PartialEq)]
enum Want {
    Content(&'static str),
    Escapes,
    Denied,
    NotFound,
    HardLink,
    Loop,
    NotADirectory,
    Invalid,
    IsDir,
}

fn classify(result: Result<String, FsError>) -> Result<String, &'static str> {
    result.map_err(|e| match e {
        FsError::Escapes { .. } => "Escapes",
        FsError::Denied { .. } => "Denied",
        FsError::NotFound { .. } => "NotFound",
        FsError::HardLink { .. } => "HardLink",
        FsError::SymlinkLoop { .. } => "Loop",
        FsError::NotADirectory { .. } => "NotADirectory",
        FsError::InvalidPath { .. } => "Invalid",
        FsError::IsADirectory { .. } => "IsDir",
        other => panic!("unexpected error {other:?}"),
    })
}

fn read(jail: &Jail, path: &str) -> Result<String, FsError> {
    let located = jail.locate(path)?;
    let opened = jail.open_read(&located)?;
    if opened.is_dir() {
        return Err(FsError::IsADirectory {
            path: opened.real_abs,
        });
    }
    use std::io::Read;
    let mut text = String::new();
    let mut file = opened.file;
    file.read_to_string(&mut text).unwrap();
    Ok(text)
}

fn resolvers() -> Vec<Resolver> {
    // This machine's kernel has openat2; if a CI kernel lacks it, fail loudly rather than test
    // only the fallback.
    assert_eq!(
        Resolver::detect(),
        Resolver::Openat2,
        "openat2 is unavailable here"
    );
    vec![Resolver::Walk, Resolver::Openat2]
}

#[test]
fn reads_table() {
    for resolver in resolvers() {
        let f = fixture();
        let jail = Jail::with_resolver(&f.ws, &["denied"], resolver).unwrap();
        let abs = |p: &str| format!("{}/{p}", jail.root().display());
        let out_abs = f.outside.join("secret.txt").display().to_string();
        let cases: Vec<(String, Want)> = vec![
            ("file.txt".into(), Want::Content("inside\n")),
            ("./file.txt".into(), Want::Content("inside\n")),
            ("sub/inner.txt".into(), Want::Content("inner\n")),
            ("sub/../file.txt".into(), Want::Content("inside\n")),
            (abs("file.txt"), Want::Content("inside\n")),
            ("link_in".into(), Want::Content("inside\n")),
            ("link_dir_in/inner.txt".into(), Want::Content("inner\n")),
            ("../outside/secret.txt".into(), Want::Escapes),
            ("sub/../../outside/secret.txt".into(), Want::Escapes),
            (out_abs, Want::Escapes),
            ("/etc/passwd".into(), Want::Escapes),
            ("link_out".into(), Want::Escapes),
            ("link_abs_out".into(), Want::Escapes),
            // Absolute symlinks are refused even when they point inside (the kernel cannot tell
            // where "/" is for the jail); use relative links inside a workspace.
            ("link_abs_in".into(), Want::Escapes),
            ("link_dir_out/secret.txt".into(), Want::Escapes),
            ("dangling".into(), Want::NotFound),
            ("dangling_out".into(), Want::Escapes),
            ("proc_root/etc/passwd".into(), Want::Escapes),
            ("hard".into(), Want::HardLink),
            (".talon/state".into(), Want::Denied),
            ("sub/../.talon/state".into(), Want::Denied),
            ("to_denied".into(), Want::Denied),
            ("denied/x".into(), Want::Denied),
            ("loop_a".into(), Want::Loop),
            ("missing.txt".into(), Want::NotFound),
            ("file.txt/x".into(), Want::NotADirectory),
            ("sub".into(), Want::IsDir),
            ("file.txt\0".into(), Want::Invalid),
            (String::new(), Want::Invalid),
        ];
        for (path, want) in cases {
            let got = classify(read(&jail, &path));
            let expected = match &want {
                Want::Content(c) => Ok((*c).to_string()),
                other => Err(match other {
                    Want::Escapes => "Escapes",
                    Want::Denied => "Denied",
                    Want::NotFound => "NotFound",
                    Want::HardLink => "HardLink",
                    Want::Loop => "Loop",
                    Want::NotADirectory => "NotADirectory",
                    Want::Invalid => "Invalid",
                    Want::IsDir => "IsDir",
                    Want::Content(_) => unreachable!(),
                }),
            };
            assert_eq!(got, expected, "{resolver:?} read {path:?}");
        }
    }
}

fn write(jail: &Jail, path: &str, data: &str) -> Result<String, FsError> {
    let located = jail.locate(path)?;
    jail.write(&located, data.as_bytes(), WriteMode::CreateParents)
        .map(|r| r.real_rel.display().to_string())
}

fn leftovers(dir: &Path) -> Vec<String> {
    walk(dir)
        .into_iter()
        .filter(|p| p.contains(".talon-"))
        .collect()
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        out.push(path.display().to_string());
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk(&path));
        }
    }
    out
}

#[test]
fn writes_table() {
    for resolver in resolvers() {
        let f = fixture();
        let jail = Jail::with_resolver(&f.ws, &["denied"], resolver).unwrap();
        assert_eq!(
            classify(write(&jail, "new/deep/file.txt", "a")),
            Ok("new/deep/file.txt".into())
        );
        assert_eq!(
            std::fs::read_to_string(f.ws.join("new/deep/file.txt")).unwrap(),
            "a"
        );
        let mode = std::fs::metadata(f.ws.join("new/deep/file.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o644, "new files are 0644");

        std::fs::set_permissions(
            f.ws.join("sub/inner.txt"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        write(&jail, "sub/inner.txt", "changed").unwrap();
        let mode = std::fs::metadata(f.ws.join("sub/inner.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{resolver:?}: an existing file keeps its mode");

        assert_eq!(
            classify(write(&jail, "link_in", "through")),
            Ok("file.txt".into()),
            "written through an inside link"
        );
        assert_eq!(
            std::fs::read_to_string(f.ws.join("file.txt")).unwrap(),
            "through"
        );
        assert!(
            std::fs::symlink_metadata(f.ws.join("link_in"))
                .unwrap()
                .file_type()
                .is_symlink()
        );

        for (path, want) in [
            ("link_out", "Escapes"),
            ("link_abs_out", "Escapes"),
            ("link_dir_out/new.txt", "Escapes"),
            ("../outside/new.txt", "Escapes"),
            ("dangling", "DanglingSymlink"),
            ("dangling_out", "Escapes"),
            ("hard", "HardLink"),
            ("sub", "IsDir"),
            (".talon/x", "Denied"),
            ("denied/y", "Denied"),
            ("to_denied", "Denied"),
            ("proc_root/tmp/x", "Escapes"),
        ] {
            let got = match write(&jail, path, "PWNED") {
                Ok(p) => format!("Ok({p})"),
                Err(FsError::DanglingSymlink { .. }) => "DanglingSymlink".into(),
                Err(e) => classify(Err(e)).unwrap_err().to_string(),
            };
            assert_eq!(got, want, "{resolver:?} write {path}");
        }
        assert_eq!(
            std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
            "SECRET\n"
        );
        assert!(!f.outside.join("new.txt").exists() && !f.outside.join("nope.txt").exists());
        assert!(leftovers(&f.ws).is_empty(), "{:?}", leftovers(&f.ws));
    }
}

#[test]
fn listings_hide_denied_entries() {
    let f = fixture();
    let jail = Jail::new(&f.ws, &["denied"]).unwrap();
    let entries = jail.list(&jail.locate(".").unwrap()).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert!(
        !names.contains(&".talon") && !names.contains(&"denied"),
        "{names:?}"
    );
    assert!(names.contains(&"file.txt") && names.contains(&"link_out"));
    let kind = |n: &str| entries.iter().find(|e| e.name == n).map(|e| e.kind);
    assert_eq!(kind("sub"), Some(EntryKind::Dir));
    assert_eq!(kind("link_out"), Some(EntryKind::Symlink));
    assert_eq!(kind("file.txt"), Some(EntryKind::File));
    assert!(matches!(
        jail.list(&jail.locate("link_dir_out").unwrap()),
        Err(FsError::Escapes { .. })
    ));
    assert!(matches!(
        jail.list(&jail.locate("file.txt").unwrap()),
        Err(FsError::NotADirectory { .. })
    ));
}

#[test]
fn extra_roots_are_reachable_by_absolute_path_and_may_be_read_only() {
    let f = fixture();
    let skills = f.outside.join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(skills.join("a.md"), "skill").unwrap();
    let jail = Jail::new(&f.ws, &[] as &[&str])
        .unwrap()
        .allow_root(&skills, false)
        .unwrap();
    let abs = std::fs::canonicalize(&skills).unwrap().join("a.md");
    assert_eq!(read(&jail, abs.to_str().unwrap()).unwrap(), "skill");
    assert!(matches!(
        write(&jail, abs.to_str().unwrap(), "x"),
        Err(FsError::ReadOnly { .. })
    ));
    assert!(matches!(
        read(&jail, f.outside.join("secret.txt").to_str().unwrap()),
        Err(FsError::Escapes { .. })
    ));
}

#[test]
fn bad_deny_prefixes_are_refused() {
    let f = fixture();
    assert!(matches!(
        Jail::new(&f.ws, &["../x"]),
        Err(FsError::InvalidPath { .. })
    ));
    assert!(matches!(
        Jail::new(&f.ws.join("file.txt"), &[] as &[&str]),
        Err(FsError::NotADirectory { .. })
    ));
}

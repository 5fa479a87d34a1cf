//! One thread swaps symlinks between an inside and an outside target while another reads and
//! writes through them: over 100,000 attempts per resolver, not one read or write may escape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use talon_fs::{FsError, Jail, Resolver, WriteMode};

const ATTEMPTS: usize = 100_000;

fn swapper(
    ws: &Path,
    name: &str,
    targets: [&str; 2],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let ws = ws.to_path_buf();
    let name = name.to_string();
    let targets = [targets[0].to_string(), targets[1].to_string()];
    std::thread::spawn(move || {
        let mut swaps = 0u64;
        let tmp = ws.join(format!("{name}.swap"));
        while !stop.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(&tmp);
            symlink(&targets[(swaps % 2) as usize], &tmp).unwrap();
            std::fs::rename(&tmp, ws.join(&name)).unwrap();
            swaps += 1;
        }
        swaps
    })
}

fn race(resolver: Resolver) {
    let base = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("inside.txt"), "inside").unwrap();
    std::fs::write(ws.join("sub/secret.txt"), "inside").unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
    symlink("inside.txt", ws.join("swap")).unwrap();
    symlink("sub", ws.join("dswap")).unwrap();

    let jail = Jail::with_resolver(&ws, &[] as &[&str], resolver).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let file_swapper = swapper(
        &ws,
        "swap",
        ["inside.txt", "../outside/secret.txt"],
        Arc::clone(&stop),
    );
    let dir_swapper = swapper(&ws, "dswap", ["sub", "../outside"], Arc::clone(&stop));

    let (mut reads_ok, mut writes_ok, mut refused, mut escapes) = (0usize, 0usize, 0usize, 0usize);
    for i in 0..ATTEMPTS {
        let path = if i % 2 == 0 {
            "swap"
        } else {
            "dswap/secret.txt"
        };
        let located = jail.locate(path).unwrap();
        if i % 4 < 2 {
            match jail.open_read(&located) {
                Ok(opened) => {
                    let mut text = String::new();
                    std::io::Read::read_to_string(&mut { opened.file }, &mut text).unwrap();
                    if text.contains("SECRET") {
                        escapes += 1;
                    }
                    reads_ok += 1;
                }
                Err(
                    FsError::Escapes { .. }
                    | FsError::NotFound { .. }
                    | FsError::SymlinkLoop { .. },
                ) => refused += 1,
                Err(e) => panic!("unexpected read error: {e}"),
            }
        } else {
            match jail.write(&located, b"inside", WriteMode::ParentMustExist) {
                Ok(report) => {
                    if report.real_abs.starts_with(&outside) {
                        escapes += 1;
                    }
                    writes_ok += 1;
                }
                Err(
                    FsError::Escapes { .. }
                    | FsError::NotFound { .. }
                    | FsError::SymlinkLoop { .. }
                    | FsError::DanglingSymlink { .. },
                ) => refused += 1,
                Err(e) => panic!("unexpected write error: {e}"),
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = file_swapper.join().unwrap() + dir_swapper.join().unwrap();

    assert_eq!(escapes, 0, "{resolver:?}: {escapes} escapes");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "SECRET"
    );
    let outside_files: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside_files.len(),
        1,
        "nothing was created outside: {outside_files:?}"
    );
    // The race really happened: both outcomes were seen many times.
    assert!(swaps > 1000, "{resolver:?}: only {swaps} swaps");
    assert!(
        reads_ok > 1000 && writes_ok > 1000 && refused > 1000,
        "{resolver:?}: reads {reads_ok}, writes {writes_ok}, refused {refused}"
    );
    eprintln!(
        "{resolver:?}: {ATTEMPTS} attempts, {swaps} swaps, {reads_ok} reads, {writes_ok} writes, {refused} refused, 0 escapes"
    );
}

#[test]
fn no_escape_under_symlink_swaps_openat2() {
    race(Resolver::Openat2);
}

#[test]
fn no_escape_under_symlink_swaps_walk() {
    race(Resolver::Walk);
}

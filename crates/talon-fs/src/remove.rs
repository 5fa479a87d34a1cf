//! Removal beneath a root that never follows a symlink: for cleaning up after a sandboxed
//! command, which may have planted symlinks anywhere in the workspace.
//!
//! Removing by path (`std::fs::remove_file(ws.join(".git/config"))`) resolves every component
//! again, so a command that replaced `.git` with a symlink to `~/.ssh` would have Talon delete
//! `~/.ssh/config`. Here every step is relative to a descriptor of the directory it happens
//! in: the parents are opened one at a time with `O_NOFOLLOW | O_DIRECTORY`, the entry is
//! examined with `AT_SYMLINK_NOFOLLOW` and removed with `unlinkat`, and a directory is emptied
//! through a descriptor of itself, never leaving it (nor its filesystem). A symlink anywhere on
//! the way is removed as a link, or stops the walk; it is never followed.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// Directories deep a removal goes before giving up (each level holds one descriptor).
const MAX_DEPTH: usize = 128;

/// What [`remove_beneath`] may remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Whatever is there: a file, a symlink (the link itself), a directory with its contents.
    Anything,
    /// Only an empty regular file (a placeholder the sandbox created).
    EmptyFile,
    /// Only a regular file holding exactly these bytes (a placeholder made by [`seed_beneath`]).
    FileWith(&'static [u8]),
}

/// Opens the parent directories of `rel` beneath `root`, one at a time, following no symlink;
/// the descriptor of the last and the final name. `Ok(None)` when a parent is missing, not a
/// directory, or a symlink.
fn parent_beneath<'a>(root: &Path, rel: &'a Path) -> std::io::Result<Option<(OwnedFd, &'a OsStr)>> {
    let mut names: Vec<&OsStr> = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is not a plain relative path", rel.display()),
                ));
            }
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return Ok(None);
    };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut dir = nix::fcntl::open(root, flags, Mode::empty())?;
    for name in parents {
        match openat(&dir, *name, flags | OFlag::O_NOFOLLOW, Mode::empty()) {
            Ok(next) => dir = next,
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some((dir, *last)))
}

/// Creates `rel` beneath `root` as a new regular file holding `content` (mode 0644), without
/// following a symlink and without replacing anything: `Ok(false)` if the name exists or a
/// parent is not a plain directory. For placeholders that must read as something harmless
/// rather than empty (git refuses an empty `commondir`, and reads `.` as "this repository").
pub fn seed_beneath(root: &Path, rel: &Path, content: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    let Some((dir, last)) = parent_beneath(root, rel)? else {
        return Ok(false);
    };
    let fd = match openat(
        &dir,
        last,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    ) {
        Ok(fd) => fd,
        Err(Errno::EEXIST) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let mut file = std::fs::File::from(fd);
    if let Err(e) = file.write_all(content) {
        let _ = unlinkat(&dir, last, UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok(true)
}

/// True if `name` in `dir` is a regular file holding exactly `content`.
fn holds(dir: &OwnedFd, name: &OsStr, content: &[u8]) -> std::io::Result<bool> {
    use std::io::Read;
    let fd = match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ELOOP) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    if kind(&fstat(&fd)?) != SFlag::S_IFREG {
        return Ok(false);
    }
    let mut found = Vec::new();
    std::fs::File::from(fd)
        .take(content.len() as u64 + 1)
        .read_to_end(&mut found)?;
    Ok(found == content)
}

/// Removes `rel` beneath the directory `root` without following any symlink, and returns
/// whether something was removed. `rel` must be a relative path of plain names. A parent that
/// is missing, not a directory or a symlink means there is nothing here to remove: `Ok(false)`.
pub fn remove_beneath(root: &Path, rel: &Path, what: Removal) -> std::io::Result<bool> {
    let Some((dir, last)) = parent_beneath(root, rel)? else {
        return Ok(false);
    };
    if let Removal::FileWith(content) = what {
        if !holds(&dir, last, content)? {
            return Ok(false);
        }
        unlinkat(&dir, last, UnlinkatFlags::NoRemoveDir)?;
        return Ok(true);
    }
    let stat = match fstatat(&dir, last, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::ENOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    match (kind(&stat), what) {
        (SFlag::S_IFREG, Removal::EmptyFile) if stat.st_size == 0 => {}
        (_, Removal::EmptyFile | Removal::FileWith(_)) => return Ok(false),
        (SFlag::S_IFDIR, Removal::Anything) => {
            let parent_dev = fstat(&dir)?.st_dev;
            if stat.st_dev != parent_dev {
                // A mount point: not ours to empty.
                return Ok(false);
            }
            empty_dir(&dir, last, stat.st_dev, 0)?;
            unlinkat(&dir, last, UnlinkatFlags::RemoveDir)?;
            return Ok(true);
        }
        (_, Removal::Anything) => {}
    }
    unlinkat(&dir, last, UnlinkatFlags::NoRemoveDir)?;
    Ok(true)
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT
}

/// Removes everything inside `parent/name`, through a descriptor of that directory.
fn empty_dir(parent: &OwnedFd, name: &OsStr, dev: u64, depth: usize) -> std::io::Result<()> {
    if depth >= MAX_DEPTH {
        return Err(std::io::Error::other("directory tree too deep to remove"));
    }
    let fd = openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    if fstat(&fd)?.st_dev != dev {
        return Err(std::io::Error::other(
            "a directory changed under the removal",
        ));
    }
    // Names first, then removals: the listing is not disturbed by its own deletions.
    let listing = fd.try_clone()?;
    let mut entries: Vec<OsString> = Vec::new();
    for entry in Dir::from_fd(listing)?.iter() {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." {
            entries.push(OsStr::from_bytes(bytes).to_os_string());
        }
    }
    for entry in entries {
        let stat = match fstatat(&fd, entry.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        if kind(&stat) == SFlag::S_IFDIR {
            if stat.st_dev != dev {
                return Err(std::io::Error::other("a mount point inside the removal"));
            }
            empty_dir(&fd, &entry, dev, depth + 1)?;
            unlinkat(&fd, entry.as_os_str(), UnlinkatFlags::RemoveDir)?;
        } else {
            match unlinkat(&fd, entry.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn removes_trees_and_links_but_never_what_links_point_at() {
        let dir = tempfile::tempdir().expect("dir");
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        std::fs::create_dir_all(ws.join("tree/a/b")).expect("tree");
        std::fs::create_dir_all(outside.join("keep")).expect("outside");
        std::fs::write(outside.join("keep/file"), "x").expect("file");
        std::fs::write(ws.join("tree/a/b/f"), "x").expect("file");
        symlink(&outside, ws.join("tree/a/out")).expect("link");
        symlink(&outside, ws.join("link")).expect("link");
        assert!(remove_beneath(&ws, Path::new("tree"), Removal::Anything).expect("removes"));
        assert!(!ws.join("tree").exists());
        // Through a symlinked parent: nothing is removed.
        assert!(!remove_beneath(&ws, Path::new("link/keep"), Removal::Anything).expect("ok"));
        assert!(outside.join("keep/file").exists());
        // The link itself is removed as a link.
        assert!(remove_beneath(&ws, Path::new("link"), Removal::Anything).expect("removes"));
        assert!(outside.join("keep/file").exists());
        std::fs::write(ws.join("placeholder"), "").expect("file");
        std::fs::write(ws.join("full"), "data").expect("file");
        assert!(remove_beneath(&ws, Path::new("placeholder"), Removal::EmptyFile).expect("ok"));
        assert!(!remove_beneath(&ws, Path::new("full"), Removal::EmptyFile).expect("ok"));
        assert!(ws.join("full").exists());
        assert!(remove_beneath(&ws, Path::new("../x"), Removal::Anything).is_err());
        // Seeded placeholders: created only where nothing is, removed only while unchanged.
        assert!(seed_beneath(&ws, Path::new("seed"), b".\n").expect("seeds"));
        assert!(!seed_beneath(&ws, Path::new("seed"), b".\n").expect("exists"));
        symlink(&outside, ws.join("link2")).expect("link");
        assert!(!seed_beneath(&ws, Path::new("link2/x"), b".\n").expect("no link"));
        assert!(!outside.join("x").exists());
        assert_eq!(std::fs::read(ws.join("seed")).expect("read"), b".\n");
        let seeded = Removal::FileWith(b".\n");
        std::fs::write(ws.join("changed"), "/tmp/evil\n").expect("file");
        assert!(!remove_beneath(&ws, Path::new("changed"), seeded).expect("ok"));
        assert!(remove_beneath(&ws, Path::new("seed"), seeded).expect("removes"));
        assert!(!ws.join("seed").exists());
    }
}

//! Atomic writes inside the jail.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, fsync, unlinkat};

use crate::error::Raw;
use crate::{FsError, Jail, Located, Root, file_name, lexical};

/// Whether a write may create missing parent directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Create missing parent directories (mode 0755).
    CreateParents,
    /// The parent directory must exist.
    ParentMustExist,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// The file did not exist before.
    pub created: bool,
    /// The path written, relative to its root, after symlinks.
    pub real_rel: PathBuf,
    /// The absolute path written.
    pub real_abs: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Jail {
    /// Replaces (or creates) a file with `data`, atomically: a temporary file in the same
    /// directory is written, synced and renamed over the target, so readers see the old or the
    /// new content, never a mix, and a crash or full disk leaves the old file intact. An
    /// existing file keeps its permission bits; a new one gets 0644. A symlink inside the
    /// workspace is written through; one that leaves it, or dangles, is refused.
    pub fn write(
        &self,
        located: &Located,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<WriteReport, FsError> {
        self.write_at(located, data, mode, 0)
    }

    /// Creates a new, empty file opened for reading and appending (mode 0600), with its missing parent
    /// directories: for files Talon itself keeps growing in the workspace, such as a background
    /// command's output log. Parents are resolved by the kernel like every path here, and the
    /// file is created with `O_EXCL | O_NOFOLLOW`, so a planted symlink or an existing file is
    /// never written through.
    pub fn create_new(&self, located: &Located) -> Result<(std::fs::File, PathBuf), FsError> {
        let root = self.root_of(located);
        let shown = self.display(located);
        if !root.writable {
            return Err(FsError::ReadOnly { path: shown });
        }
        let Some(name) = file_name(&located.rel) else {
            return Err(FsError::InvalidPath {
                path: shown.display().to_string(),
                reason: "the path must end in a file name".into(),
            });
        };
        self.check_protected(root, &lexical(&located.rel))?;
        let parent_rel = located.rel.parent().unwrap_or(Path::new(""));
        let parent = self.ensure_dirs(root, parent_rel, &shown)?;
        let (parent_real, parent_abs) = self.real_rel(root, &parent)?;
        self.check_protected(root, &parent_real.join(name))?;
        let fd = nix::fcntl::openat(
            &parent,
            name,
            OFlag::O_RDWR
                | OFlag::O_APPEND
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| Raw::from(e).at(&shown, &root.path))?;
        Ok((std::fs::File::from(fd), parent_abs.join(name)))
    }

    fn write_at(
        &self,
        located: &Located,
        data: &[u8],
        mode: WriteMode,
        depth: usize,
    ) -> Result<WriteReport, FsError> {
        let root = self.root_of(located);
        let shown = self.display(located);
        if !root.writable {
            return Err(FsError::ReadOnly { path: shown });
        }
        if located.root == 0 && self.is_denied(&located.rel) {
            return Err(FsError::Denied { path: shown });
        }
        // Checked on the path as given before anything is created, and again below on the
        // path the kernel resolved.
        self.check_protected(root, &lexical(&located.rel))?;
        let Some(name) = file_name(&located.rel) else {
            return Err(FsError::InvalidPath {
                path: shown.display().to_string(),
                reason: "the path must end in a file name".into(),
            });
        };
        let parent_rel = located.rel.parent().unwrap_or(Path::new(""));
        let parent = match mode {
            WriteMode::CreateParents => self.ensure_dirs(root, parent_rel, &shown)?,
            WriteMode::ParentMustExist => self
                .resolver
                .open(
                    &root.fd,
                    parent_rel,
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                    Mode::empty(),
                )
                .map_err(|e| e.at(&shown, &root.path))?,
        };
        let (parent_real, parent_abs) = self.real_rel(root, &parent)?;
        let real_rel = parent_real.join(name);
        if located.root == 0 && self.is_denied(&real_rel) {
            return Err(FsError::Denied { path: shown });
        }
        self.check_protected(root, &real_rel)?;

        let (created, perms) = match fstatat(&parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
                if kind == SFlag::S_IFLNK {
                    return self.write_through_symlink(located, data, mode, depth, &shown);
                }
                if kind == SFlag::S_IFDIR {
                    return Err(FsError::IsADirectory { path: shown });
                }
                self.check_links(&stat, &shown)?;
                (false, Mode::from_bits_truncate(stat.st_mode & 0o7777))
            }
            Err(Errno::ENOENT) => (true, Mode::from_bits_truncate(0o644)),
            Err(e) => return Err(Raw::from(e).at(&shown, &root.path)),
        };

        let temp = format!(
            ".{}.talon-{}-{}.tmp",
            crate::name_string(name),
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let temp_fd = nix::fcntl::openat(
            &parent,
            temp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| Raw::from(e).at(&shown, &root.path))?;
        let result = finish(temp_fd, &parent, &temp, name, data, perms);
        if let Err(source) = result {
            // Never leave the temporary file behind; the target is untouched.
            let _ = unlinkat(&parent, temp.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(FsError::Io {
                path: shown.display().to_string(),
                source,
            });
        }
        Ok(WriteReport {
            created,
            real_rel,
            real_abs: parent_abs.join(name),
        })
    }

    fn write_through_symlink(
        &self,
        located: &Located,
        data: &[u8],
        mode: WriteMode,
        depth: usize,
        shown: &Path,
    ) -> Result<WriteReport, FsError> {
        let root = self.root_of(located);
        if depth > 0 {
            return Err(FsError::SymlinkLoop {
                path: shown.to_path_buf(),
            });
        }
        match self
            .resolver
            .open(&root.fd, &located.rel, OFlag::O_PATH, Mode::empty())
        {
            Ok(fd) => {
                let (target, _) = self.real_rel(root, &fd)?;
                let next = Located {
                    root: located.root,
                    rel: target,
                };
                self.write_at(&next, data, mode, depth + 1)
            }
            Err(Raw::NotFound) => Err(FsError::DanglingSymlink {
                path: shown.to_path_buf(),
            }),
            Err(e) => Err(e.at(shown, &root.path)),
        }
    }

    /// Opens (creating as needed) the directory `rel` for writing entries into it.
    fn ensure_dirs(&self, root: &Root, rel: &Path, shown: &Path) -> Result<OwnedFd, FsError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        match self.resolver.open(&root.fd, rel, flags, Mode::empty()) {
            Ok(fd) => return Ok(fd),
            Err(Raw::NotFound) => {}
            Err(e) => return Err(e.at(shown, &root.path)),
        }
        let mut prefix = PathBuf::new();
        for component in rel.components() {
            let parent = self
                .resolver
                .open(
                    &root.fd,
                    &prefix,
                    OFlag::O_PATH | OFlag::O_DIRECTORY,
                    Mode::empty(),
                )
                .map_err(|e| e.at(shown, &root.path))?;
            prefix.push(component);
            if let std::path::Component::Normal(name) = component {
                // A symlink on the way may lead into a protected directory: nothing is
                // created there.
                let (parent_real, _) = self.real_rel(root, &parent)?;
                self.check_protected(root, &parent_real.join(name))?;
                match mkdirat(&parent, name, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(Raw::from(e).at(shown, &root.path)),
                }
            }
        }
        self.resolver
            .open(&root.fd, rel, flags, Mode::empty())
            .map_err(|e| e.at(shown, &root.path))
    }
}

fn finish(
    temp_fd: OwnedFd,
    parent: &OwnedFd,
    temp: &str,
    name: &std::ffi::OsStr,
    data: &[u8],
    perms: Mode,
) -> std::io::Result<()> {
    fchmod(temp_fd.as_fd(), perms)?;
    let mut file = std::fs::File::from(temp_fd);
    file.write_all(data)?;
    file.sync_all()?;
    drop(file);
    renameat(parent, temp, parent, name)?;
    // Make the rename durable.
    fsync(parent)?;
    Ok(())
}

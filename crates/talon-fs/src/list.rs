//! Directory listings inside the jail; denied entries are left out, so a model cannot learn that
//! they exist.

use nix::dir::{Dir, Type};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};

use crate::{FsError, Jail, Located};

/// What a directory entry is (symlinks are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
    pub mtime_ns: i128,
}

impl Jail {
    /// The entries of a directory, sorted by name, without `.`/`..` and without denied entries.
    pub fn list(&self, located: &Located) -> Result<Vec<DirEntry>, FsError> {
        let opened = self.open(located, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())?;
        let real_rel = opened.real_rel.clone();
        let in_workspace = located.root == 0;
        let shown = self.display(located);
        let fd = std::os::fd::OwnedFd::from(opened.file);
        // A second descriptor for fstatat while the iterator borrows the directory.
        let stat_fd = fd.try_clone().map_err(|source| FsError::Io {
            path: shown.display().to_string(),
            source,
        })?;
        let mut dir =
            Dir::from_fd(fd).map_err(|e| crate::error::Raw::from(e).at(&shown, self.root()))?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let Ok(entry) = entry else { continue };
            let name_bytes = entry.file_name().to_bytes();
            if name_bytes == b"." || name_bytes == b".." {
                continue;
            }
            let name = String::from_utf8_lossy(name_bytes).into_owned();
            if in_workspace && self.is_denied(&real_rel.join(&name)) {
                continue;
            }
            let stat = fstatat(&stat_fd, entry.file_name(), AtFlags::AT_SYMLINK_NOFOLLOW).ok();
            let kind = match (
                entry.file_type(),
                stat.as_ref()
                    .map(|s| SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT),
            ) {
                (_, Some(SFlag::S_IFREG)) | (Some(Type::File), None) => EntryKind::File,
                (_, Some(SFlag::S_IFDIR)) | (Some(Type::Directory), None) => EntryKind::Dir,
                (_, Some(SFlag::S_IFLNK)) | (Some(Type::Symlink), None) => EntryKind::Symlink,
                _ => EntryKind::Other,
            };
            out.push(DirEntry {
                name,
                kind,
                size: stat.as_ref().map_or(0, |s| s.st_size.max(0) as u64),
                mtime_ns: stat.map_or(0, |s| {
                    i128::from(s.st_mtime) * 1_000_000_000 + i128::from(s.st_mtime_nsec)
                }),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

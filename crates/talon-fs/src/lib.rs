//! Workspace-confined file access.
//!
//! A [`Jail`] holds a directory file descriptor for the workspace root (and for any extra
//! allowed roots, such as skills directories). Every path a tool receives is resolved *by the
//! kernel, relative to that descriptor*: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` where
//! the kernel has it, otherwise an fd-relative walk that opens one component at a time with
//! `O_NOFOLLOW` and resolves symlinks itself ([`resolve`]). There is never a
//! check-a-path-then-open-it step, so swapping a symlink between a check and an open cannot
//! redirect the open outside the workspace (GoClaw's "mutable symlink" check was a no-op).
//!
//! What is refused: absolute paths outside every root, `..` that climbs out, symlinks (file or
//! directory, absolute or relative) that leave the root, dangling symlinks on write, hard links to
//! regular files (a link's other name may be outside; see [`Jail::allow_hard_links`]),
//! `/proc/self/root`-style magic links, NUL bytes, and configured deny prefixes, which are checked
//! on the path the kernel actually opened.
//!
//! Every operation on file content goes through one of these doors — [`Jail::open_read`] and
//! [`Jail::open_walked`] to read, [`Jail::write`] and [`Jail::create_new`] to write — and each
//! applies the same checks (deny prefixes, the hard-link policy), so a file refused by one tool
//! is refused by every tool. The read doors open with `O_NONBLOCK` and refuse anything but a
//! regular file (or, for [`Jail::open_read`], a directory) before a byte is read: a FIFO would
//! block the reading thread until a writer came and then never have to end, and a device may
//! stream forever. The write doors also refuse the [`protected`] paths (the git
//! repository, shell start-up files, agent and editor settings) in every writable root,
//! checked on the path the kernel resolved, and create no directory inside them on the way:
//! the command sandbox keeps the same list read-only, so a file tool cannot do what `exec` may
//! not.
//!
//! Writes are atomic ([`Jail::write`]): a temporary file in the same directory, `fsync`, then
//! `renameat` over the target; the file's permission bits are kept; a crash or a full disk never
//! leaves a half-written file.
//!
//! # Charter
//!
//! - **Owns:** the file jail: kernel-resolved, fd-relative access to a workspace and its extra
//!   roots, atomic writes.
//! - **Never contains:** tools, policy, or any path check done on strings.
//! - **A new feature goes:** a new kind of file access (a browser download directory, media files)
//!   is a root or an operation of the jail.

mod error;
mod list;
pub mod plain;
pub mod protected;
mod remove;
pub mod resolve;
mod write;

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

pub use error::FsError;
pub use list::{DirEntry, EntryKind};
pub use remove::{Removal, remove_beneath, seed_beneath};
pub use resolve::Resolver;
pub use write::{WriteMode, WriteReport};

/// One directory tools may use.
#[derive(Debug)]
struct Root {
    fd: OwnedFd,
    /// Canonical absolute path of the root (for mapping absolute inputs and for display).
    path: PathBuf,
    writable: bool,
}

/// Where an input path points: a root and a path relative to it (not yet resolved by the kernel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    root: usize,
    rel: PathBuf,
}

impl Located {
    /// The path relative to its root, as given (before symlink resolution).
    pub fn rel(&self) -> &Path {
        &self.rel
    }
}

/// A file opened inside the jail, with what the kernel says about it.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub stat: FileStat,
    /// The path actually opened, relative to its root, after symlinks.
    pub real_rel: PathBuf,
    /// The absolute path actually opened.
    pub real_abs: PathBuf,
}

impl Opened {
    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        SFlag::from_bits_truncate(self.stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
    }

    /// Modification time in nanoseconds since the epoch.
    pub fn mtime_ns(&self) -> i128 {
        i128::from(self.stat.st_mtime) * 1_000_000_000 + i128::from(self.stat.st_mtime_nsec)
    }
}

/// The confinement of one call's file access: a workspace root, optional extra roots, and the
/// deny prefixes. Cheap to keep per workspace; every method is safe to call concurrently.
#[derive(Debug)]
pub struct Jail {
    roots: Vec<Root>,
    deny: Vec<PathBuf>,
    resolver: Resolver,
    /// Open regular files with more than one name (see [`Jail::allow_hard_links`]).
    hard_links: bool,
}

/// Prefixes denied in every workspace: Talon's own state.
pub const DEFAULT_DENY: &[&str] = &[".talon"];

/// Whether `rel` lies under one of `deny` (normalised relative prefixes), comparing components.
///
/// Walks and searches ask this of every entry, so the usual case costs no allocation: a plain
/// relative path ([`plain`]) is compared by bytes. Anything else is normalised first.
fn denied_by(deny: &[PathBuf], rel: &Path) -> bool {
    let bytes = rel.as_os_str().as_encoded_bytes();
    if plain::is_plain(bytes) && !rel.is_absolute() {
        return deny.iter().any(|d| {
            let d = d.as_os_str().as_encoded_bytes();
            bytes.starts_with(d) && bytes.get(d.len()).is_none_or(|b| *b == b'/')
        });
    }
    let normal: PathBuf = rel
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    deny.iter().any(|d| normal.starts_with(d))
}

fn is_regular(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
}

/// Refuses anything but a regular file (and, where `dir_ok`, a directory): a FIFO blocks a
/// reader until a writer comes and then never has to end, a device may stream forever, and a
/// socket cannot be read at all. Opened with `O_NONBLOCK`, so the open itself never waits;
/// this check on the opened descriptor comes before any read.
fn check_kind(stat: &FileStat, shown: &Path, dir_ok: bool) -> Result<(), FsError> {
    let kind = match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => return Ok(()),
        SFlag::S_IFDIR if dir_ok => return Ok(()),
        SFlag::S_IFDIR => {
            return Err(FsError::IsADirectory {
                path: shown.to_path_buf(),
            });
        }
        SFlag::S_IFIFO => "a named pipe (FIFO)",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        _ => "not a file",
    };
    Err(FsError::NotRegular {
        path: shown.to_path_buf(),
        kind,
    })
}

/// Normalises a deny prefix to a relative path without `.` components; `None` if it is empty or
/// climbs with `..`.
fn normalize_prefix(prefix: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(prefix.trim()).components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

impl Jail {
    /// Confines to `workspace` (which must exist and be a directory), denying `deny` prefixes
    /// (relative to the workspace) in addition to [`DEFAULT_DENY`].
    pub fn new<S: AsRef<str>>(workspace: &Path, deny: &[S]) -> Result<Self, FsError> {
        Self::with_resolver(workspace, deny, Resolver::detect())
    }

    /// Like [`Jail::new`] with an explicit resolver (tests exercise both).
    pub fn with_resolver<S: AsRef<str>>(
        workspace: &Path,
        deny: &[S],
        resolver: Resolver,
    ) -> Result<Self, FsError> {
        let root = open_root(workspace, true)?;
        let mut denied: Vec<PathBuf> = DEFAULT_DENY
            .iter()
            .filter_map(|d| normalize_prefix(d))
            .collect();
        for d in deny {
            match normalize_prefix(d.as_ref()) {
                Some(p) => denied.push(p),
                None => {
                    return Err(FsError::InvalidPath {
                        path: d.as_ref().to_string(),
                        reason: "a deny prefix must be a relative path inside the workspace".into(),
                    });
                }
            }
        }
        Ok(Self {
            roots: vec![root],
            deny: denied,
            resolver,
            hard_links: false,
        })
    }

    /// Lets tools open regular files that have other names (hard links). Off by default: a
    /// hard link's other name may lie outside the workspace, so reading it would read a file the
    /// jail never granted. Turn it on for workspaces that legitimately hold hard links (pnpm's
    /// `node_modules` links into its store). Writes stay safe either way: they replace the
    /// workspace's name atomically, so the other names keep their content.
    pub fn allow_hard_links(mut self, allow: bool) -> Self {
        self.hard_links = allow;
        self
    }

    /// The hard-link policy, in one place for every door (read, walked read, write).
    fn check_links(&self, stat: &FileStat, shown: &Path) -> Result<(), FsError> {
        if !self.hard_links && is_regular(stat) && stat.st_nlink > 1 {
            return Err(FsError::HardLink {
                path: shown.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Refuses a write to `rel` (relative to `root`, lexical or as the kernel resolved it) if it
    /// is a protected path ([`protected::refusal`]). The error names the protected path itself,
    /// which is not what the caller asked for when a symlink led there.
    fn check_protected(&self, root: &Root, rel: &Path) -> Result<(), FsError> {
        match protected::refusal(rel) {
            Some(why) => Err(FsError::Protected {
                path: root.path.join(lexical(rel)),
                why,
            }),
            None => Ok(()),
        }
    }

    /// Also denies `abs` if it lies inside the workspace (Talon's data directory, say).
    pub fn deny_absolute(mut self, abs: &Path) -> Self {
        let canonical = std::fs::canonicalize(abs).unwrap_or_else(|_| abs.to_path_buf());
        if let Ok(rel) = canonical.strip_prefix(&self.roots[0].path)
            && !rel.as_os_str().is_empty()
        {
            self.deny.push(rel.to_path_buf());
        }
        self
    }

    /// Adds an extra root reachable by absolute path (for example a skills directory).
    pub fn allow_root(mut self, path: &Path, writable: bool) -> Result<Self, FsError> {
        self.roots.push(open_root(path, writable)?);
        Ok(self)
    }

    /// The workspace root's canonical path.
    pub fn root(&self) -> &Path {
        &self.roots[0].path
    }

    /// The resolver in use.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// Maps a path given by a tool call to a root and a relative path. Relative paths are relative
    /// to the workspace; absolute paths must be inside one of the roots.
    pub fn locate(&self, input: &str) -> Result<Located, FsError> {
        if input.is_empty() {
            return Err(FsError::InvalidPath {
                path: String::new(),
                reason: "the path is empty".into(),
            });
        }
        if input.as_bytes().contains(&0) {
            return Err(FsError::InvalidPath {
                path: input.replace('\0', "\\0"),
                reason: "the path contains a NUL byte".into(),
            });
        }
        let path = Path::new(input);
        if path.is_relative() {
            return Ok(Located {
                root: 0,
                rel: path.to_path_buf(),
            });
        }
        // Longest matching root wins (an extra root may sit inside the workspace).
        let best = self
            .roots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                plain::strip_prefix(path, &r.path).map(|rel| (i, r.path.as_os_str().len(), rel))
            })
            .max_by_key(|(_, len, _)| *len);
        match best {
            Some((root, _, rel)) => Ok(Located {
                root,
                rel: rel.to_path_buf(),
            }),
            None => Err(FsError::Escapes {
                path: input.to_string(),
                root: self.root().to_path_buf(),
            }),
        }
    }

    /// True if `rel` (relative to the workspace) is under a deny prefix.
    pub fn is_denied(&self, rel: &Path) -> bool {
        denied_by(&self.deny, rel)
    }

    fn root_of(&self, located: &Located) -> &Root {
        &self.roots[located.root]
    }

    /// Absolute display path of a located path (not resolved).
    pub fn display(&self, located: &Located) -> PathBuf {
        self.root_of(located).path.join(&located.rel)
    }

    /// Where the kernel says `fd` is, relative to the root. `None` if it is not under the root.
    fn real_rel(&self, root: &Root, fd: &impl AsFd) -> Result<(PathBuf, PathBuf), FsError> {
        use std::os::fd::AsRawFd;
        let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        let real = std::fs::read_link(&link).map_err(|source| FsError::Io {
            path: link.clone(),
            source,
        })?;
        let rel = real
            .strip_prefix(&root.path)
            .map_err(|_| FsError::Escapes {
                path: real.display().to_string(),
                root: root.path.clone(),
            })?
            .to_path_buf();
        Ok((rel, real))
    }

    /// The deny prefixes, relative to the workspace root.
    pub fn deny_prefixes(&self) -> &[PathBuf] {
        &self.deny
    }

    /// A test of workspace-relative paths against this jail's deny prefixes that owns them (for
    /// a walker's filter, which outlives the borrow).
    pub fn deny_test(&self) -> impl Fn(&Path) -> bool + Send + Sync + 'static {
        let deny = self.deny.clone();
        move |rel| denied_by(&deny, rel)
    }

    /// Opens a regular file found by a walk that did not follow symlinks: any symlink on the path
    /// now (a swap since the walk) fails the open, so the lexical deny check is exact and no
    /// `/proc` lookup is needed. This is the fast path for search tools; the hard-link policy is
    /// checked on the opened file, as for [`Jail::open_read`].
    pub fn open_walked(&self, located: &Located) -> Result<File, FsError> {
        let root = self.root_of(located);
        // The path shown in errors is only built for one (a search opens thousands of files).
        let shown = || self.display(located);
        if located.root == 0 && self.is_denied(&located.rel) {
            return Err(FsError::Denied { path: shown() });
        }
        let fd = self
            .resolver
            .open_with(
                &root.fd,
                &located.rel,
                OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK,
                Mode::empty(),
                false,
            )
            .map_err(|e| e.at(&shown(), &root.path))?;
        let stat = fstat(&fd).map_err(|e| FsError::from_errno(e).at(&shown(), &root.path))?;
        if !is_regular(&stat) || (!self.hard_links && stat.st_nlink > 1) {
            check_kind(&stat, &shown(), false)?;
            self.check_links(&stat, &shown())?;
        }
        Ok(File::from(fd))
    }

    /// Opens an existing regular file or directory for reading. Anything else (a FIFO, a
    /// device, a socket) is refused before a byte is read, and the open itself never blocks.
    pub fn open_read(&self, located: &Located) -> Result<Opened, FsError> {
        self.open(
            located,
            OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK,
            Mode::empty(),
        )
    }

    fn open(&self, located: &Located, flags: OFlag, mode: Mode) -> Result<Opened, FsError> {
        let root = self.root_of(located);
        let shown = self.display(located);
        if located.root == 0 && self.is_denied(&located.rel) {
            return Err(FsError::Denied { path: shown });
        }
        // Fast path: with no symlink on the way, the path the kernel resolved is the lexical
        // one, so no /proc lookup is needed. A symlink (ELOOP here) takes the general path.
        let flags = flags | OFlag::O_CLOEXEC;
        let (fd, real_rel, real_abs) =
            match self
                .resolver
                .open_with(&root.fd, &located.rel, flags, mode, false)
            {
                Ok(fd) => {
                    let rel = lexical(&located.rel);
                    let abs = root.path.join(&rel);
                    (fd, rel, abs)
                }
                Err(crate::error::Raw::Loop) => {
                    let fd = self
                        .resolver
                        .open(&root.fd, &located.rel, flags, mode)
                        .map_err(|e| e.at(&shown, &root.path))?;
                    let (rel, abs) = self.real_rel(root, &fd)?;
                    (fd, rel, abs)
                }
                Err(e) => return Err(e.at(&shown, &root.path)),
            };
        if located.root == 0 && self.is_denied(&real_rel) {
            return Err(FsError::Denied { path: shown });
        }
        let stat = fstat(&fd).map_err(|e| FsError::from_errno(e).at(&shown, &root.path))?;
        check_kind(&stat, &shown, true)?;
        self.check_links(&stat, &shown)?;
        Ok(Opened {
            file: File::from(fd),
            stat,
            real_rel,
            real_abs,
        })
    }
}

/// Lexical normalisation of a relative path without symlinks (`.` dropped, `..` pops); the
/// kernel already refused any `..` that would climb above the root.
fn lexical(rel: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

fn open_root(path: &Path, writable: bool) -> Result<Root, FsError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| FsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let fd = nix::fcntl::open(
        &canonical,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ENOTDIR => FsError::NotADirectory {
            path: canonical.clone(),
        },
        other => FsError::Io {
            path: canonical.display().to_string(),
            source: other.into(),
        },
    })?;
    Ok(Root {
        fd,
        path: canonical,
        writable,
    })
}

/// The final component of a relative path, if it is a plain name.
fn file_name(rel: &Path) -> Option<&OsStr> {
    match rel.components().next_back() {
        Some(Component::Normal(name)) => Some(name),
        _ => None,
    }
}

/// True if the bytes look like text rather than binary (no NUL in the first 8 KiB).
pub fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(8192).any(|&b| b == 0)
}

/// Lossless conversion of a name for display.
pub fn name_string(name: &OsStr) -> String {
    String::from_utf8_lossy(name.as_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation-free test of plain paths answers as the normalising one does.
    #[test]
    fn deny_prefixes_match_whole_components_whatever_the_spelling() {
        let deny = [PathBuf::from(".talon"), PathBuf::from("secrets/keys")];
        for (rel, denied) in [
            (".talon", true),
            (".talon/data.db", true),
            (".talonx/a", false),
            ("a/.talon", false),
            ("secrets/keys", true),
            ("secrets/keys/k1", true),
            ("secrets/keyset", false),
            ("secrets", false),
            ("./.talon/x", true),
            ("secrets//keys/k", true),
            ("secrets/./keys", true),
            (".talon/", true),
            ("", false),
            ("src/main.rs", false),
        ] {
            assert_eq!(denied_by(&deny, Path::new(rel)), denied, "{rel:?}");
        }
    }
}

//! Kernel-enforced path resolution beneath a directory descriptor.
//!
//! [`Resolver::Openat2`] asks the kernel (Linux ≥ 5.6) to resolve the whole path with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: any step that would leave the directory — `..` past
//! it, an absolute path or symlink, a magic link — fails with `EXDEV`/`ELOOP`, atomically with the
//! open. [`Resolver::Walk`] is the fallback for kernels or seccomp profiles without `openat2`: it
//! opens one component at a time relative to the previous directory descriptor with
//! `O_NOFOLLOW`, reads symlinks itself (relative targets only, 40 at most) and refuses to climb
//! above the root. A symlink swapped in between two steps makes the `O_NOFOLLOW` open fail; it can
//! never redirect an open outside.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstatat};

use crate::error::Raw;

/// Symlinks followed in one resolution before giving up (the kernel's limit too).
const MAX_SYMLINKS: usize = 40;

/// How paths are resolved beneath a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    Openat2,
    /// Component-by-component `openat(O_NOFOLLOW)` walk.
    Walk,
}

impl Resolver {
    /// `Openat2` when the kernel supports it (and no seccomp filter hides it), else `Walk`.
    pub fn detect() -> Self {
        let probe = nix::fcntl::open(
            ".",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        let Ok(dir) = probe else {
            return Resolver::Walk;
        };
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(&dir, ".", how) {
            Ok(_) => Resolver::Openat2,
            Err(_) => Resolver::Walk,
        }
    }

    /// Opens `rel` beneath `root` with `flags`/`mode` (mode matters with `O_CREAT`).
    pub(crate) fn open(
        self,
        root: &OwnedFd,
        rel: &Path,
        flags: OFlag,
        mode: Mode,
    ) -> Result<OwnedFd, Raw> {
        self.open_with(root, rel, flags, mode, true)
    }

    /// Like [`Resolver::open`]; with `follow == false` any symlink on the way fails the open
    /// (`ELOOP`), for callers that already walked the tree without following links.
    pub(crate) fn open_with(
        self,
        root: &OwnedFd,
        rel: &Path,
        flags: OFlag,
        mode: Mode,
        follow: bool,
    ) -> Result<OwnedFd, Raw> {
        match self {
            Resolver::Openat2 => {
                let path = if rel.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    rel
                };
                let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
                if !follow {
                    resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
                }
                let how = OpenHow::new()
                    .flags(flags | OFlag::O_CLOEXEC)
                    .mode(mode)
                    .resolve(resolve);
                openat2(root, path, how).map_err(Raw::from)
            }
            Resolver::Walk => walk(root.as_fd(), rel, flags | OFlag::O_CLOEXEC, mode, follow),
        }
    }
}

fn is_symlink(dir: BorrowedFd<'_>, name: &OsString) -> Result<bool, Errno> {
    let stat = fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
    Ok(SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

fn components(path: &Path) -> Result<VecDeque<Option<OsString>>, Raw> {
    // `None` stands for `..`.
    let mut out = VecDeque::new();
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push_back(Some(name.to_os_string())),
            Component::ParentDir => out.push_back(None),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(Raw::Escapes),
        }
    }
    Ok(out)
}

fn walk(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlag,
    mode: Mode,
    follow: bool,
) -> Result<OwnedFd, Raw> {
    let mut queue = components(rel)?;
    let mut stack: Vec<OwnedFd> = Vec::new();
    let mut followed = 0;
    loop {
        let current = stack.last().map_or(root, |fd| fd.as_fd());
        let Some(next) = queue.pop_front() else {
            // Path ended on the current directory (empty, `.` or `..`).
            return openat(current, ".", flags, mode).map_err(Raw::from);
        };
        let Some(name) = next else {
            // `..`: climb, but never above the root.
            if stack.pop().is_none() {
                return Err(Raw::Escapes);
            }
            continue;
        };
        match is_symlink(current, &name) {
            Ok(true) if !follow => return Err(Raw::Loop),
            Ok(true) => {
                followed += 1;
                if followed > MAX_SYMLINKS {
                    return Err(Raw::Loop);
                }
                let target = readlinkat(current, name.as_os_str()).map_err(Raw::from)?;
                let target = std::path::PathBuf::from(OsString::from_vec(target.into_vec()));
                if target.is_absolute() {
                    return Err(Raw::Escapes);
                }
                let mut expanded = components(&target)?;
                expanded.extend(queue);
                queue = expanded;
                continue;
            }
            Ok(false) => {}
            // A missing last component may be created (O_CREAT); anything else is an error.
            Err(Errno::ENOENT) if queue.is_empty() => {}
            Err(e) => return Err(Raw::from(e)),
        }
        if queue.is_empty() {
            return openat(current, name.as_os_str(), flags | OFlag::O_NOFOLLOW, mode)
                .map_err(Raw::from);
        }
        let dir = openat(
            current,
            name.as_os_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(Raw::from)?;
        stack.push(dir);
    }
}

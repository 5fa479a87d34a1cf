//! Errors of confined file access. Messages say what was wrong and what to do instead; the tool
//! layer may reword them into a dialect's exact strings.

use std::path::{Path, PathBuf};

use nix::errno::Errno;

/// Why a confined file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path} is outside the workspace ({}); use a path inside it", root.display())]
    Escapes { path: String, root: PathBuf },
    #[error("{} is in a directory that is denied by the workspace settings", path.display())]
    Denied { path: PathBuf },
    #[error("{} does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is a directory, not a file", path.display())]
    IsADirectory { path: PathBuf },
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("{} is a hard link; hard links are refused because their other names may be outside the workspace (set [fs] allow_hard_links = true if this workspace holds them on purpose)", path.display())]
    HardLink { path: PathBuf },
    #[error("{} is a symbolic link whose target does not exist; refusing to write through it", path.display())]
    DanglingSymlink { path: PathBuf },
    #[error("{} has too many levels of symbolic links", path.display())]
    SymlinkLoop { path: PathBuf },
    #[error("{} is {kind}, not a regular file; file tools read only regular files (reading it could block or never end)", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{} is read-only here", path.display())]
    ReadOnly { path: PathBuf },
    #[error("{} is protected: {why}. File tools and sandboxed commands may not create, change, rename or remove it; if the change is really needed, ask the user to make it", path.display())]
    Protected { path: PathBuf, why: &'static str },
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A resolution failure before it is attached to a path.
#[derive(Debug)]
pub enum Raw {
    Escapes,
    NotFound,
    IsADirectory,
    NotADirectory,
    Loop,
    Errno(Errno),
}

impl FsError {
    /// Classifies an errno from a syscall on a path.
    pub(crate) fn from_errno(e: Errno) -> Raw {
        match e {
            Errno::EXDEV => Raw::Escapes,
            Errno::ENOENT => Raw::NotFound,
            Errno::EISDIR => Raw::IsADirectory,
            Errno::ENOTDIR => Raw::NotADirectory,
            Errno::ELOOP => Raw::Loop,
            other => Raw::Errno(other),
        }
    }
}

impl Raw {
    /// Attaches the path the caller asked for.
    pub(crate) fn at(self, shown: &Path, root: &Path) -> FsError {
        let path = shown.to_path_buf();
        match self {
            Raw::Escapes => FsError::Escapes {
                path: shown.display().to_string(),
                root: root.to_path_buf(),
            },
            Raw::NotFound => FsError::NotFound { path },
            Raw::IsADirectory => FsError::IsADirectory { path },
            Raw::NotADirectory => FsError::NotADirectory { path },
            // With RESOLVE_NO_MAGICLINKS a magic link also reports ELOOP; either way the path
            // cannot be used.
            Raw::Loop => FsError::SymlinkLoop { path },
            Raw::Errno(e) => FsError::Io {
                path: shown.display().to_string(),
                source: e.into(),
            },
        }
    }
}

impl From<Errno> for Raw {
    fn from(e: Errno) -> Self {
        FsError::from_errno(e)
    }
}

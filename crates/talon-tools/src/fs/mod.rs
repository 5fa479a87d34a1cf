//! Filesystem tools. The GoClaw dialect (`read_file`, `write_file`, `edit`, `list_files`) lives
//! here; the Claude Code dialect (`Read`, `Write`, `Edit`) lives in [`crate::claude_code`]. Both
//! call the same operations ([`text`], [`edit_core`]) through one façade ([`files`]: the store's
//! documents under routed names, the jail's disk elsewhere), so routing, confinement, atomic
//! writes and line handling behave identically; only names, parameters and messages differ.

pub mod edit;
pub mod edit_core;
pub mod files;
pub mod find;
pub mod glob;
pub mod list_files;
pub mod pdf;
pub mod read_file;
pub mod read_state;
pub mod search;
pub mod text;
pub mod virtual_files;
pub mod workspace;
pub mod workspace_dir;
pub mod write_file;

use std::io::Read;
use std::path::Path;

use talon_fs::{FsError, Jail, Located, Opened};

/// Extensions GoClaw refuses in `read_file`, pointing at the media tools instead.
const BINARY_EXTENSIONS: &[&str] = &[
    "jpg", "jpeg", "png", "gif", "webp", "bmp", "ico", "tiff", "tif", "mp3", "wav", "ogg", "flac",
    "aac", "m4a", "mp4", "avi", "mov", "mkv", "webm", "zip", "tar", "gz", "bz2", "7z", "rar",
    "pdf", "docx", "xlsx", "pptx", "exe", "dll", "so", "dylib",
];

/// The file's extension, lowercased.
pub fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// True if the extension names a binary format.
pub fn binary_extension(path: &Path) -> bool {
    BINARY_EXTENSIONS.contains(&extension(path).as_str())
}

/// Opens an existing file (not a directory) for reading.
pub fn open_existing(jail: &Jail, path: &str) -> Result<(Located, Opened), FsError> {
    let located = jail.locate(path)?;
    let opened = jail.open_read(&located)?;
    Ok((located, opened))
}

/// Reads a whole opened file (callers bound the size first), but never more than
/// [`MAX_EDIT_BYTES`]: a file that grows while it is read (a writer appending) fails instead of
/// filling memory. The jail opens only regular files, so the read always ends.
pub fn read_all(opened: &mut Opened) -> std::io::Result<Vec<u8>> {
    let size = u64::try_from(opened.stat.st_size)
        .unwrap_or(0)
        .min(MAX_EDIT_BYTES);
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    (&mut opened.file)
        .take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(std::io::Error::other(format!(
            "the file grew past {} MiB while it was read",
            MAX_EDIT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// Runs blocking file I/O (opens, reads, `fsync`s) on the runtime's blocking threads, so a slow
/// disk or a large file holds one of those, never a thread that serves every other call.
/// `None` only when the runtime is shutting down; a panic in `work` is passed on.
pub async fn blocking<T, F>(work: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Some(value),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// The answer when [`blocking`] could not run its work.
pub const SHUTTING_DOWN: &str = "Talon is shutting down; the file operation did not run";

/// Reads the first bytes (for binary detection) and rewinds.
pub fn head(opened: &mut Opened) -> std::io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut head = vec![0u8; 8192];
    let mut filled = 0;
    while filled < head.len() {
        let n = opened.file.read(&mut head[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    head.truncate(filled);
    opened.file.seek(SeekFrom::Start(0))?;
    Ok(head)
}

/// Largest file the edit tools load whole (edits of larger files should use exec tools).
pub const MAX_EDIT_BYTES: u64 = 64 << 20;

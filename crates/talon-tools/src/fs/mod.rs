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

/// Reads a whole opened file (callers bound the size first).
pub fn read_all(opened: &mut Opened) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(opened.stat.st_size.max(0) as usize);
    opened.file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

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

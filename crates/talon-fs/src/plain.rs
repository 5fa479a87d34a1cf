//! Path arithmetic by bytes for the paths walks produce, where `std::path`'s component parser
//! was the largest single cost of a search (a seventh of its instructions) and of a glob.
//!
//! A *plain* path is one whose `/`-separated segments are neither empty, `.` nor `..`, after an
//! optional leading `/`: every path a walk produces (`base/name/name`), and every canonical
//! path. Its components are exactly its segments, so a byte prefix that ends at a separator is
//! a component prefix, and the answers here are `std::path`'s own. Anything that is not plain
//! is handed to `std::path`, as before.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether `bytes` is a plain path (see the module docs); the empty path is not.
pub fn is_plain(bytes: &[u8]) -> bool {
    let rest = match bytes {
        [] => return false,
        [b'/'] => return true,
        [b'/', rest @ ..] => rest,
        rest => rest,
    };
    rest.split(|b| *b == b'/')
        .all(|segment| !segment.is_empty() && segment != b"." && segment != b"..")
}

/// `path.strip_prefix(base)`: by bytes when both are plain, by components otherwise.
pub fn strip_prefix<'a>(path: &'a Path, base: &Path) -> Option<&'a Path> {
    let (p, b) = (path.as_os_str().as_bytes(), base.as_os_str().as_bytes());
    if !(is_plain(p) && is_plain(b)) {
        return path.strip_prefix(base).ok();
    }
    let rest = p.strip_prefix(b)?;
    let rest = match rest {
        [] => rest,
        // The root: whatever follows it.
        _ if b == b"/" => rest,
        [b'/', rest @ ..] => rest,
        // `/ws2` is not under `/ws`.
        _ => return None,
    };
    Some(Path::new(OsStr::from_bytes(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the spelling, the answer is `std::path`'s.
    #[test]
    fn stripping_a_prefix_answers_as_std_path_does() {
        let cases = [
            ("/ws/src/main.rs", "/ws"),
            ("/ws", "/ws"),
            ("/ws2/a", "/ws"),
            ("/ws/a", "/"),
            ("/", "/"),
            ("a/b/c", "a"),
            ("a/b/c", "a/b/c"),
            ("ab/c", "a"),
            ("/ws/a", "ws"),
            ("ws/a", "/ws"),
            ("/ws//a", "/ws"),
            ("/ws/./a", "/ws"),
            ("/ws/../ws/a", "/ws"),
            ("/ws/a/", "/ws"),
            ("/ws/a", "/ws/"),
            ("", ""),
            ("a", ""),
        ];
        for (path, base) in cases {
            assert_eq!(
                strip_prefix(Path::new(path), Path::new(base)),
                Path::new(path).strip_prefix(base).ok(),
                "{path:?} - {base:?}"
            );
        }
    }

    #[test]
    fn plain_paths_have_no_empty_dot_or_dot_dot_segment() {
        for plain in ["/", "/a", "a", "a/b", "/a/.b", "/a/b..c", ".hidden"] {
            assert!(is_plain(plain.as_bytes()), "{plain:?}");
        }
        for not in ["", "//a", "a//b", "./a", "a/.", "a/../b", "a/", "/a/"] {
            assert!(!is_plain(not.as_bytes()), "{not:?}");
        }
    }
}

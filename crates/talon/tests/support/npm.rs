//! Real MCP servers from npm for the bridge tests, installed into the target directory once.
//! Shared by `talon` and `talon-bridge` tests (included by path).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of the reference server.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// The server's entry point, installed with npm into the target directory (once; concurrent
/// test binaries install into their own directory and the first rename wins).
pub fn server_everything(target_tmp: &str) -> PathBuf {
    let tmp = Path::new(target_tmp);
    let root = tmp.join("npm-peers");
    let entry = root.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if entry.exists() {
        return entry;
    }
    std::fs::create_dir_all(tmp).unwrap();
    let partial = tempfile_dir(tmp);
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&partial)
        .arg(EVERYTHING)
        .status()
        .expect("npm runs (the MCP bridge tests need Node.js and npm)");
    assert!(status.success(), "npm install {EVERYTHING} failed");
    if std::fs::rename(&partial, &root).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        entry.exists(),
        "{} is missing after npm install",
        entry.display()
    );
    entry
}

fn tempfile_dir(base: &Path) -> PathBuf {
    let dir = base.join(format!(
        "npm-peers-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

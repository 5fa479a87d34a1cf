//! Real MCP servers and clients from npm for the bridge and interop tests, installed into the
//! target directory once.
//! Shared by `talon` and `talon-bridge` tests (included by path).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of the reference server.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// The pinned version of the reference filesystem server.
pub const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The pinned version of the MCP inspector's command-line client.
pub const INSPECTOR_CLI: &str = "@modelcontextprotocol/inspector-cli@1.0.3";
/// The pinned version of Claude Code (for `claude mcp add` and `claude mcp list`).
pub const CLAUDE_CODE: &str = "@anthropic-ai/claude-code@2.1.332";

/// The pinned version of the official MCP conformance suite.
pub const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";

/// The conformance suite's command-line entry point (`node <entry> client|server …`),
/// installed like [`server_everything`]. Node 20 needs `tests/support/node_globsync_shim.mjs`
/// preloaded to run it.
pub fn conformance(target_tmp: &str) -> PathBuf {
    install(
        target_tmp,
        "npm-conformance",
        CONFORMANCE,
        "@modelcontextprotocol/conformance/dist/index.js",
    )
}

/// server-everything's entry point, installed with npm into the target directory (once).
pub fn server_everything(target_tmp: &str) -> PathBuf {
    install(
        target_tmp,
        "npm-peers",
        EVERYTHING,
        "@modelcontextprotocol/server-everything/dist/index.js",
    )
}

/// server-filesystem's entry point, installed like [`server_everything`].
pub fn server_filesystem(target_tmp: &str) -> PathBuf {
    install(
        target_tmp,
        "npm-peers-filesystem",
        FILESYSTEM,
        "@modelcontextprotocol/server-filesystem/dist/index.js",
    )
}

/// The inspector CLI's entry point (`node <entry> <server command…> --method …`), installed like
/// [`server_everything`].
pub fn inspector_cli(target_tmp: &str) -> PathBuf {
    install(
        target_tmp,
        "npm-clients-inspector",
        INSPECTOR_CLI,
        "@modelcontextprotocol/inspector-cli/build/index.js",
    )
}

/// Claude Code's executable (`<entry> mcp …`; the package installs a native binary), installed
/// like [`server_everything`].
pub fn claude_code(target_tmp: &str) -> PathBuf {
    install(
        target_tmp,
        "npm-clients-claude",
        CLAUDE_CODE,
        "@anthropic-ai/claude-code/bin/claude.exe",
    )
}

/// Installs `package` into `dir` under the target directory unless `entry` is already there
/// (concurrent test binaries install into their own directory and the first rename wins).
fn install(target_tmp: &str, dir: &str, package: &str, entry: &str) -> PathBuf {
    let tmp = Path::new(target_tmp);
    let root = tmp.join(dir);
    let entry = root.join("node_modules").join(entry);
    if entry.exists() {
        return entry;
    }
    std::fs::create_dir_all(tmp).unwrap();
    let partial = tempfile_dir(tmp);
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&partial)
        .arg(package)
        .status()
        .expect("npm runs (the MCP bridge tests need Node.js and npm)");
    assert!(status.success(), "npm install {package} failed");
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

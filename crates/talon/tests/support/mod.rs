//! Helpers shared by the binary's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Path of the `talon` binary under test.
pub fn talon() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_talon"))
}

/// A `talon` command with a clean environment (no user config, isolated data dir).
pub fn command(home: &Path) -> Command {
    let mut cmd = Command::new(talon());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TALON_DATA_DIR", home.join("data"))
        .current_dir(home);
    cmd
}

/// Runs the Python MCP SDK client script and returns its JSON report.
pub fn python_mcp_client(args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/mcp_client.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .expect("python3 must be installed (with `pip install mcp`) to run the MCP interop tests");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "MCP client failed (is the Python `mcp` package installed?)\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("client printed invalid JSON ({e}): {stdout}"))
}

/// A running `talon serve`, killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub home: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `talon serve --bind 127.0.0.1:0` with extra env and waits for its listening line.
pub fn serve(env: &[(&str, &str)], config: Option<&str>) -> Server {
    let home = tempfile::tempdir().unwrap();
    if let Some(toml) = config {
        std::fs::write(home.path().join("talon.toml"), toml).unwrap();
    }
    let (child, addr) = spawn_serve(home.path(), env);
    Server { child, addr, home }
}

/// Like [`serve`], in an existing home directory (the caller keeps it).
pub fn serve_in(home: &Path, env: &[(&str, &str)]) -> Running {
    let (child, addr) = spawn_serve(home, env);
    Running { child, addr }
}

/// A `talon serve` in a caller-owned directory, killed on drop.
pub struct Running {
    pub child: Child,
    pub addr: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_serve(home: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = command(home);
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .env("TALON_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("addr=").nth(1) {
                let addr = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let _ = tx.send(addr);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        if let Ok(addr) = rx.recv_timeout(Duration::from_millis(100)) {
            break addr;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("talon serve exited early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "talon serve did not report its address"
        );
    };
    (child, addr)
}

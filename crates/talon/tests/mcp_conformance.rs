//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, from npm, installed
//! into the target directory on first use) against Talon, at protocol versions 2025-11-25 and
//! 2026-07-28:
//!
//! * server scenarios against `/mcp` of the gateway router `talon serve` serves, over Talon's
//!   built-in tools plus the suite's test tools registered as Talon tools
//!   (`support/conformance_server.rs`), and the protocol scenarios against `talon serve` itself;
//! * client scenarios against the shipped `talon` binary, as an operator runs it: the suite
//!   launches `support/mcp_conformance/talon_client.mjs` once per scenario with the URL of the
//!   scenario's server, and it writes a talon.toml naming that server, signs in with
//!   `talon mcp-servers login` and makes the calls with `talon tool call` at a terminal.
//!
//! Each run passes the suite an expected-failures file (`tests/support/mcp_conformance/`): the
//! scenarios judged not to apply to a general-purpose client or server, and the ones still
//! failing, each with the reason. The suite exits non-zero on any other failure *and* on a listed
//! scenario that passes, so the lists cannot go stale. Everything runs on loopback; only the npm
//! install needs the network. docs/MCP_CONFORMANCE.md has the command and the results.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use crate::support::npm;

#[path = "support/conformance_server.rs"]
mod conformance_server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const VERSIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

fn support_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(name)
}

/// `node <suite> <args…>` with the Node 20 shim preloaded and no proxy in the way.
fn suite(args: &[&str]) -> Command {
    let entry = npm::conformance(env!("CARGO_TARGET_TMPDIR"));
    let mut cmd = Command::new("node");
    cmd.arg(entry).args(args);
    cmd.env(
        "NODE_OPTIONS",
        format!(
            "--import {}",
            support_file("node_globsync_shim.mjs").display()
        ),
    );
    for proxy in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(proxy);
    }
    cmd
}

/// Passed and failed checks per scenario, from the suite's `checks.json` files under `dir`
/// (`<scenario>-<timestamp>/`, auth scenarios one level down in `auth/`).
fn tally(dir: &Path) -> BTreeMap<String, (usize, usize)> {
    let mut out = BTreeMap::new();
    tally_into(dir, "", &mut out);
    out
}

fn tally_into(dir: &Path, prefix: &str, out: &mut BTreeMap<String, (usize, usize)>) {
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            if entry.path().is_dir() {
                tally_into(&entry.path(), &format!("{prefix}{name}/"), out);
            }
            continue;
        };
        // `<scenario>-<ISO timestamp>`; the timestamp starts with the year.
        let scenario = name.rfind("-20").map_or(name.as_str(), |i| &name[..i]);
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap();
        let failing: Vec<&Value> = checks
            .iter()
            .filter(|c| matches!(c["status"].as_str(), Some("FAILURE" | "WARNING")))
            .collect();
        // Why, for whoever reads the output (listed failures included).
        for check in &failing {
            eprintln!(
                "    {prefix}{scenario}: {} {}: {}",
                check["status"].as_str().unwrap_or_default(),
                check["id"].as_str().unwrap_or_default(),
                check["errorMessage"].as_str().unwrap_or_default()
            );
        }
        let failed = failing.len();
        let slot = out.entry(format!("{prefix}{scenario}")).or_insert((0, 0));
        slot.0 += checks.len() - failed;
        slot.1 += failed;
    }
}

/// Runs one role's scenarios at `version` and asserts the suite's verdict against the
/// expected-failures file; prints the scenario tally (for docs/MCP_CONFORMANCE.md).
fn run(mut suite: Command, role: &str, version: &str, target: &[&str]) {
    let out = tempfile::tempdir().unwrap();
    let baseline = support_file(&format!("mcp_conformance/{role}-{version}.yml"));
    let out_dir = out.path().to_str().unwrap();
    let baseline_path = baseline.to_str().unwrap();
    let mut args = vec![role];
    args.extend_from_slice(target);
    args.extend_from_slice(&[
        "--suite",
        "all",
        "--spec-version",
        version,
        "--expected-failures",
        baseline_path,
        "-o",
        out_dir,
    ]);
    let output = suite.args(&args).output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    let tally = tally(out.path());
    let passed = tally.values().filter(|(_, failed)| *failed == 0).count();
    eprintln!(
        "{role} scenarios at {version}: {passed} of {} pass",
        tally.len()
    );
    for (scenario, (ok, failed)) in &tally {
        eprintln!("  {scenario}: {ok} checks passed, {failed} failed");
    }
    assert!(
        !tally.is_empty(),
        "the suite ran no {role} scenarios: {report}"
    );
    assert!(
        output.status.success(),
        "{role} conformance at {version} differs from {}:\n{report}\n{}",
        baseline.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The client the suite launches: `support/mcp_conformance/talon_client.mjs`, an operator of the
/// shipped `talon` binary scripted (its talon.toml, `talon mcp-servers login`, `talon tools list`,
/// `talon tool call` at a terminal), given the binary in `TALON_BIN`.
fn client_command() -> String {
    format!(
        "node {}",
        support_file("mcp_conformance/talon_client.mjs").display()
    )
}

/// The suite, run against the shipped binary.
fn client_suite() -> Command {
    let mut cmd = suite(&[]);
    cmd.env("TALON_BIN", support::talon());
    cmd
}

#[test]
fn client_scenarios_at_2025_11_25() {
    run_client(VERSIONS[0], false);
}

#[test]
fn client_scenarios_at_2026_07_28() {
    run_client(VERSIONS[1], false);
}

/// Talon configured with no protocol version (`auto`, the default) passes the scenarios of
/// either protocol: `server/discover` first, and `initialize` when the server does not take it.
#[test]
fn client_scenarios_at_2025_11_25_with_protocol_version_auto() {
    run_client(VERSIONS[0], true);
}

#[test]
fn client_scenarios_at_2026_07_28_with_protocol_version_auto() {
    run_client(VERSIONS[1], true);
}

/// The client scenarios at `version`, Talon configured for that version or, with `auto`, for
/// none.
fn run_client(version: &str, auto: bool) {
    let command = client_command();
    let mut suite = client_suite();
    if auto {
        suite.env("TALON_CONFORMANCE_AUTO", "1");
    }
    run(suite, "client", version, &["--command", &command]);
}

/// `talon serve` itself (its runtime, default configuration) passes the scenarios that need no
/// test tools; the full runs below serve the same router with the test tools added.
#[test]
fn talon_serve_passes_the_protocol_scenarios() {
    let server = support::serve(&[], None);
    let url = format!("http://{}/mcp", server.addr);
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "logging-set-level",
        "dns-rebinding-protection",
        "server-session-lifecycle",
        "server-sse-multiple-streams",
    ] {
        let out = tempfile::tempdir().unwrap();
        let output = suite(&[
            "server",
            "--url",
            &url,
            "--scenario",
            scenario,
            "--spec-version",
            VERSIONS[0],
            "-o",
            out.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
        let tally = tally(out.path());
        assert!(
            output.status.success() && !tally.is_empty() && tally.values().all(|(_, f)| *f == 0),
            "{scenario} against talon serve: {tally:?}\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

/// Server scenarios run against Talon's gateway router with the suite's test tools registered
/// as Talon tools (see `support/conformance_server.rs`).
#[test]
fn server_scenarios_at_2025_11_25() {
    let server = conformance_server::serve();
    let url = format!("http://{}/mcp", server.addr);
    run(suite(&[]), "server", VERSIONS[0], &["--url", &url]);
}

#[test]
fn server_scenarios_at_2026_07_28() {
    let server = conformance_server::serve();
    let url = format!("http://{}/mcp", server.addr);
    run(suite(&[]), "server", VERSIONS[1], &["--url", &url]);
}

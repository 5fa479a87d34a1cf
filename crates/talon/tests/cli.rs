//! `talon tools list` and `talon tool call`: output, exit codes, configuration errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use support::command;

fn run(args: &[&str], env: &[(&str, &str)], config: Option<&str>) -> (i32, String, String) {
    let home = tempfile::tempdir().unwrap();
    if let Some(toml) = config {
        std::fs::write(home.path().join("talon.toml"), toml).unwrap();
    }
    let mut cmd = command(home.path());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn tools_list_table_json_and_profiles() {
    let (code, stdout, _) = run(&["tools", "list"], &[], None);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("NAME"), "{stdout}");
    assert!(
        stdout.contains("datetime") && stdout.contains("TodoWrite"),
        "{stdout}"
    );

    let (code, stdout, _) = run(&["tools", "list", "--json"], &[], None);
    assert_eq!(code, 0);
    let tools: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted");
    for expected in [
        "TodoWrite",
        "datetime",
        "edit",
        "list_files",
        "read_file",
        "write_file",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    // One tool per job by default (issue 23); --dialect shows the others.
    assert!(!names.contains(&"Read"), "{names:?}");
    let (code, stdout, _) = run(
        &["tools", "list", "--json", "--dialect", "claude_code"],
        &[],
        None,
    );
    assert_eq!(code, 0);
    let claude: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let claude: Vec<&str> = claude
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        claude.contains(&"Read") && !claude.contains(&"read_file") && claude.contains(&"datetime"),
        "{claude:?}"
    );
    let (code, _, stderr) = run(&["tools", "list", "--dialect", "klingon"], &[], None);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("use goclaw, claude_code or both"),
        "{stderr}"
    );
    let datetime = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "datetime")
        .unwrap();
    assert_eq!(datetime["groups"], serde_json::json!(["automation"]));
    assert_eq!(datetime["side_effect"], "none");

    let (code, stdout, _) = run(
        &["tools", "list", "--profile", "minimal", "--json"],
        &[],
        None,
    );
    // The seeds' minimal profile: session_status only.
    assert_eq!(code, 0);
    let minimal: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = minimal
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["session_status"]);

    let (code, stdout, _) = run(
        &["tools", "list", "--profile", "coding", "--json"],
        &[],
        None,
    );
    assert_eq!(code, 0);
    assert!(
        stdout.contains("TodoWrite") && !stdout.contains("datetime"),
        "{stdout}"
    );
}

#[test]
fn agent_policy_from_config() {
    let config = "[agents.clock.tools]\nallow = [\"group:automation\"]\n";
    let (code, stdout, _) = run(
        &["tools", "list", "--agent", "clock", "--json"],
        &[],
        Some(config),
    );
    assert_eq!(code, 0);
    assert!(
        stdout.contains("datetime") && !stdout.contains("TodoWrite"),
        "{stdout}"
    );
    let (code, _, stderr) = run(&["tools", "list", "--agent", "nobody"], &[], Some(config));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown agent \"nobody\"; known agents: clock, default")
            && stderr.contains("talon agents create nobody"),
        "{stderr}"
    );
    let (code, _, stderr) = run(
        &[
            "tool",
            "call",
            "TodoWrite",
            "--agent",
            "clock",
            "--args",
            "{\"todos\":[]}",
        ],
        &[],
        Some(config),
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("tool not allowed by policy: TodoWrite"),
        "{stderr}"
    );
}

#[test]
fn tool_call_exit_codes() {
    let (code, stdout, _) = run(
        &[
            "tool",
            "call",
            "datetime",
            "--args",
            "{\"timezone\":\"UTC\"}",
        ],
        &[],
        None,
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("Time zone: UTC"), "{stdout}");

    let (code, _, stderr) = run(
        &[
            "tool",
            "call",
            "datetime",
            "--args",
            "{\"timezone\":\"Nope/Nope\"}",
        ],
        &[],
        None,
    );
    assert_eq!(code, 1, "a tool error exits 1");
    assert!(stderr.contains("unknown time zone"), "{stderr}");

    let (code, _, stderr) = run(&["tool", "call", "datetme"], &[], None);
    assert_eq!(code, 2, "an unknown tool is a usage error");
    assert!(stderr.contains("Did you mean: datetime"), "{stderr}");

    let (code, _, stderr) = run(
        &["tool", "call", "datetime", "--args", "{not json"],
        &[],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--args is not valid JSON"), "{stderr}");

    let (code, _, stderr) = run(
        &["tool", "call", "datetime", "--args", "{\"timezone\": 3}"],
        &[],
        None,
    );
    assert_eq!(code, 2, "invalid arguments are a usage error");
    assert!(stderr.contains("field `timezone`"), "{stderr}");

    let (code, stdout, _) = run(&["tool", "call", "datetime", "--json"], &[], None);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["tool"], "datetime");
    assert_eq!(v["result"]["is_error"], false);

    let (code, _, _) = run(&["tool"], &[], None);
    assert_eq!(code, 2, "clap usage errors exit 2");
}

#[test]
fn permission_mode_from_config_applies() {
    let config = "[tools]\npermission_mode = \"plan\"\n";
    // TodoWrite is side-effect free (as in Claude Code), so plan mode allows it.
    let (code, _, stderr) = run(
        &["tool", "call", "TodoWrite", "--args", "{\"todos\":[]}"],
        &[],
        Some(config),
    );
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn bad_configuration_names_the_key_and_exits_2() {
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&str, Env, &str)] = &[
        (
            "[tools]\nprofil = \"full\"\n",
            &[],
            "unknown field: found `profil`",
        ),
        (
            "[tools]\nprofile = \"codng\"\n",
            &[],
            "tools.profile: unknown profile \"codng\"",
        ),
        (
            "[tools]\ndeny = [\"group:fss\"]\n",
            &[],
            "tools.deny[0]: unknown tool group \"fss\"",
        ),
        (
            "[tools]\npermission_mode = \"yolo\"\n",
            &[],
            "tools.permission_mode: unknown permission mode \"yolo\"",
        ),
        ("[tools\n", &[], "talon.toml"),
        (
            "",
            &[("TALON_TOOLS__RATE_LIMIT_PER_HOUR", "lots")],
            "tools.rate_limit_per_hour: invalid type",
        ),
        (
            "",
            &[("TALON_TOOLS__PROFILE", "huge")],
            "tools.profile: unknown profile \"huge\"",
        ),
    ];
    for (config, env, expected) in cases {
        let (code, _, stderr) = run(&["tools", "list"], env, Some(config));
        assert_eq!(code, 2, "{config:?} {env:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{config:?} {env:?}: expected {expected:?} in {stderr}"
        );
    }
    let (code, _, stderr) = run(
        &["--config", "/nonexistent/talon.toml", "tools", "list"],
        &[],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("/nonexistent/talon.toml does not exist"),
        "{stderr}"
    );
}

#[test]
fn env_overrides_the_file() {
    let config = "[tools]\nprofile = \"minimal\"\n";
    let (code, stdout, _) = run(
        &["tools", "list", "--json"],
        &[("TALON_TOOLS__PROFILE", "full")],
        Some(config),
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("datetime"), "{stdout}");
}

#[test]
fn hooks_from_config_block_calls() {
    let config = "[[hooks.pre_tool_use]]\nmatcher = \"datetime\"\ncommand = \"echo 'clock is off limits' >&2; exit 2\"\n";
    let (code, _, stderr) = run(&["tool", "call", "datetime"], &[], Some(config));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("PreToolUse hook blocked datetime: clock is off limits"),
        "{stderr}"
    );
}

#[test]
fn configured_server_ips_are_scrubbed() {
    // The datetime tool cannot print an IP, so use a hook's context, which is scrubbed like the
    // rest of the output.
    let config = "[scrub]\nserver_ips = [\"203.0.113.7\"]\n\n[[hooks.post_tool_use]]\ncommand = \"echo 'served by 203.0.113.7'\"\n";
    let (code, stdout, _) = run(&["tool", "call", "datetime"], &[], Some(config));
    assert_eq!(code, 0);
    assert!(stdout.contains("served by [SERVER_IP]"), "{stdout}");
    assert!(!stdout.contains("203.0.113.7"), "{stdout}");
}

#[test]
fn dialect_is_chosen_by_policy() {
    let only_goclaw = "[tools]\ndeny = [\"group:claude_code\"]\n";
    let (code, stdout, _) = run(&["tools", "list", "--json"], &[], Some(only_goclaw));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("\"read_file\"") && !stdout.contains("\"Read\""),
        "{stdout}"
    );
    let only_claude = "[tools]\nallow = [\"group:claude_code\"]\n";
    let (_, stdout, _) = run(&["tools", "list", "--json"], &[], Some(only_claude));
    assert!(
        stdout.contains("\"Read\"")
            && stdout.contains("\"Grep\"")
            && !stdout.contains("\"read_file\""),
        "{stdout}"
    );
}

/// A data directory inside the workspace is refused at start (issue 21 item 2's open risk: a
/// command could rename a directory above it and plant a store whose MCP servers are host
/// commands); with one outside, the file tools work from the CLI.
#[test]
fn h22_a_data_dir_inside_the_workspace_is_refused_and_file_tools_work_outside() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("notes.txt"), "hello\n").unwrap();
    let ws = home.path().to_str().unwrap();
    let call = |args: &[&str]| {
        let out = command(home.path()).args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for data in ["data", "./nested/data"] {
        let out = command(home.path())
            .env("TALON_DATA_DIR", data)
            .args(["tool", "call", "list_files", "--workspace", ws])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{data}: {stderr}");
        assert!(
            stderr.contains("the data directory") && stderr.contains("inside the workspace"),
            "{data}: {stderr}"
        );
        assert!(!home.path().join("data").exists() && !home.path().join("nested").exists());
    }
    let (code, stdout, stderr) = call(&["tool", "call", "list_files", "--workspace", ws]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("notes.txt"), "{stdout}");
    let (code, stdout, _) = call(&[
        "tool",
        "call",
        "write_file",
        "--workspace",
        ws,
        "--args",
        "{\"path\":\"out/new.txt\",\"content\":\"x\"}",
    ]);
    assert_eq!(
        code, 0,
        "tool call runs write tools without asking: {stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("out/new.txt")).unwrap(),
        "x"
    );
}

#[test]
fn a_failed_write_leaves_the_file_and_no_temporary_behind() {
    // A file-size limit makes the write fail part-way, as a full disk would.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("keep.txt"), "original").unwrap();
    let big = "x".repeat(4_000_000);
    let args = serde_json::json!({"path": "keep.txt", "content": big}).to_string();
    // First start creates the store; the limit (1 MiB) leaves the database room to work, so only
    // the 4 MB file write fails.
    let status = support::command(home.path())
        .args(["tools", "list"])
        .output()
        .unwrap()
        .status;
    assert!(status.success());
    let script = format!(
        "trap '' XFSZ; exec prlimit --fsize=1048576 {} tool call write_file --workspace {} --args - < args.json",
        support::talon().display(),
        home.path().display(),
    );
    std::fs::write(home.path().join("args.json"), &args).unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("HOME", home.path())
        .env("TALON_DATA_DIR", support::data_dir(home.path()))
        .current_dir(home.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("keep.txt"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("keep.txt")).unwrap(),
        "original"
    );
    let leftovers: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".talon-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `talon …` in `home` with `stdin`: status, stdout, stderr.
fn run_in(home: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = support::output_with_input(command(home).args(args), stdin);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 23: the CLI an operator expects: secrets deleted and listed as JSON (an empty one
/// refused), agents' files read and listed, an agent deleted, `talon init` writing a commented
/// configuration Talon reads, `talon config show` naming where each value came from with
/// secrets masked, completions, `doctor --json` and a version with its commit.
#[test]
fn the_operators_cli_is_complete() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    let (code, _, stderr) = run_in(home, &["secrets", "set", "empty"], "\n");
    assert_eq!(code, 2, "an empty secret is refused");
    assert!(stderr.contains("is empty"), "{stderr}");
    assert_eq!(run_in(home, &["secrets", "set", "api"], "s3cret\n").0, 0);
    let (code, listed, _) = run_in(home, &["secrets", "list", "--json"], "");
    assert_eq!((code, listed.trim()), (0, "[\"api\"]"));
    assert_eq!(run_in(home, &["secrets", "delete", "api"], "").0, 0);
    let (code, _, stderr) = run_in(home, &["secrets", "delete", "api"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("no secret \"api\""), "{stderr}");

    assert_eq!(run_in(home, &["agents", "create", "helper"], "").0, 0);
    let set = run_in(
        home,
        &["agents", "set-file", "helper", "SOUL.md", "--from", "-"],
        "Be kind.\n",
    );
    assert_eq!(set.0, 0, "{set:?}");
    let (code, files, _) = run_in(home, &["agents", "list-files", "helper", "--json"], "");
    assert_eq!((code, files.trim()), (0, "[\"SOUL.md\"]"));
    let (code, soul, _) = run_in(home, &["agents", "get-file", "helper", "SOUL.md"], "");
    assert_eq!((code, soul.as_str()), (0, "Be kind.\n"));
    let (code, _, stderr) = run_in(home, &["agents", "get-file", "helper", "TOOLS.md"], "");
    assert_eq!(
        code, 2,
        "a file the agent lacks is the caller's to fix: {stderr}"
    );
    assert!(stderr.contains("list-files"), "{stderr}");
    let (code, _, stderr) = run_in(home, &["agents", "create", "odd", "--settings", "{"], "");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not valid JSON"), "{stderr}");
    let (code, _, stderr) = run_in(home, &["agents", "delete", "default"], "");
    assert_eq!(code, 2, "the default agent stays");
    assert!(stderr.contains("default agent"), "{stderr}");
    assert_eq!(run_in(home, &["agents", "delete", "helper"], "").0, 0);
    let (code, _, stderr) = run_in(home, &["agents", "list-files", "helper"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("no agent \"helper\""), "{stderr}");

    // `talon init` writes a private, commented configuration that Talon reads as it is.
    let config_dir = tempfile::tempdir().unwrap();
    let path = config_dir.path().join("talon/talon.toml");
    let path_arg = path.to_str().unwrap();
    let (code, wrote, stderr) = run_in(home, &["init", "--path", path_arg], "");
    assert_eq!(code, 0, "{stderr}");
    assert!(wrote.contains(path_arg), "{wrote}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        run_in(home, &["init", "--path", path_arg], "").0,
        2,
        "never overwritten"
    );
    let tools = run_in(home, &["--config", path_arg, "tools", "list"], "");
    assert_eq!(tools.0, 0, "{tools:?}");
    // `config show`: values with their sources, secrets masked.
    std::fs::write(
        &path,
        "[gateway]\ntoken = \"hunter2\"\nbind = \"127.0.0.1:9000\"\n[mcp_servers.gh]\ncommand = \"gh-mcp\"\nargs = [\"--api-key\", \"plain-key-value\"]\nenv = { GH_PAT = \"ghp_live_value\" }\n",
    )
    .unwrap();
    let mut show = command(home);
    show.args(["--config", path_arg, "config", "show"])
        .env("TALON_TOOLS__PROFILE", "coding");
    let out = show.output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        !shown.contains("ghp_live_value"),
        "an MCP server's env is masked: {shown}"
    );
    assert!(
        !shown.contains("plain-key-value"),
        "the value after a credential flag is masked, as the gateway tool masks it: {shown}"
    );
    assert!(shown.contains("gateway.token = \"[redacted]\""), "{shown}");
    assert!(
        shown.contains(&format!("gateway.bind = \"127.0.0.1:9000\"  # {path_arg}")),
        "{shown}"
    );
    assert!(
        shown.contains("tools.profile = \"coding\"  # `TALON_`"),
        "{shown}"
    );

    let (code, script, _) = run_in(home, &["completions", "bash"], "");
    assert_eq!(code, 0);
    assert!(
        script.contains("talon") && script.contains("approvals"),
        "bash completion"
    );
    let (code, version, _) = run_in(home, &["--version"], "");
    assert_eq!(code, 0);
    assert!(
        version.starts_with("talon ") && version.contains("(commit "),
        "{version}"
    );
    let (_, doctor, _) = run_in(home, &["doctor", "--json"], "");
    let doctor: serde_json::Value = serde_json::from_str(&doctor).unwrap();
    assert!(
        doctor["backends"].as_array().is_some_and(|b| !b.is_empty()),
        "{doctor}"
    );
    assert!(doctor["test_command"]["ran"].is_boolean(), "{doctor}");
    let memory = doctor["memory_search"].as_str().unwrap();
    assert!(
        memory.starts_with("full text only: no [memory.embeddings]")
            && memory.contains("sqlite-vec v0.1.9"),
        "{memory}"
    );
}

/// The README's fenced blocks of `language`, in order.
fn readme_blocks(language: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) if lang.trim() == language => current = Some(String::new()),
            (Some(block), Some(_)) => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Issue 23: the README cannot drift. Every configuration example is checked as a start checks
/// it (`talon config show` validates keys, values, policy, `[exec]` and MCP servers); every
/// command the "Using it" list names exists; the offline session runs as written, against the
/// mock model with the example script, twice without using it up.
#[test]
fn the_readme_examples_run_as_written() {
    let toml = readme_blocks("toml");
    assert!(toml.len() >= 3, "the README's configuration examples");
    for (i, block) in toml.iter().enumerate() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("talon.toml"), block).unwrap();
        let config = support::config_file(home.path()).unwrap();
        let out = command(home.path())
            .args(["--config", config.to_str().unwrap(), "config", "show"])
            .env_remove("REMOTE_TOKEN")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README toml block {i} does not load:\n{block}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let sh = readme_blocks("sh");
    let using = sh
        .iter()
        .find(|b| b.contains("talon tools list"))
        .expect("the Using it list");
    let home = tempfile::tempdir().unwrap();
    for line in using.lines().filter(|l| l.starts_with("talon ")) {
        let words: Vec<&str> = line
            .split_whitespace()
            .skip(1)
            .map(|w| w.split('|').next().unwrap_or(w))
            .take_while(|w| {
                !w.is_empty()
                    && !w.starts_with('-')
                    && w.chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
            })
            .collect();
        let out = command(home.path())
            .args(&words)
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README: `talon {}` is not a command ({line})\n{}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The offline session: the README's lines, run by sh with `talon` on PATH, the mock started
    // as its first line says (on a free port instead of 8791).
    let session = sh
        .iter()
        .find(|b| b.starts_with("talon mock-provider"))
        .expect("the offline session");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut lines = session.lines();
    let mock_line = lines.next().unwrap().replace("8791", &port);
    let script: String = lines
        .map(|l| format!("{}\n", l.replace("8791", &port)))
        .collect::<String>()
        .replace(
            "talon chat --session demo      ",
            "talon chat --session demo < /dev/null",
        );
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = support::talon().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut mock = std::process::Command::new("sh")
        .args(["-c", &format!("exec {mock_line}")])
        .current_dir(&repo)
        .env("PATH", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(mock.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains(&port), "{first}");
    let out = std::process::Command::new("sh")
        .args(["-ec", &script])
        .current_dir(&repo)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", &path)
        // The data directory a user gets (`~/.local/share/talon`, outside the clone the
        // commands run in), wherever the target directory is.
        .output()
        .unwrap();
    let _ = mock.kill();
    let _ = mock.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script}\n{stdout}\n{stderr}");
    assert_eq!(
        stdout.matches("Done: I read the clock").count(),
        2,
        "each prompt gets the scripted answer: {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("you: and now?"),
        "the history is shown: {stderr}"
    );
}

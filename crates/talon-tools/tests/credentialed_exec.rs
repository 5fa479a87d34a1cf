//! Credentialed exec through the pipeline: a fake `gh` (a shell script) registered in a real
//! store with a token, granted to one agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::any::Any;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use talon_core::policy::{AgentToolPolicy, PolicyConfig, PolicyEngine};
use talon_core::{Pipeline, Registry, ScriptAnalyzer, ToolCall, ToolOutput};
use talon_exec::{SandboxMode, ShellConfig};
use talon_store::{CliCredentialSpec, EncryptionKey, Store, StoreConfig};
use talon_tools::runtime::approvals::{AgentExecPolicy, ExecApprovals};
use talon_tools::runtime::script::ShellAnalyzer;
use talon_tools::{BuiltinConfig, FsConfig};

/// Matches no built-in scrub pattern: only the per-call scrub set can redact it.
const TOKEN: &str = "zq7-plain-looking-value-4411";

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    bin: PathBuf,
    pipeline: Pipeline,
}

/// The fake `gh`: proves the token reached it without the test reading it back, echoes it (to
/// be scrubbed), prints its arguments and the names of its environment; `fail` exits 3.
fn script() -> String {
    format!(
        "#!/bin/sh\nif [ \"$GH_TOKEN\" = \"{TOKEN}\" ]; then echo token-ok; fi\necho \"token=$GH_TOKEN\"\n\
         echo \"args=$*\"\necho \"vars=$(env | cut -d= -f1 | sort | tr '\\n' ' ')\"\n\
         if [ \"$1\" = fail ]; then echo 'could not resolve api.github.com' >&2; exit 3; fi\n"
    )
}

async fn env(mode: SandboxMode) -> Env {
    env_with(mode, None).await
}

/// [`env`] with a tool policy in the pipeline.
async fn env_with(mode: SandboxMode, policy: Option<PolicyConfig>) -> Env {
    env_built(mode, |config| match policy {
        None => common::pipeline(config),
        Some(policy) => {
            let registry = Arc::new(Registry::new());
            talon_tools::register_builtin(&registry, config).unwrap();
            Pipeline::builder(registry)
                .rate_limiter(None)
                .policy(PolicyEngine::new(policy).unwrap())
                .script_analyzer(Arc::new(ShellAnalyzer))
                .build()
                .unwrap()
        }
    })
    .await
}

/// [`env`] with the pipeline `build` makes over the built-in tools' configuration.
async fn env_built(mode: SandboxMode, build: impl FnOnce(&BuiltinConfig) -> Pipeline) -> Env {
    // Under the target directory: the sandbox's private /tmp would hide a binary kept in /tmp.
    let dir = tempfile::tempdir_in(common::sandbox_visible_tmp()).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, bin, data) = (root.join("ws"), root.join("bin"), root.join("data"));
    for d in [&ws, &bin, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    let gh = bin.join("gh");
    std::fs::write(&gh, script()).unwrap();
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = Store::open(&StoreConfig::sqlite_in(&data))
        .await
        .unwrap()
        .unlock(EncryptionKey::generate())
        .await
        .unwrap();
    let preset = talon_exec::credentialed::preset("gh").unwrap();
    let spec = CliCredentialSpec {
        binary_name: "gh".into(),
        binary_path: gh.display().to_string(),
        deny_args: preset.deny_args.iter().map(|s| s.to_string()).collect(),
        deny_verbose: preset.deny_verbose.iter().map(|s| s.to_string()).collect(),
        timeout_seconds: 30,
        tips: "GitHub CLI".into(),
        destinations: Vec::new(),
    };
    let env = BTreeMap::from([("GH_TOKEN".to_string(), TOKEN.to_string())]);
    store.add_cli_credential(&spec, &env).await.unwrap();
    store.grant_cli_credential("gh", "ops").await.unwrap();
    let config = BuiltinConfig {
        fs: FsConfig::new(vec![], vec![]),
        store: Some(store),
        shell: ShellConfig {
            mode,
            ..ShellConfig::default()
        },
        ..BuiltinConfig::default()
    };
    let pipeline = build(&config);
    Env {
        _dir: dir,
        ws,
        bin,
        pipeline,
    }
}

impl Env {
    async fn call(&self, agent: &str, tool: &str, args: Value) -> ToolOutput {
        let mut ctx = common::context(&self.ws, "s");
        ctx.agent_key = Some(agent.to_string());
        self.pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await
            .output
    }

    fn gh(&self) -> String {
        self.bin.join("gh").display().to_string()
    }
}

fn assert_ran_with_token(out: &ToolOutput, args: &str) {
    assert!(!out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.starts_with("token-ok\n"),
        "the token reached the binary: {}",
        out.for_llm
    );
    assert!(
        out.for_llm.contains(&format!("args={args}\n")),
        "{}",
        out.for_llm
    );
    assert!(!out.for_llm.contains(TOKEN), "scrubbed: {}", out.for_llm);
    assert!(out.for_llm.contains("token=[REDACTED]"), "{}", out.for_llm);
}

#[tokio::test]
async fn exec_routes_a_granted_binary_and_scrubs_its_credentials() {
    let e = env(SandboxMode::Off).await;
    let out = e
        .call("ops", "exec", json!({"command": "gh api user"}))
        .await;
    assert_ran_with_token(&out, "api user");
    let vars = out
        .for_llm
        .lines()
        .find(|l| l.starts_with("vars="))
        .unwrap();
    let names: Vec<&str> = vars["vars=".len()..].split_whitespace().collect();
    for name in &names {
        assert!(
            ["GH_TOKEN", "HOME", "LANG", "PATH", "PWD", "USER"].contains(name),
            "minimal environment, got {name}: {vars}"
        );
    }
    // The configured absolute path is the same binary; so is the credentialed_exec tool.
    let out = e
        .call(
            "ops",
            "exec",
            json!({"command": format!("{} repo view 'a b'", e.gh())}),
        )
        .await;
    assert_ran_with_token(&out, "repo view a b");
    let out = e
        .call(
            "ops",
            "credentialed_exec",
            json!({"command": "gh api user"}),
        )
        .await;
    assert_ran_with_token(&out, "api user");
    // Claude Code's Bash routes the same way.
    let out = e
        .call("ops", "Bash", json!({"command": "gh api user"}))
        .await;
    assert_ran_with_token(&out, "api user");
}

#[tokio::test]
async fn an_ungranted_agent_runs_the_shell_without_credentials() {
    let e = env(SandboxMode::Off).await;
    let out = e
        .call(
            "dev",
            "exec",
            json!({"command": format!("{} api user", e.gh())}),
        )
        .await;
    assert!(!out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.starts_with("token=\n"),
        "no token in the shell: {}",
        out.for_llm
    );
    let out = e
        .call(
            "dev",
            "credentialed_exec",
            json!({"command": "gh api user"}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.for_llm.contains("no credentialed tools"),
        "{}",
        out.for_llm
    );
    let out = e
        .call("ops", "credentialed_exec", json!({"command": "aws s3 ls"}))
        .await;
    assert!(out.is_error);
    assert!(
        out.for_llm.contains("Available: gh (GitHub CLI)"),
        "{}",
        out.for_llm
    );
}

/// Issue 21 (architecture): `exec` handed granted commands to credentialed execution inside the
/// tool, after the pipeline had authorized only `exec`, so a policy denying `credentialed_exec`
/// to an agent did not stop `exec gh …` from running with the stored token.
#[tokio::test]
async fn h21_arch_policy_on_credentialed_exec_governs_the_exec_hand_off() {
    let policy = PolicyConfig {
        agents: BTreeMap::from([(
            "ops".to_string(),
            AgentToolPolicy {
                deny: vec!["credentialed_exec".into()],
                ..Default::default()
            },
        )]),
        ..Default::default()
    };
    let e = env_with(SandboxMode::Off, Some(policy)).await;
    let out = e
        .call(
            "ops",
            "credentialed_exec",
            json!({"command": "gh api user"}),
        )
        .await;
    assert!(out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("not allowed by policy"),
        "{}",
        out.for_llm
    );
    for tool in ["exec", "Bash"] {
        let out = e
            .call(
                "ops",
                tool,
                json!({"command": format!("{} api user", e.gh())}),
            )
            .await;
        assert!(!out.is_error, "{tool}: {}", out.for_llm);
        assert!(
            out.for_llm.starts_with("token=\n"),
            "{tool} ran without the credentials: {}",
            out.for_llm
        );
    }
    // The same grant still works where the policy allows the tool.
    let open = env(SandboxMode::Off).await;
    let out = open
        .call("ops", "exec", json!({"command": "gh api user"}))
        .await;
    assert_ran_with_token(&out, "api user");
}

#[tokio::test]
async fn shell_syntax_spoofing_and_denied_arguments_are_refused() {
    let e = env(SandboxMode::Off).await;
    let marker = e.ws.join("ran");
    for command in [
        format!("gh api user; touch {}", marker.display()),
        format!("touch {} && gh api user", marker.display()),
        "gh api user | head".to_string(),
        "gh $(id)".to_string(),
        "gh api user > out.txt".to_string(),
    ] {
        let out = e.call("ops", "exec", json!({"command": command})).await;
        assert!(out.is_error, "{command}: {}", out.for_llm);
        assert!(
            out.for_llm.contains("without a shell"),
            "{command}: {}",
            out.for_llm
        );
    }
    assert!(
        !marker.exists() && !e.ws.join("out.txt").exists(),
        "nothing ran"
    );

    std::fs::write(e.ws.join("gh"), script()).unwrap();
    std::fs::set_permissions(e.ws.join("gh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = e
        .call("ops", "exec", json!({"command": "./gh api user"}))
        .await;
    assert!(out.is_error);
    assert!(out.for_llm.contains("path verification"), "{}", out.for_llm);

    for command in ["gh auth token", "gh api -v user"] {
        let out = e.call("ops", "exec", json!({"command": command})).await;
        assert!(out.is_error, "{command}");
        assert!(out.for_llm.contains("pattern"), "{}", out.for_llm);
    }
    let out = e
        .call(
            "ops",
            "exec",
            json!({"command": "gh api user", "background": true}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.for_llm.contains("cannot run in the background"),
        "{}",
        out.for_llm
    );
}

#[tokio::test]
async fn it_runs_inside_the_sandbox_and_explains_a_missing_network() {
    if talon_exec::sandbox::detect().is_err() {
        panic!("bubblewrap is required for this test (.ci/run installs it)");
    }
    let e = env(SandboxMode::All).await;
    let out = e
        .call("ops", "exec", json!({"command": "gh api user"}))
        .await;
    assert_ran_with_token(&out, "api user");
    let out = e.call("ops", "exec", json!({"command": "gh fail"})).await;
    assert!(out.is_error);
    assert!(out.for_llm.contains("Exit code 3"), "{}", out.for_llm);
    assert!(
        out.for_llm.contains("has no network"),
        "the likely cause is named: {}",
        out.for_llm
    );
    assert!(!out.for_llm.contains(TOKEN));
}

/// Analyses as [`ShellAnalyzer`] does, counting, and adds a word to the first command: a
/// command that runs with that word proves the tool ran what the permission step analysed.
#[derive(Default)]
struct Marking(AtomicUsize);

impl ScriptAnalyzer for Marking {
    fn analyze(&self, script: &str) -> Arc<dyn Any + Send + Sync> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let mut analysis = talon_exec::analysis::analyze(script);
        if let Some(first) = analysis.segments.first_mut() {
            first.argv.push("from-the-permission-step".into());
            first.dynamic.push(false);
        }
        Arc::new(analysis)
    }
}

/// Issue 21: `exec` and `Bash` parsed the command again after the permission step (for routing
/// and for the credentialed plan). Now the pipeline analyses it once, the checker decides on
/// that analysis, and the tools route and plan with it.
#[tokio::test]
async fn h21_arch_command_analysis_is_carried_to_exec_and_bash() {
    let marking = Arc::new(Marking::default());
    let analyzer = Arc::clone(&marking);
    let e = env_built(SandboxMode::Off, move |config| {
        let registry = Arc::new(Registry::new());
        talon_tools::register_builtin(&registry, config).unwrap();
        let checker = ExecApprovals::new(AgentExecPolicy::default(), HashMap::new(), false);
        Pipeline::builder(registry)
            .rate_limiter(None)
            .permission_checker(Arc::new(checker))
            .script_analyzer(analyzer)
            .build()
            .unwrap()
    })
    .await;
    for (calls, tool) in [(1, "exec"), (2, "Bash")] {
        let out = e.call("ops", tool, json!({"command": "gh api user"})).await;
        assert_ran_with_token(&out, "api user from-the-permission-step");
        assert_eq!(
            marking.0.load(Ordering::SeqCst),
            calls,
            "{tool}: one analysis per call, shared by the checker and the tool"
        );
    }
    // The spec, not the tool's name, says which argument is a shell script.
    let out = e
        .call(
            "ops",
            "credentialed_exec",
            json!({"command": "gh api user"}),
        )
        .await;
    assert_ran_with_token(&out, "api user");
    assert_eq!(marking.0.load(Ordering::SeqCst), 2);
}

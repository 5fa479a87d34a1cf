//! `credentialed_exec` (seed 002 §4): run a CLI an operator registered with stored credentials
//! (`talon cli-credentials add gh --preset gh --env-from-stdin --grant ops`), directly and
//! without a shell, and the routing that sends `exec` commands to it.
//!
//! The checks are [`talon_exec::credentialed`]'s (one plain command by parsing, path
//! verification, deny patterns that fail closed); this module looks the binary up for the
//! calling agent, adds the credential values to the call's scrub set before anything runs, and
//! renders the result as `exec` does.
//!
//! Routing: `exec` hands a command here when any command in it (not only the first word) runs a
//! binary granted to the calling agent, so `cd x && gh pr list` is refused with an explanation
//! instead of running `gh` in a shell without its credentials. An agent without a grant runs
//! the same command through the shell like any other, without the credentials: the grant, not
//! the command text, decides who gets them.
//!
//! The hand-off is a call of `credentialed_exec`, so the pipeline's rules for that tool govern
//! it: `exec` and `Bash` declare it as a delegate ([`talon_core::ToolSpec::delegates`]) and
//! [`route`] needs the [`Delegation`] the pipeline gives only when the caller may call
//! `credentialed_exec` itself (policy, permission refusals). Without one, the command runs in the
//! shell without credentials, as for an agent without a grant.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{
    Authorized, CallContext, DEFAULT_AGENT, Delegation, ScriptAnalysis, SideEffect, Tool,
    ToolOutput, ToolSpec,
};
use talon_exec::Shell;
use talon_exec::analysis::{Analysis, analyze};
use talon_exec::credentialed::{self, Credential, Placement};
use talon_store::{GrantedCredential, Store};

use super::exec::{ExecInput, MAX_TIMEOUT_SECS, render};
use super::script::analysis_of;
use super::{check_command, ending_line, with_network_footer, working_dir};
use crate::fs::workspace::FsConfig;

/// Input of [`CredentialedExec`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialedExecInput {
    /// The command: one invocation of a registered CLI, such as `gh api user` (no shell syntax).
    pub command: String,
    /// Directory to run in, relative to the workspace (default: the workspace root).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Seconds before the command is killed (default: the binary's configured timeout, max 3600).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// The `credentialed_exec` tool. Uses the store of `fs` (every entry point has one).
#[derive(Debug, Clone)]
pub struct CredentialedExec {
    pub fs: Arc<FsConfig>,
    pub shell: Arc<Shell>,
}

impl Tool for CredentialedExec {
    type Input = CredentialedExecInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            NAME,
            "Run a command-line tool that the operator registered with stored credentials (such as gh, aws, \
             gcloud, kubectl) and granted to you. The credentials go into its environment and are redacted from \
             the output; you never see them. It runs directly, without a shell, so the command must be one plain \
             invocation such as `gh api user` (quote arguments; no pipes, ;, &&, redirections, $(…), variables \
             or globs). Some arguments (authentication, deletion, verbose output) may be refused by the \
             operator's rules. exec routes such commands here by itself. working_dir is relative to the \
             workspace; timeout is in seconds (default: the tool's configured timeout, max 3600).",
            SideEffect::Spawns,
        )
        .in_group("runtime")
    }

    async fn execute(&self, call: Authorized<CredentialedExecInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        or_error!(check_command(&input.command));
        let Some(store) = &self.fs.store else {
            return ToolOutput::error(
                "credentialed_exec needs Talon's store, which holds the registered tools; none is configured",
            );
        };
        let agent = agent_of(ctx);
        let granted = or_error!(granted_binaries(store, agent).await);
        // Parsed once, for finding the binary and for the plan.
        let analysis = analyze(&input.command);
        let programs = credentialed::programs_in(&input.command, &analysis);
        let Some(binary) = programs.iter().find(|p| granted.contains(p)) else {
            let first = programs.first().map(String::as_str).unwrap_or("");
            return ToolOutput::error(not_granted(store, agent, first, &granted).await);
        };
        let Some(credential) = or_error!(lookup(store, agent, binary).await) else {
            return ToolOutput::error(not_granted(store, agent, binary, &[]).await);
        };
        let job = Call {
            fs: &self.fs,
            shell: &self.shell,
            ctx,
            command: &input.command,
            analysis: &analysis,
            working_dir: input.working_dir.as_deref(),
            timeout: input.timeout,
        };
        job.run(credential).await
    }
}

/// How old the list of credentialed binary names may be when `exec` routes a command.
const NAMES_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// The tool name a hand-off from `exec` or `Bash` is authorized as.
pub const NAME: &str = "credentialed_exec";

/// For `exec`: the result of running `input` as a credentialed command when it runs a binary
/// granted to the calling agent; `None` when the shell should run it. A store error refuses the
/// command (fail closed) rather than guess. `permit` is the pipeline's authorization of the
/// hand-off (`call.delegation(NAME)`); without it there is no credentialed run. `carried` is
/// the permission step's analysis of the command (`call.script()`), which routing and the
/// credentialed plan use instead of parsing the command again.
pub async fn route(
    fs: &FsConfig,
    shell: &Shell,
    ctx: &CallContext,
    input: &ExecInput,
    carried: Option<&ScriptAnalysis>,
    permit: &Delegation,
) -> Option<ToolOutput> {
    if permit.tool() != NAME {
        return None;
    }
    let store = fs.store.as_ref()?;
    let agent = agent_of(ctx);
    let analysis = analysis_of(carried, &input.command);
    let programs = credentialed::programs_in(&input.command, &analysis);
    // Most commands run no credentialed binary: knowing the names (read at most a second ago)
    // spares them a store query per call. Grants are read fresh below.
    match store.cli_binary_names_recent(NAMES_MAX_AGE).await {
        Ok(names) if !programs.iter().any(|p| names.contains(p)) => return None,
        Ok(_) => {}
        Err(e) => {
            return Some(ToolOutput::error(format!(
                "cannot look up the credentialed tools, so the command was not run: {e}"
            )));
        }
    }
    let granted = match granted_binaries(store, agent).await {
        Ok(granted) if granted.is_empty() => return None,
        Ok(granted) => granted,
        Err(e) => return Some(ToolOutput::error(e)),
    };
    let binary = programs.iter().find(|p| granted.contains(p))?;
    let credential = match lookup(store, agent, binary).await {
        Ok(found) => found?,
        Err(e) => return Some(ToolOutput::error(e)),
    };
    if input.background == Some(true) {
        return Some(ToolOutput::error(format!(
            "`{binary}` runs with stored credentials, which cannot run in the background; run it without \
             background (its timeout is {} seconds unless you pass timeout)",
            credential.spec.timeout_seconds
        )));
    }
    let job = Call {
        fs,
        shell,
        ctx,
        command: &input.command,
        analysis: &analysis,
        working_dir: input.working_dir.as_deref(),
        timeout: input.timeout,
    };
    Some(job.run(credential).await)
}

fn agent_of(ctx: &CallContext) -> &str {
    ctx.agent_key.as_deref().unwrap_or(DEFAULT_AGENT)
}

async fn granted_binaries(store: &Store, agent: &str) -> Result<Vec<String>, String> {
    store.cli_binaries_granted_to(agent).await.map_err(|e| {
        format!("cannot look up the credentialed tools of agent {agent:?}, so the command was not run: {e}")
    })
}

async fn lookup(
    store: &Store,
    agent: &str,
    binary: &str,
) -> Result<Option<GrantedCredential>, String> {
    store.credential_for(agent, binary).await.map_err(|e| {
        format!("cannot load the stored credentials of `{binary}`, so the command was not run: {e}")
    })
}

/// Why nothing runs, with what is available instead.
async fn not_granted(store: &Store, agent: &str, binary: &str, granted: &[String]) -> String {
    let mut text = if binary.is_empty() {
        "the command names no program".to_string()
    } else {
        format!("no credentials for `{binary}` are granted to agent {agent:?}")
    };
    if granted.is_empty() {
        text.push_str("; this agent has no credentialed tools (an operator grants them with `talon cli-credentials`). Use exec for ordinary commands.");
        return text;
    }
    text.push_str(". Available: ");
    let mut items = Vec::new();
    for name in granted {
        let tips = match store.cli_credential(name).await {
            Ok(Some(c)) if !c.spec.tips.is_empty() => format!(" ({})", c.spec.tips),
            _ => String::new(),
        };
        items.push(format!("{name}{tips}"));
    }
    text.push_str(&items.join(", "));
    text
}

/// One credentialed call, from the tool or from `exec`.
struct Call<'a> {
    fs: &'a FsConfig,
    shell: &'a Shell,
    ctx: &'a CallContext,
    command: &'a str,
    /// The analysis of `command`.
    analysis: &'a Analysis,
    working_dir: Option<&'a str>,
    timeout: Option<u64>,
}

impl Call<'_> {
    async fn run(&self, granted: GrantedCredential) -> ToolOutput {
        // Registered first, so whatever happens next (a refusal quoting the command, a failure
        // echoing the environment) the values are redacted from this call's output.
        for value in granted.env.values() {
            self.ctx.scrub_bag.add(value.clone());
        }
        let spec = granted.spec;
        let secs = self.timeout.unwrap_or(spec.timeout_seconds);
        if !(1..=MAX_TIMEOUT_SECS).contains(&secs) {
            return ToolOutput::error(format!(
                "timeout must be between 1 and {MAX_TIMEOUT_SECS} seconds, got {secs}"
            ));
        }
        let timeout = Duration::from_secs(secs);
        let (workspace, cwd) = or_error!(working_dir(self.fs, self.ctx, self.working_dir));
        let credential = Credential {
            binary_name: spec.binary_name,
            binary_path: PathBuf::from(spec.binary_path),
            env: granted.env.into_iter().collect(),
            deny_args: spec.deny_args,
            deny_verbose: spec.deny_verbose,
            destinations: spec.destinations,
        };
        let roots = credentialed::writable_roots(self.shell, &workspace);
        let site = credentialed::Site {
            writable_roots: &roots,
            workspace: Some(&workspace),
            cwd: Some(&cwd),
        };
        let plan = or_error!(credential.plan_analysed(self.command, self.analysis, &site));
        let agent = self.ctx.agent_key.as_deref();
        let at = Placement {
            cwd: &cwd,
            workspace: &workspace,
            agent,
            timeout,
        };
        let outcome = or_error!(credentialed::run(self.shell, &plan, &at, &self.ctx.cancel).await);
        let ending = ending_line(&outcome, timeout);
        let text = render(
            &outcome.stdout.text(),
            &outcome.stderr.text(),
            ending.as_deref(),
        );
        let mut text = with_network_footer(text, outcome.network.as_ref());
        if outcome.success() {
            return ToolOutput::text(text);
        }
        if let Some(note) = credentialed::network_note(self.shell, agent) {
            text.push_str("\n\n");
            text.push_str(&note);
        }
        ToolOutput::error(text)
    }
}

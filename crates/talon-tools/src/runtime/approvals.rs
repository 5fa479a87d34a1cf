//! When a shell command may run without a person: the permission checker for `exec` and `Bash`.
//!
//! Every command is parsed once, in the pipeline's permission step ([`super::script`]; the
//! tool receives the same analysis), checked against the agent's deny groups, then decided by
//! GoClaw's modes (`security` deny / allowlist / full × `ask` off / on-miss / always) with
//! Claude Code's rule semantics (deny, then ask, then allow; every segment must be covered).
//! Anything the analyser cannot resolve is never allowed without a person. The verdict goes to
//! the pipeline's permission step: a deny holds in every permission mode, an "ask" goes to the
//! approvals broker, and "allow always" answers are stored per agent as the whole normalised
//! command ([`ExecApprovals`] implements [`Remember`]).
//!
//! The OS sandbox stays the security boundary; this decides when to ask, and fails closed.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{PoisonError, RwLock};

use futures::future::BoxFuture;
use talon_core::DEFAULT_AGENT;
use talon_core::approvals::Remember;
use talon_core::permission::{Decision, PermissionChecker, PermissionRequest};
use talon_exec::analysis::approval::{ApprovalContext, ExecApprovalConfig, decide};
use talon_exec::analysis::deny::DenyGroups;
use talon_exec::analysis::rules::always_allow_key;
use talon_exec::analysis::{Analysis, analyze};

/// One agent's settings (or the defaults every agent starts from).
#[derive(Debug, Clone, Default)]
pub struct AgentExecPolicy {
    pub approval: ExecApprovalConfig,
    pub deny_groups: DenyGroups,
}

/// The checker for `exec` and `Bash` (see the module docs).
#[derive(Debug)]
pub struct ExecApprovals {
    defaults: AgentExecPolicy,
    agents: HashMap<String, AgentExecPolicy>,
    /// "Allow always" answers per agent for shell commands (loaded from the store at start).
    allowed: RwLock<HashMap<String, HashSet<String>>>,
    /// "Allow always" answers per agent for other tools: the tool names. Kept apart from the
    /// commands, so no remembered tool can ever pass for a command of the same text.
    tools_allowed: RwLock<HashMap<String, HashSet<String>>>,
    store: Option<talon_store::Store>,
    /// Someone can answer an approval request (a terminal, the HTTP API). Without, "ask"
    /// becomes a refusal at once, saying why, instead of a two-minute wait.
    can_ask: bool,
}

/// How an "allow always" answer for a tool other than a shell is kept: `tool:<name>`, beside
/// the remembered commands (and told apart from them when loaded).
pub const TOOL_KEY: &str = "tool:";

fn agent_key(agent: Option<&str>) -> &str {
    agent.unwrap_or(DEFAULT_AGENT)
}

impl ExecApprovals {
    /// A checker with `defaults` for every agent and `agents`' own settings.
    pub fn new(
        defaults: AgentExecPolicy,
        agents: HashMap<String, AgentExecPolicy>,
        can_ask: bool,
    ) -> Self {
        Self {
            defaults,
            agents,
            allowed: RwLock::default(),
            tools_allowed: RwLock::default(),
            store: None,
            can_ask,
        }
    }

    /// Remembers "allow always" answers in `store` and loads the ones stored before.
    pub async fn with_store(
        mut self,
        store: talon_store::Store,
    ) -> Result<Self, talon_store::StoreError> {
        let mut allowed: HashMap<String, HashSet<String>> = HashMap::new();
        let mut tools: HashMap<String, HashSet<String>> = HashMap::new();
        for (agent, key) in store.allowed_commands().await? {
            match key.strip_prefix(TOOL_KEY) {
                Some(tool) => tools.entry(agent).or_default().insert(tool.to_string()),
                None => allowed.entry(agent).or_default().insert(key),
            };
        }
        self.allowed = RwLock::new(allowed);
        self.tools_allowed = RwLock::new(tools);
        self.store = Some(store);
        Ok(self)
    }

    fn policy(&self, agent: Option<&str>) -> &AgentExecPolicy {
        self.agents.get(agent_key(agent)).unwrap_or(&self.defaults)
    }

    /// The analysed script of a call of a tool that runs one (its spec says how:
    /// [`talon_core::ToolSpec::shell_script_arg`] or
    /// [`talon_core::ToolSpec::script_template`]), if this is one: the pipeline's analysis, the
    /// one the tool receives. `Err` when a template cannot be rendered (the pipeline refused
    /// such a call before; refused here too, so the checker fails closed on its own).
    fn analysis<'a>(request: &PermissionRequest<'a>) -> Result<Option<Cow<'a, Analysis>>, String> {
        if let Some(template) = &request.spec.script_template {
            let command = talon_core::script_template::render(template, request.input)?;
            return Ok(Some(super::script::analysis_of(request.script, &command)));
        }
        let Some(arg) = request.spec.shell_script_arg.as_deref() else {
            return Ok(None);
        };
        Ok(request
            .input
            .get(arg)
            .and_then(|v| v.as_str())
            .map(|command| super::script::analysis_of(request.script, command)))
    }

    /// The verdict for `command` run by `agent` (also used by tests and `talon` diagnostics).
    pub fn decide(&self, agent: Option<&str>, command: &str) -> Decision {
        self.verdict(agent, &analyze(command))
    }

    fn verdict(&self, agent: Option<&str>, analysis: &Analysis) -> Decision {
        let policy = self.policy(agent);
        let allowed = self.allowed.read().unwrap_or_else(PoisonError::into_inner);
        let empty = HashSet::new();
        let ctx = ApprovalContext {
            deny_groups: &policy.deny_groups,
            always_allowed: allowed.get(agent_key(agent)).unwrap_or(&empty),
            can_ask: self.can_ask,
        };
        match decide(analysis, &policy.approval, ctx) {
            talon_exec::analysis::approval::Decision::Allow => Decision::Allow,
            talon_exec::analysis::approval::Decision::Ask { reason } => Decision::Ask(reason),
            denied @ talon_exec::analysis::approval::Decision::Deny { .. } => {
                Decision::Deny(denied.explain())
            }
        }
    }
}

impl PermissionChecker for ExecApprovals {
    fn check(&self, request: &PermissionRequest<'_>) -> Option<Decision> {
        let agent = request.ctx.agent_key.as_deref();
        match Self::analysis(request) {
            Err(reason) => Some(Decision::Deny(reason)),
            Ok(Some(analysis)) => Some(self.verdict(agent, &analysis)),
            // Another tool: allowed when a person said "always" to it for this agent; else the
            // permission mode decides.
            Ok(None) => self
                .tools_allowed
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(agent_key(agent))
                .is_some_and(|tools| tools.contains(&request.spec.name))
                .then_some(Decision::Allow),
        }
    }
}

impl Remember for ExecApprovals {
    fn always_key(&self, request: &PermissionRequest<'_>) -> Option<String> {
        match Self::analysis(request) {
            Ok(Some(analysis)) => always_allow_key(&analysis),
            Ok(None) => Some(format!("{TOOL_KEY}{}", request.spec.name)),
            Err(_) => None,
        }
    }

    fn remember<'a>(&'a self, agent: Option<&'a str>, key: &'a str) -> BoxFuture<'a, ()> {
        let agent = agent_key(agent).to_string();
        let (set, entry) = match key.strip_prefix(TOOL_KEY) {
            Some(tool) => (&self.tools_allowed, tool),
            None => (&self.allowed, key),
        };
        set.write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(agent.clone())
            .or_default()
            .insert(entry.to_string());
        Box::pin(async move {
            if let Some(store) = &self.store
                && let Err(e) = store.allow_command(&agent, key).await
            {
                tracing::error!(%agent, error = %e, "cannot store an allow-always answer; it holds until restart");
            }
        })
    }
}

//! The policy engine: which tools an agent is offered, and therefore which it may call.
//!
//! The seeds' pipeline, in order: global profile → provider profile (replaces it) → global allow →
//! provider allow → agent allow → agent+provider allow → deny (global, provider, agent,
//! agent+provider) → alsoAllow (global, agent) → subagent deny → leaf deny at max depth →
//! per-request allow list (a final intersection).
//!
//! Where GoClaw's code is wrong (research/goclaw.md §6.4), Talon differs on purpose:
//! * B1/B3: groups always expand against the live registry passed in, including `mcp` and
//!   `mcp:<server>`; there is no registry-less fallback that drops `group:` entries.
//! * B2: an explicit deny is final; alsoAllow never re-adds a denied tool.
//! * B4: an unknown profile or group is a configuration error ([`PolicyError`]), never "full".
//! * B5: one subagent deny list ([`catalog::SUBAGENT_DENY`]) used by the one engine.
//!
//! The same [`PolicyEngine::effective`] computes the list offered to the model and, in the
//! pipeline, authorizes each call, so the two can never disagree.

pub mod catalog;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::registry::Registry;

/// A configuration mistake, naming the key and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{key}: unknown profile {name:?}; expected one of: full, coding, messaging, minimal")]
    UnknownProfile { key: String, name: String },
    #[error("{key}: unknown tool group {name:?}; known groups: {known}, mcp:<server>")]
    UnknownGroup {
        key: String,
        name: String,
        known: String,
    },
    #[error("{key}: empty tool name or group")]
    EmptySpec { key: String },
}

/// Overrides for one LLM provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderPolicy {
    /// Replaces the global profile for agents on this provider.
    pub profile: Option<String>,
    /// Intersected after the global allow list.
    pub allow: Vec<String>,
    /// Added to the deny lists.
    pub deny: Vec<String>,
}

/// The global tool policy (`[tools]` in talon.toml).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    /// `full` (default), `coding`, `messaging` or `minimal`.
    pub profile: Option<String>,
    /// If non-empty, only these tools (names, `group:x`, or `prefix*`) survive.
    pub allow: Vec<String>,
    /// Never offered; final.
    pub deny: Vec<String>,
    /// Added back after the allow steps (but never over a deny).
    pub also_allow: Vec<String>,
    /// Per-provider overrides.
    pub by_provider: BTreeMap<String, ProviderPolicy>,
    /// Which dialect's tools a model is offered where both do the same thing (default: the
    /// entry point's, see [`Dialect`]).
    pub dialect: Option<Dialect>,
}

/// One agent's tool policy (`[agents.<key>.tools]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentToolPolicy {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub also_allow: Vec<String>,
    pub by_provider: BTreeMap<String, ProviderPolicy>,
    /// This agent's dialect, over the global one.
    pub dialect: Option<Dialect>,
}

/// `tools` without the twins `dialect` does not use: of two offered tools for one job
/// ([`crate::ToolSpec::same_as`]), only the dialect's stays. A twin is still callable by name
/// (it is in the effective set, with the same capability groups and rules); it is just not
/// offered twice.
pub fn one_tool_per_job(
    dialect: Dialect,
    tools: &mut Vec<std::sync::Arc<crate::registry::RegisteredTool>>,
) {
    if dialect == Dialect::Both {
        return;
    }
    let offered: BTreeSet<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    // The GoClaw tools that an offered Claude Code tool does the job of.
    let twinned: BTreeSet<String> = tools
        .iter()
        .filter_map(|t| t.spec().same_as.clone())
        .filter(|twin| offered.contains(twin))
        .collect();
    tools.retain(|t| {
        let spec = t.spec();
        match dialect {
            Dialect::Goclaw => spec
                .same_as
                .as_ref()
                .is_none_or(|twin| !offered.contains(twin)),
            Dialect::ClaudeCode => !twinned.contains(&spec.name),
            Dialect::Both => true,
        }
    });
}

/// The tool-name dialects Talon speaks: Claude Code's (`Read`, `Bash`, `WebFetch`) and GoClaw's
/// (`read_file`, `exec`, `web_fetch`). Where a tool of each does the same thing
/// ([`crate::ToolSpec::same_as`]), a model is offered only the chosen dialect's, so it never
/// sees two tools for one job (and the request stays small for small models). Tools only one
/// dialect has (`memory_search`, `TodoWrite`) are offered either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    ClaudeCode,
    Goclaw,
    /// Both names for each job.
    Both,
}

/// Subagent limits and deny lists (`[subagents]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubagentPolicy {
    /// Depth at which a subagent is a leaf and loses the spawning tools.
    pub max_spawn_depth: u32,
    /// Live runs per tenant, across gateways (seed 002 §6: MaxConcurrent 8). Scheduled jobs'
    /// runs are not counted here: they have their own [`SubagentPolicy::max_concurrent_scheduled`].
    pub max_concurrent: u32,
    /// Live runs one user of a tenant may hold of its `max_concurrent`: the rest stay free for
    /// the tenant's other users (one user's background children cannot refuse everyone else).
    pub max_concurrent_per_user: u32,
    /// Live runs of scheduled jobs per tenant, a pool of their own: a burst of due jobs neither
    /// takes the users' slots nor is refused because people are busy.
    pub max_concurrent_scheduled: u32,
    /// Live children per parent run, or per session for a person's turn (MaxChildrenPerAgent 5).
    pub max_children_per_agent: u32,
    /// Denied to every subagent.
    pub deny: Vec<String>,
    /// Denied to subagents at `max_spawn_depth`.
    pub leaf_deny: Vec<String>,
    /// Seconds a gateway holds a run without renewing it (default 30): a run whose gateway
    /// died is taken over this long after.
    pub lease_seconds: Option<u32>,
    /// Model requests a child run may make (seed 002 §6: 20); a child that reaches it ends
    /// `limit_reached`.
    pub max_iterations: u32,
    /// Tokens (in and out) all runs under one root run may use together; a run started or
    /// running past it ends `limit_reached`.
    pub budget_tokens: Option<u64>,
    /// Model requests all runs under one root run may make together.
    pub budget_requests: Option<u64>,
    /// Seconds from a root run's start within which its runs must end; a run still running then
    /// ends `timed_out`.
    pub budget_seconds: Option<u64>,
    /// Model names a child may ask for (the `Agent` tool's `model`, a custom agent's `model`)
    /// and the provider model each runs on, e.g. `{ haiku = "gpt-4o-mini" }`. A child asking
    /// for a name not here runs on its parent agent's model: neither a model nor a file in the
    /// workspace picks an arbitrary (or costlier) model.
    pub models: BTreeMap<String, String>,
}

impl Default for SubagentPolicy {
    fn default() -> Self {
        Self {
            max_spawn_depth: catalog::DEFAULT_MAX_SPAWN_DEPTH,
            max_concurrent: 8,
            max_concurrent_per_user: 6,
            max_concurrent_scheduled: 4,
            max_children_per_agent: 5,
            deny: catalog::SUBAGENT_DENY
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
            leaf_deny: catalog::LEAF_DENY
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
            lease_seconds: None,
            max_iterations: 20,
            budget_tokens: None,
            budget_requests: None,
            budget_seconds: None,
            models: BTreeMap::new(),
        }
    }
}

/// Everything the engine needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyConfig {
    pub global: ToolPolicy,
    pub agents: BTreeMap<String, AgentToolPolicy>,
    pub subagents: SubagentPolicy,
}

/// Who is asking: selects the agent and provider overrides and the subagent lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyRequest<'a> {
    pub agent: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub spawn_depth: u32,
    pub tool_allow: Option<&'a [String]>,
    /// The entry point's dialect, when configuration names none (`None`: both).
    pub dialect: Option<Dialect>,
    /// The call is a run's (a subagent, a delegation, a team member, a scheduled job), not a
    /// person's or an API client's turn: see [`PolicyEngine::effective`]'s floor.
    pub in_run: bool,
}

/// The MCP servers a requester may reach through tools that are not the servers' own
/// ([`crate::ToolSpec::reaches_mcp_servers`]: the resource tools, `mcp_tool_search`): a server
/// whose group (`group:mcp:<server>`, or all of `group:mcp`) a deny list applying to the
/// requester names is refused, as its own tools are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpServerRule {
    all_denied: bool,
    denied: BTreeSet<String>,
}

impl McpServerRule {
    /// Whether the requester may reach `server`.
    pub fn allows(&self, server: &str) -> bool {
        !self.all_denied && !self.denied.contains(server)
    }

    fn deny(&mut self, spec: &str) {
        match spec.trim().strip_prefix("group:") {
            Some("mcp") => self.all_denied = true,
            Some(group) => {
                if let Some(server) = group.strip_prefix("mcp:") {
                    self.denied.insert(server.to_string());
                }
            }
            None => {}
        }
    }
}

impl<'a> PolicyRequest<'a> {
    /// The request of a call: its agent, provider, depth and per-request allow list.
    pub fn for_call(ctx: &'a crate::context::CallContext) -> Self {
        Self {
            agent: ctx.agent_key.as_deref(),
            provider: ctx.provider.as_deref(),
            spawn_depth: ctx.spawn_depth,
            tool_allow: ctx.tool_allow.as_deref(),
            dialect: ctx.dialect,
            in_run: ctx.is_run(),
        }
    }
}

/// Computes effective tool sets. Cheap to clone; holds only validated configuration.
#[derive(Debug, Clone)]
pub struct PolicyEngine {
    config: PolicyConfig,
}

fn check_profile(key: &str, profile: &Option<String>, errors: &mut Vec<PolicyError>) {
    if let Some(name) = profile
        && !catalog::PROFILES.contains(&name.as_str())
    {
        errors.push(PolicyError::UnknownProfile {
            key: key.to_string(),
            name: name.clone(),
        });
    }
}

fn check_specs(key: &str, specs: &[String], errors: &mut Vec<PolicyError>) {
    for (i, spec) in specs.iter().enumerate() {
        let key = format!("{key}[{i}]");
        let trimmed = spec.trim();
        if trimmed.is_empty() || trimmed == "group:" {
            errors.push(PolicyError::EmptySpec { key });
        } else if let Some(group) = trimmed.strip_prefix("group:")
            && !catalog::is_known_group(group)
        {
            let known: Vec<&str> = catalog::BUILTIN_GROUPS.iter().map(|(g, _)| *g).collect();
            errors.push(PolicyError::UnknownGroup {
                key,
                name: group.to_string(),
                known: known.join(", "),
            });
        }
    }
}

fn check_provider(key: &str, p: &ProviderPolicy, errors: &mut Vec<PolicyError>) {
    check_profile(&format!("{key}.profile"), &p.profile, errors);
    check_specs(&format!("{key}.allow"), &p.allow, errors);
    check_specs(&format!("{key}.deny"), &p.deny, errors);
}

impl Default for PolicyEngine {
    /// Profile `full`, no lists, the default subagent lists (a configuration known to be valid).
    fn default() -> Self {
        Self {
            config: PolicyConfig::default(),
        }
    }
}

impl PolicyEngine {
    /// Validates the configuration; every mistake is reported, each naming its key.
    pub fn new(config: PolicyConfig) -> Result<Self, Vec<PolicyError>> {
        let mut errors = Vec::new();
        let g = &config.global;
        check_profile("tools.profile", &g.profile, &mut errors);
        check_specs("tools.allow", &g.allow, &mut errors);
        check_specs("tools.deny", &g.deny, &mut errors);
        check_specs("tools.also_allow", &g.also_allow, &mut errors);
        for (name, p) in &g.by_provider {
            check_provider(&format!("tools.by_provider.{name}"), p, &mut errors);
        }
        for (agent, a) in &config.agents {
            let key = format!("agents.{agent}.tools");
            check_specs(&format!("{key}.allow"), &a.allow, &mut errors);
            check_specs(&format!("{key}.deny"), &a.deny, &mut errors);
            check_specs(&format!("{key}.also_allow"), &a.also_allow, &mut errors);
            for (name, p) in &a.by_provider {
                check_provider(&format!("{key}.by_provider.{name}"), p, &mut errors);
            }
        }
        check_specs("subagents.deny", &config.subagents.deny, &mut errors);
        check_specs(
            "subagents.leaf_deny",
            &config.subagents.leaf_deny,
            &mut errors,
        );
        if errors.is_empty() {
            Ok(Self { config })
        } else {
            Err(errors)
        }
    }

    /// The validated configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// The deny lists that apply to `req`: global, provider, agent, agent+provider.
    fn deny_lists<'a>(&'a self, req: &PolicyRequest<'_>) -> impl Iterator<Item = &'a [String]> {
        let (_, provider, agent, agent_provider) = self.layers(req);
        [
            Some(&self.config.global.deny),
            provider.map(|p| &p.deny),
            agent.map(|a| &a.deny),
            agent_provider.map(|p| &p.deny),
        ]
        .into_iter()
        .flatten()
        .map(Vec::as_slice)
    }

    /// The subagent deny lists that apply to `req` (none at the top level).
    fn subagent_deny_lists<'a>(
        &'a self,
        req: &PolicyRequest<'_>,
    ) -> impl Iterator<Item = &'a [String]> {
        let sub = &self.config.subagents;
        let depth = req.spawn_depth;
        [
            (depth > 0).then_some(&sub.deny),
            (depth > 0 && depth >= sub.max_spawn_depth).then_some(&sub.leaf_deny),
        ]
        .into_iter()
        .flatten()
        .map(Vec::as_slice)
    }

    /// The global policy and the provider, agent and agent+provider overrides for `req`.
    #[allow(clippy::type_complexity)]
    fn layers<'a>(
        &'a self,
        req: &PolicyRequest<'_>,
    ) -> (
        &'a ToolPolicy,
        Option<&'a ProviderPolicy>,
        Option<&'a AgentToolPolicy>,
        Option<&'a ProviderPolicy>,
    ) {
        let global = &self.config.global;
        let provider = req.provider.and_then(|p| global.by_provider.get(p));
        let agent = req.agent.and_then(|a| self.config.agents.get(a));
        let agent_provider = agent
            .zip(req.provider)
            .and_then(|(a, p)| a.by_provider.get(p));
        (global, provider, agent, agent_provider)
    }

    /// The MCP servers `req` may reach through tools that name one ([`McpServerRule`]): the
    /// same deny lists as [`PolicyEngine::effective`] applies, read for `group:mcp:<server>`.
    pub fn mcp_servers(&self, req: &PolicyRequest<'_>) -> McpServerRule {
        let mut rule = McpServerRule::default();
        for spec in self
            .deny_lists(req)
            .chain(self.subagent_deny_lists(req))
            .flatten()
        {
            rule.deny(spec);
        }
        rule
    }

    /// The dialect the requester's tools are offered in: the agent's, else the global one, else
    /// the entry point's, else both.
    pub fn dialect(&self, req: &PolicyRequest<'_>) -> Dialect {
        let (global, _, agent, _) = self.layers(req);
        agent
            .and_then(|a| a.dialect)
            .or(global.dialect)
            .or(req.dialect)
            .unwrap_or(Dialect::Both)
    }

    /// The canonical names of the tools the requester may see and call, sorted.
    pub fn effective(&self, registry: &Registry, req: &PolicyRequest<'_>) -> BTreeSet<String> {
        let all: BTreeSet<String> = registry.names().into_iter().collect();
        let expand = |specs: &[String]| expand_specs(registry, &all, specs);
        let (global, provider, agent, agent_provider) = self.layers(req);

        // Steps 1-2: the profile (a provider profile replaces the global one).
        let profile = provider
            .and_then(|p| p.profile.as_deref())
            .or(global.profile.as_deref())
            .unwrap_or("full");
        let mut set = match catalog::profile_specs(profile) {
            Some(specs) => {
                let owned: Vec<String> = specs.iter().map(|s| (*s).to_string()).collect();
                expand(&owned)
            }
            None => all.clone(),
        };

        // Steps 3-6: allow lists intersect when non-empty.
        let allow_lists = [
            Some(&global.allow),
            provider.map(|p| &p.allow),
            agent.map(|a| &a.allow),
            agent_provider.map(|p| &p.allow),
        ];
        for list in allow_lists.into_iter().flatten() {
            if !list.is_empty() {
                let allowed = expand(list);
                set.retain(|t| allowed.contains(t));
            }
        }

        // Deny is final.
        let mut denied = BTreeSet::new();
        for list in self.deny_lists(req) {
            denied.extend(expand(list));
        }
        set.retain(|t| !denied.contains(t));

        // alsoAllow is additive, from all tools, but never over a deny.
        let mut also = expand(&global.also_allow);
        if let Some(a) = agent {
            also.extend(expand(&a.also_allow));
        }
        set.extend(also.into_iter().filter(|t| !denied.contains(t)));

        // Subagents lose the always-denied tools; leaves also lose the spawning tools.
        let mut sub_denied = BTreeSet::new();
        for list in self.subagent_deny_lists(req) {
            sub_denied.extend(expand(list));
        }
        set.retain(|t| !sub_denied.contains(t));

        // The per-request allow list is a final intersection: nothing above can widen it.
        if let Some(list) = req.tool_allow {
            let allowed = expand(list);
            set.retain(|t| allowed.contains(t));
        }

        // A tool that exists for one agent ([`crate::ToolSpec::for_agent`]) is in no other's
        // set, whatever the lists above said. And what a run may never have, whatever the
        // configured lists say (they can be edited; this floor cannot): a run — subagent,
        // delegation, team member, scheduled job — administers no gateway and hands no chat
        // off (the target's turn would be a person's, with none of the run's limits), and a
        // run at the deepest level starts none.
        let agent = req.agent.unwrap_or(crate::DEFAULT_AGENT);
        let leaf = req.in_run && req.spawn_depth >= self.config.subagents.max_spawn_depth;
        for tool in registry.tools() {
            let spec = tool.spec();
            let other_agents = spec.for_agent.as_deref().is_some_and(|a| a != agent);
            let above_a_run = req.in_run && (spec.operator_only || spec.hands_off);
            if other_agents || above_a_run || (leaf && spec.starts_runs) {
                set.remove(spec.name.as_str());
            }
        }
        set
    }
}

/// Expands tool specs against the live registry: `group:x`, `prefix*`, `*`, or a name/alias.
fn expand_specs(registry: &Registry, all: &BTreeSet<String>, specs: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for spec in specs {
        let spec = spec.trim();
        if let Some(group) = spec.strip_prefix("group:") {
            if let Some(members) = registry.expand_group(group) {
                out.extend(members);
            }
        } else if let Some(prefix) = spec.strip_suffix('*') {
            out.extend(all.iter().filter(|n| n.starts_with(prefix)).cloned());
        } else if let Some(canonical) = registry.canonical_name(spec)
            && all.contains(&canonical)
        {
            out.insert(canonical);
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! Delegation (seed 000 §7): an agent hands a task to another, fully independent agent — its own
//! identity, tools, model and context files — over an agent link an operator made
//! ([`talon_store::AgentLink`]). A delegation is a run like a subagent's (origin `delegation`),
//! so limits, cancellation, exactly-once delivery and restart-safety are the same; on top of the
//! run limits it is counted against the link's `max_concurrent` and the target's
//! `max_delegation_load` (agent setting) in the statement that creates it.
//!
//! - `delegate`: actions delegate (mode sync: wait for the answer; async: announced later),
//!   cancel, list (running), history (ended).
//! - `delegate_search`: finds targets by term matching over their keys, names, descriptions and
//!   settings (for agents with more targets than DELEGATION.md lists inline).
//! - DELEGATION.md: generated into the system prompt of an agent with links (≤ 15 targets
//!   inline, otherwise a pointer to `delegate_search`), unless the agent or user has their own.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::registry::RegistryError;
use talon_core::visible::visible;
use talon_core::{Authorized, CallContext, Registry, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::AgentLink;

use super::tools::{NOWHERE_TO_ANNOUNCE, children, own_child, run_started};
use super::{ChildOverrides, ChildSpec, one_line};
use crate::runner::Runner;

/// Targets listed inline in DELEGATION.md at most; past this the file points to
/// `delegate_search`.
pub const INLINE_TARGETS: usize = 15;

/// A delegation target as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub key: String,
    pub name: String,
    pub description: String,
    /// The agent's settings as text (searched, not shown).
    settings: String,
}

impl Runner {
    /// The agents `agent` may delegate to (with `user` admitted by each link), and the links.
    pub(crate) async fn targets(
        &self,
        agent: &str,
        user: Option<&str>,
    ) -> Result<Vec<(Target, AgentLink)>, String> {
        let links = self
            .store()
            .delegation_links(agent)
            .await
            .map_err(|e| format!("cannot read {agent}'s agent links: {e}"))?;
        let admitted: Vec<(String, AgentLink)> = links
            .into_iter()
            .filter(|link| link.settings.admits(user))
            .filter_map(|link| Some((link.target_for(agent)?.to_string(), link)))
            .collect();
        let keys: Vec<&str> = admitted.iter().map(|(key, _)| key.as_str()).collect();
        let records = self
            .store()
            .agents_in(&keys)
            .await
            .map_err(|e| format!("cannot read {agent}'s delegation targets: {e}"))?;
        let mut targets = Vec::new();
        for (key, link) in admitted {
            // A link to an agent since deleted names no target.
            let Some(record) = records.iter().find(|r| r.key == key) else {
                continue;
            };
            let parsed: serde_json::Value =
                serde_json::from_str(&record.settings).unwrap_or_default();
            let text = |field: &str| parsed[field].as_str().unwrap_or_default().to_string();
            targets.push((
                Target {
                    name: text("name"),
                    description: text("description"),
                    key,
                    settings: record.settings.clone(),
                },
                link,
            ));
        }
        Ok(targets)
    }

    /// DELEGATION.md for `agent` and `user`: the targets it may delegate to; `None` without any.
    pub(crate) async fn delegation_file(&self, agent: &str, user: Option<&str>) -> Option<String> {
        let targets = self.targets(agent, user).await.ok()?;
        if targets.is_empty() {
            return None;
        }
        if targets.len() > INLINE_TARGETS {
            return Some(format!(
                "You can delegate tasks to {} other agents with the delegate tool. Find the right \
                 one with delegate_search (say what the task needs), then call delegate with its \
                 key.",
                targets.len()
            ));
        }
        let mut file = String::from(
            "You can delegate tasks to these agents with the delegate tool (agent: the key). \
             Each works on its own, with its own tools; give it everything the task needs.\n",
        );
        for (target, _) in &targets {
            file.push_str(&format!("\n- `{}`", target.key));
            if !target.name.is_empty() {
                file.push_str(&format!(" ({})", one_line(&target.name, 60)));
            }
            if !target.description.is_empty() {
                file.push_str(&format!(": {}", one_line(&target.description, 200)));
            }
        }
        Some(file)
    }
}

/// Input of [`Delegate`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateInput {
    /// delegate: hand `task` to `agent`. cancel: stop delegation `id`. list: your running
    /// delegations. history: your ended ones.
    #[serde(default = "default_action")]
    pub action: String,
    /// delegate: the target agent's key (DELEGATION.md or delegate_search name them).
    #[serde(default)]
    pub agent: Option<String>,
    /// delegate: the task, with everything the agent needs (it does not see this
    /// conversation).
    #[serde(default)]
    pub task: Option<String>,
    /// delegate: sync (default) waits for the answer; async returns at once and the answer is
    /// announced to you when it ends.
    #[serde(default)]
    pub mode: Option<String>,
    /// cancel: the delegation's run id.
    #[serde(default)]
    pub id: Option<String>,
}

fn default_action() -> String {
    "delegate".into()
}

/// GoClaw's `delegate` tool.
pub struct Delegate {
    runner: Runner,
}

impl Tool for Delegate {
    type Input = DelegateInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "delegate",
            "Delegate a task to another agent (one you are linked to: see DELEGATION.md or \
             delegate_search). action delegate with agent and task; mode sync (default) waits \
             for its answer, async returns at once and the answer is announced to you. cancel \
             stops a delegation by id; list shows running ones; history ended ones.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .in_group("delegation")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<DelegateInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        match input.action.as_str() {
            "delegate" => delegate(&self.runner, ctx, input).await,
            "cancel" => match own_child(&self.runner, ctx, input.id.as_deref()).await {
                Ok(run) if run.origin == "delegation" && run.status.is_live() => {
                    match self.runner.cancel_run(&run.id).await {
                        Ok(_) => ToolOutput::own(format!("Cancelled delegation {}.", run.id)),
                        Err(e) => ToolOutput::own_error(e.to_string()),
                    }
                }
                Ok(run) => ToolOutput::own_error(format!(
                    "{} is not a running delegation of yours ({} {})",
                    run.id,
                    run.origin,
                    run.status.as_str()
                )),
                Err(e) => e,
            },
            "list" | "history" => {
                let live = input.action == "list";
                let runs = match children(&self.runner, ctx).await {
                    Ok(runs) => runs,
                    Err(e) => return e,
                };
                let lines: Vec<String> = runs
                    .iter()
                    .filter(|r| r.origin == "delegation" && r.status.is_live() == live)
                    .take(20)
                    .map(|r| {
                        let mut line = format!(
                            "{} {} → {}: {}",
                            r.id,
                            r.status.as_str(),
                            r.agent_key,
                            one_line(&r.task, 80)
                        );
                        if !live {
                            line.push_str(&format!(" ⇒ {}", one_line(&r.result, 120)));
                        }
                        line
                    })
                    .collect();
                if lines.is_empty() {
                    ToolOutput::own(if live {
                        "No delegation of yours is running."
                    } else {
                        "You have no ended delegations."
                    })
                } else {
                    ToolOutput::text(lines.join("\n"))
                }
            }
            other => ToolOutput::own_error(format!(
                "action {} is not known; use delegate, cancel, list or history",
                visible(other)
            )),
        }
    }
}

async fn delegate(runner: &Runner, ctx: &CallContext, input: &DelegateInput) -> ToolOutput {
    let Some(target) = input.agent.as_deref().filter(|a| !a.trim().is_empty()) else {
        return ToolOutput::own_error("agent is missing: name the agent to delegate to (its key)");
    };
    let Some(task) = input.task.as_deref().filter(|t| !t.trim().is_empty()) else {
        return ToolOutput::own_error(
            "task is empty: say what the agent should do, with everything it needs to know",
        );
    };
    let background = match input.mode.as_deref().unwrap_or("sync") {
        "sync" => false,
        "async" => true,
        other => {
            return ToolOutput::own_error(format!(
                "mode {} is not known; use sync or async",
                visible(other)
            ));
        }
    };
    if background && !runner.is_stored_session(&ctx.session_key).await {
        return ToolOutput::own_error(NOWHERE_TO_ANNOUNCE);
    }
    let run = match start_delegation(runner, ctx, target, task, "delegation", background).await {
        Ok(run) => run,
        Err(refused) => return refused,
    };
    let launched = background.then(|| {
        format!(
            "Delegated to {target} as {}; its answer will be announced to you when it ends \
             (delegate action cancel with this id stops it).",
            run.id
        )
    });
    run_started(runner, ctx, run, launched).await
}

/// Creates the run of a delegation from the caller to `target` (origin `delegation`, or
/// `evaluate` for an evaluate-loop round): over an agent link that admits the caller's user,
/// with the target's own tools at the next depth, counted against the link's and the target's
/// limits. The refusal, in words for the model, when it cannot start.
pub(super) async fn start_delegation(
    runner: &Runner,
    ctx: &CallContext,
    target: &str,
    task: &str,
    origin: &'static str,
    background: bool,
) -> Result<talon_store::RunRecord, ToolOutput> {
    let source = ctx.agent_key.clone().unwrap_or_default();
    let targets = runner
        .targets(&source, ctx.user.as_deref())
        .await
        .map_err(ToolOutput::error)?;
    let Some((_, link)) = targets.iter().find(|(t, _)| t.key == target) else {
        let known: Vec<&str> = targets.iter().map(|(t, _)| t.key.as_str()).collect();
        return Err(ToolOutput::own_error(format!(
            "you cannot delegate to {}: no agent link allows it. {}",
            visible(target),
            if known.is_empty() {
                "You have no delegation targets; do the task yourself.".to_string()
            } else {
                format!("You can delegate to: {}.", known.join(", "))
            }
        )));
    };
    // The target works with its own tools, at the next depth (the policy engine applies the
    // deny lists there).
    let tools = runner
        .engine()
        .own_tool_names(target, ctx.user.as_deref(), ctx.spawn_depth + 1)
        .await
        .map_err(|e| ToolOutput::own_error(e.to_string()))?;
    let load = match runner.store().agent(target).await {
        Ok(Some(record)) => serde_json::from_str::<serde_json::Value>(&record.settings)
            .ok()
            .and_then(|s| s["max_delegation_load"].as_i64()),
        _ => None,
    };
    let spec = ChildSpec {
        agent: target,
        task,
        tools,
        origin,
        background,
        over_link: Some((
            link.max_concurrent,
            link.direction == talon_store::LinkDirection::Bidirectional,
        )),
        target_load: load,
        context_mode: "fresh",
        overrides: ChildOverrides::default(),
    };
    runner
        .start_child(ctx, &spec, None)
        .await
        .map_err(|refused| ToolOutput::own_error(refused.to_string()))
}

/// Input of [`DelegateSearch`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateSearchInput {
    /// What the task needs (words matched against the agents' keys, names, descriptions and
    /// settings).
    pub query: String,
    /// At most this many agents (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// GoClaw's `delegate_search`.
pub struct DelegateSearch {
    runner: Runner,
}

impl Tool for DelegateSearch {
    type Input = DelegateSearchInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "delegate_search",
            "Find agents you can delegate to: matches your query's words (and, with an \
             embedding model, its meaning) against their keys, names, descriptions and \
             settings; best first.",
            SideEffect::ReadOnly,
        )
        .in_group("delegation")
    }

    async fn execute(&self, call: Authorized<DelegateSearchInput>) -> ToolOutput {
        let ctx = call.ctx();
        let input = call.input();
        let source = ctx.agent_key.clone().unwrap_or_default();
        let targets = match self.runner.targets(&source, ctx.user.as_deref()).await {
            Ok(targets) => targets,
            Err(e) => return ToolOutput::own_error(e),
        };
        let targets: Vec<Target> = targets.into_iter().map(|(t, _)| t).collect();
        let embedder = self
            .runner
            .embedder
            .as_ref()
            .map(|e| e as &dyn talon_embed::Embedder);
        let found = rank(
            &targets,
            &input.query,
            embedder,
            input.limit.unwrap_or(5).clamp(1, 20),
        )
        .await;
        if found.is_empty() {
            return ToolOutput::own("No agent you can delegate to matches; do the task yourself.");
        }
        let lines: Vec<String> = found
            .iter()
            .map(|t| format!("{} ({}): {}", t.key, t.name, one_line(&t.description, 200)))
            .collect();
        ToolOutput::text(lines.join("\n"))
    }
}

/// The targets best matching `query`, at most `limit`: by words and, with `embedder`, by
/// meaning (`talon_embed::fuse`). A failing embedder leaves the words' ranking.
async fn rank<'t>(
    targets: &'t [Target],
    query: &str,
    embedder: Option<&dyn talon_embed::Embedder>,
    limit: usize,
) -> Vec<&'t Target> {
    let words = by_words(targets, query);
    let candidates: Vec<(String, String)> = targets
        .iter()
        .map(|t| (t.key.clone(), format!("{}: {}", t.name, t.description)))
        .collect();
    let near = talon_embed::nearest_if(embedder, "delegate_search", query, &candidates).await;
    talon_embed::fuse(&words, &near)
        .into_iter()
        .filter_map(|f| targets.iter().find(|t| t.key == f.key))
        .take(limit)
        .collect()
}

/// The keys of the targets matching `query`'s words, with their scores (a key match counts
/// most, then the name, the description, the settings), best first; none when no word matches.
fn by_words(targets: &[Target], query: &str) -> Vec<(String, f64)> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect();
    let mut scored: Vec<(usize, &Target)> = targets
        .iter()
        .map(|t| {
            let fields = [
                (t.key.to_lowercase(), 4),
                (t.name.to_lowercase(), 3),
                (t.description.to_lowercase(), 2),
                (t.settings.to_lowercase(), 1),
            ];
            let score = words
                .iter()
                .map(|w| {
                    fields
                        .iter()
                        .filter(|(text, _)| text.contains(w.as_str()))
                        .map(|(_, weight)| weight)
                        .sum::<usize>()
                })
                .sum();
            (score, t)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.key.cmp(&b.1.key)));
    scored
        .into_iter()
        .map(|(score, t)| (t.key.clone(), score as f64))
        .collect()
}

impl Runner {
    /// Registers `delegate`, `delegate_search`, `evaluate_loop` and `handoff` on this runner.
    pub fn register_delegation_tools(&self, registry: &Registry) -> Result<(), RegistryError> {
        registry.register(Delegate {
            runner: self.clone(),
        })?;
        registry.register(DelegateSearch {
            runner: self.clone(),
        })?;
        registry.register(super::evaluate::EvaluateLoop {
            runner: self.clone(),
        })?;
        registry.register(super::handoff::Handoff {
            runner: self.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(key: &str, name: &str, description: &str) -> Target {
        Target {
            key: key.into(),
            name: name.into(),
            description: description.into(),
            settings: "{}".into(),
        }
    }

    #[test]
    fn search_ranks_by_where_the_words_match() {
        let targets = vec![
            target("billing", "Billing", "invoices and refunds"),
            target("support", "Support", "answers billing questions too"),
            target("research", "Research", "reads papers"),
        ];
        let found = by_words(&targets, "billing refunds");
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["billing", "support"]);
        assert!(by_words(&targets, "astronomy").is_empty());
    }

    #[tokio::test]
    async fn with_an_embedder_a_task_in_other_words_finds_its_agent() {
        let targets = vec![
            target("billing", "Billing", "invoices and refunds"),
            target("research", "Research", "reads papers"),
        ];
        let embedder = talon_embed::ConceptEmbedder::new(&[
            &["refunds", "reimburse", "money", "invoices", "charge"],
            &["papers", "literature", "studies"],
        ]);
        let keys =
            |found: Vec<&Target>| -> Vec<String> { found.iter().map(|t| t.key.clone()).collect() };
        assert!(
            rank(&targets, "reimburse a charge", None, 5)
                .await
                .is_empty()
        );
        assert_eq!(
            keys(rank(&targets, "reimburse a charge", Some(&embedder), 5).await),
            ["billing"]
        );
        assert_eq!(
            keys(rank(&targets, "survey the literature", Some(&embedder), 1).await),
            ["research"]
        );
    }
}

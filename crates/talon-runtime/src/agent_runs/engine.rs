//! The turn engine: one agent turn, start to end — the caller bound to its agent, the agent's
//! model, the session's history from the store (compacted as it fills), the system prompt, the
//! loop over the model and the pipeline, the turn saved whole when it ends.
//!
//! It knows nothing of child runs, teams, schedules, channels or handoffs: those are the
//! services ([`crate::runner::Runner`]) that start turns here. What a service adds to a turn's system
//! prompt it gives through [`TurnSections`], so the engine never calls back into a service.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use talon_agent::provider::ProviderKind;
use talon_agent::{Agent, Message, RunEvent, TurnInput};
use talon_core::caller::key_part;
use talon_core::permission::PermissionMode;
use talon_core::policy::Dialect;
use talon_core::questions::Questions;
use talon_core::{CallContext, Callers, Pipeline, RunKind};
use talon_store::Store;
use talon_tools::claude_code::config::{MODE_BEFORE_PLAN, PERMISSION_MODE};

use super::history::Compaction;
use super::modes::{stored_mode, turn_modes};
use super::running::RunningTurns;
use super::{Ran, RunError, TurnRequest, stop_label, store_failed};
use crate::chat_config::agent_model;
use crate::config::Config;

/// How long a gateway holds a run, a turn (and a result it announces) without renewing it; the
/// supervisor renews every third of it. `[subagents] lease_seconds` overrides it.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Runs turns; cheap to clone.
#[derive(Clone)]
pub struct TurnEngine {
    pub(super) config: Arc<Config>,
    pipeline: Arc<Pipeline>,
    template: Arc<CallContext>,
    callers: Callers,
    pub(super) store: Store,
    agents: Arc<Mutex<HashMap<String, Arc<BuiltAgent>>>>,
    /// Where tools' questions wait when the turn's entry point cannot ask (HTTP).
    questions: Option<Arc<Questions>>,
    /// The turns running now, by session, so one can be cancelled from elsewhere.
    pub(super) running: Arc<Mutex<RunningTurns>>,
    /// This process, as the owner of the runs and turns it runs (leases in the store).
    instance: Arc<str>,
    /// The skills catalogue, listed in the system prompt (SKILLS.md).
    skills: Option<talon_tools::skills::catalog::Skills>,
}

/// An agent's loop and the API key to scrub from what it shows.
pub(crate) struct BuiltAgent {
    pub(crate) agent: Agent,
    api_key: Option<String>,
}

/// What the services add to a turn's system prompt: context files they generate (an agent's
/// DELEGATION.md, a lead's TEAM.md) and notes about the session (the runs it started that still
/// run). The engine asks; it never knows which service answered.
pub(crate) trait TurnSections: Sync {
    /// Generated context files of `agent` for `user`, by name: each is shown unless the agent
    /// (or the user) stored a file of that name.
    fn files(
        &self,
        agent: &str,
        user: Option<&str>,
    ) -> impl Future<Output = Vec<(&'static str, String)>> + Send;
    /// A note about `session` put after everything else (and after any compaction).
    fn session_note(&self, session: &str) -> impl Future<Output = Option<String>> + Send;
}

impl TurnEngine {
    pub fn new(
        config: Config,
        pipeline: Arc<Pipeline>,
        template: CallContext,
        callers: Callers,
        store: Store,
    ) -> Self {
        Self {
            config: Arc::new(config),
            pipeline,
            template: Arc::new(template),
            callers,
            store,
            agents: Arc::default(),
            questions: None,
            skills: None,
            running: Arc::default(),
            instance: Arc::from(format!("talon-{}", uuid::Uuid::new_v4().simple())),
        }
    }

    pub(crate) fn set_questions(&mut self, questions: Arc<Questions>) {
        self.questions = Some(questions);
    }

    /// The skills catalogue, if the runtime has one (custom agents are read through it too).
    pub(crate) fn skills(&self) -> Option<&talon_tools::skills::catalog::Skills> {
        self.skills.as_ref()
    }

    pub(crate) fn set_skills(&mut self, skills: talon_tools::skills::catalog::Skills) {
        self.skills = Some(skills);
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The pipeline every call of its turns goes through.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// This process's id as the owner of runs.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// `[subagents]`: the limits and deny lists of child runs.
    pub fn subagent_policy(&self) -> &talon_core::policy::SubagentPolicy {
        &self.config.subagents
    }

    /// The agent turns run as when they name none.
    pub fn default_agent(&self) -> &str {
        self.callers.default_agent()
    }

    /// The session key for `chat` of `agent` on `channel` (GoClaw's shape: agent, channel,
    /// peer kind, chat). A user's chats carry the user (`…:user:<user>:<chat>`), so two users
    /// choosing the same name get two sessions; a call naming no user gets `…:direct:<chat>`.
    pub fn session_key(agent: &str, channel: &str, user: Option<&str>, chat: &str) -> String {
        match user {
            Some(user) => format!("agent:{agent}:{channel}:user:{}:{chat}", key_part(user)),
            None => format!("agent:{agent}:{channel}:direct:{chat}"),
        }
    }

    /// The key of `user`'s stateless turns with `agent` on `channel`: never stored, but it names
    /// what the turn's calls share (the rate limit, background commands, the session sandbox),
    /// so each agent and user has their own.
    pub fn stateless_key(agent: &str, channel: &str, user: Option<&str>) -> String {
        match user {
            Some(user) => format!("agent:{agent}:{channel}:stateless:{}", key_part(user)),
            None => format!("agent:{agent}:{channel}:stateless"),
        }
    }

    /// The context of a turn: the caller bound to its agent and workspace.
    pub async fn context(
        &self,
        agent: Option<&str>,
        user: Option<&str>,
        channel: &str,
    ) -> Result<CallContext, RunError> {
        let mut ctx = (*self.template).clone();
        ctx.channel_type = Some(channel.to_string());
        ctx.peer_kind = Some("direct".into());
        ctx.run_kind = RunKind::Interactive;
        ctx.scrub_bag = Default::default();
        self.callers
            .bind(&mut ctx, agent, user)
            .await
            .map_err(|e| match e {
                talon_core::CallerError::UnknownAgent { .. } => {
                    RunError::UnknownAgent(e.to_string())
                }
                // The agents' directory (the store) could not be asked: not the caller's fault.
                talon_core::CallerError::Directory { .. } => RunError::Unavailable(e.to_string()),
                e => RunError::Invalid(e.to_string()),
            })?;
        Ok(ctx)
    }

    /// The agent's loop over its model, built once per agent.
    pub(crate) async fn agent(&self, key: &str) -> Result<Arc<BuiltAgent>, RunError> {
        if let Some(agent) = self
            .agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
        {
            return Ok(Arc::clone(agent));
        }
        let model = agent_model(&self.config, &self.config.providers, &self.store, key)
            .await
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        let built = Arc::new(BuiltAgent {
            agent: Agent::new(Arc::clone(&self.pipeline), model.provider, model.config),
            api_key: model.api_key,
        });
        self.agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_string(), Arc::clone(&built));
        Ok(built)
    }

    /// The names of the tools offered to `ctx` (its agent's, after policy and grants).
    pub async fn tool_names(&self, ctx: &CallContext) -> Vec<String> {
        self.tool_specs(ctx)
            .await
            .into_iter()
            .map(|spec| spec.name)
            .collect()
    }

    /// The tools `agent` has of its own for `user` at spawn depth `depth` (the policy engine
    /// applies the subagent and leaf deny lists there), for a run of that agent: under both
    /// dialects' names, since the run's own turn keeps its provider's (a list of GoClaw's names
    /// would leave a Claude Code turn with none of them).
    pub async fn own_tool_names(
        &self,
        agent: &str,
        user: Option<&str>,
        depth: u32,
    ) -> Result<Vec<String>, RunError> {
        Ok(self
            .own_tool_specs(agent, user, depth)
            .await?
            .into_iter()
            .map(|spec| spec.name)
            .collect())
    }

    /// The specs of [`TurnEngine::own_tool_names`].
    pub async fn own_tool_specs(
        &self,
        agent: &str,
        user: Option<&str>,
        depth: u32,
    ) -> Result<Vec<talon_core::ToolSpec>, RunError> {
        let mut ctx = self.context(Some(agent), user, "run").await?;
        ctx.spawn_depth = depth;
        ctx.dialect = None;
        Ok(self.tool_specs(&ctx).await)
    }

    /// The specs of the tools offered to `ctx`.
    pub async fn tool_specs(&self, ctx: &CallContext) -> Vec<talon_core::ToolSpec> {
        self.pipeline
            .offered_to(ctx)
            .await
            .iter()
            .map(|t| t.spec().clone())
            .collect()
    }

    /// Checks that `agent` has a usable model configuration; the wire format of its provider.
    pub async fn check_model(
        &self,
        agent: &str,
    ) -> Result<talon_agent::provider::ProviderKind, RunError> {
        self.agent(agent).await.map(|a| a.agent.provider().kind())
    }

    /// The model name a session chose (`settings`: its stored settings), while
    /// `[subagents.models]` still lists it; a name it no longer lists is ignored.
    pub fn session_model<'s>(
        &self,
        settings: &'s serde_json::Map<String, serde_json::Value>,
    ) -> Option<&'s str> {
        settings
            .get("model")
            .and_then(|m| m.as_str())
            .filter(|name| self.config.subagents.models.contains_key(*name))
    }

    /// How long a lease of this process's runs and turns lasts (`[subagents] lease_seconds`).
    pub fn lease(&self) -> Duration {
        self.subagent_policy()
            .lease_seconds
            .map_or(DEFAULT_LEASE, |s| Duration::from_secs(u64::from(s.max(1))))
    }

    /// Runs one turn of `request`: binds the caller, loads the session, runs the loop, saves
    /// the turn. `sections` are what the services add to its system prompt.
    pub(crate) async fn turn(
        &self,
        request: TurnRequest<'_>,
        sections: &impl TurnSections,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let mut ctx = self
            .context(request.agent, request.user, request.channel)
            .await?;
        let agent_key = ctx.agent_key.clone().unwrap_or_default();
        if let Some(session) = &request.session {
            self.check_session(session, &agent_key, ctx.user.as_deref())
                .await?;
        }
        if let Some(origin) = &request.origin {
            ctx.channel = Some(origin.channel.clone());
            ctx.chat_id = Some(origin.chat.clone());
            ctx.peer_kind = Some(origin.peer_kind.clone());
            if let Some(tools) = &origin.tool_allow {
                ctx.tool_allow = Some(tools.clone().into());
            }
        }
        let built = self.agent(&agent_key).await?;
        // The session's own settings (the Config tool's): a model of its own, a permission
        // mode, compaction off. The entry point's explicit permission mode wins.
        let settings = match &request.session {
            Some(session) => self.store.session_settings(session).await.map_err(|e| {
                store_failed(format_args!("cannot read the settings of {session}"), e)
            })?,
            None => Default::default(),
        };
        let child_model = request.child.as_ref().and_then(|c| c.model.as_deref());
        // A session's own model (the Config tool's) is a name `[subagents.models]` lists,
        // mapped to its provider model; a name it does not list (stored before the check, or
        // the list changed) is ignored.
        let session_model = self
            .session_model(&settings)
            .and_then(|name| self.config.subagents.models.get(name))
            .map(String::as_str);
        let own_model = child_model
            .or(session_model)
            .filter(|m| *m != built.agent.config().model)
            .map(|model| {
                let mut config = built.agent.config().clone();
                config.model = model.to_string();
                Agent::new(
                    Arc::clone(&self.pipeline),
                    Arc::clone(built.agent.provider()),
                    config,
                )
            });
        let agent = own_model.as_ref().unwrap_or(&built.agent);
        // A child run makes at most `[subagents] max_iterations` model requests, and no more
        // than its root run's budget has left.
        let capped = request.child.as_ref().and_then(|child| {
            let mut config = agent.config().clone();
            let cap = child
                .max_requests
                .unwrap_or(u32::MAX)
                .min(self.config.subagents.max_iterations)
                .max(1);
            config.max_iterations = config.max_iterations.min(cap);
            config.token_budget = match (config.token_budget, child.token_budget) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            (config.max_iterations != agent.config().max_iterations
                || config.token_budget != agent.config().token_budget)
                .then(|| {
                    Agent::new(
                        Arc::clone(&self.pipeline),
                        Arc::clone(agent.provider()),
                        config,
                    )
                })
        });
        let agent = capped.as_ref().unwrap_or(agent);
        if let Some(key) = &built.api_key {
            ctx.scrub_bag.add(key.clone());
        }
        ctx.provider = Some(agent.provider_name().to_string());
        // One tool per job, named as the model knows them: Claude models were trained on
        // Claude Code's tools, others get GoClaw's (`[tools] dialect` overrides).
        ctx.dialect = Some(match agent.provider().kind() {
            ProviderKind::Anthropic => Dialect::ClaudeCode,
            ProviderKind::Openai => Dialect::Goclaw,
        });
        ctx.model = Some(agent.config().model.clone());
        ctx.cancel = request.cancel;
        if let Some(child) = &request.child {
            ctx.spawn_depth = child.spawn_depth;
            ctx.tool_allow = Some(child.tool_allow.clone().into());
            ctx.run_kind = if child.scheduled {
                RunKind::Scheduled
            } else {
                RunKind::Subagent
            };
            ctx.run = child.run.clone();
        }
        (ctx.permission_mode, ctx.mode_after_plan) =
            turn_modes(ctx.permission_mode, request.permission_mode, &settings);
        let starting_mode = ctx.permission_mode;
        let compact = if settings.get("autoCompactEnabled") == Some(&serde_json::Value::Bool(false))
        {
            Compaction::Off
        } else {
            Compaction::Auto
        };
        let mut history = request.history;
        let mut start = None;
        let mut summary = None;
        if let Some(session) = &request.session {
            ctx.session_key = session.clone();
            let (earlier, live) = self.live_history(agent, session, compact, events).await?;
            summary = earlier;
            history = live;
            start = Some(
                self.store
                    .begin_turn(session, &agent_key, ctx.user.as_deref())
                    .await
                    .map_err(session_error)?,
            );
        } else {
            ctx.session_key = Self::stateless_key(&agent_key, request.channel, ctx.user.as_deref());
        }
        let _running = request
            .session
            .as_deref()
            .map(|session| self.register(session, &ctx.cancel));
        ctx.client = request.client.or_else(|| {
            self.questions.as_ref().map(|q| {
                q.client_in_run(
                    &ctx.session_key,
                    ctx.agent_key.as_deref(),
                    ctx.user.as_deref(),
                    &ctx.run,
                )
            })
        });
        let mut prompt = request.prompt;
        if !request.api.resume {
            ctx.turn_prompt = Some(prompt.as_str().into());
        }
        if start.is_some_and(|s| s.turn == 1)
            && let Some(context) = agent.session_start(&ctx).await
        {
            prompt = format!("{context}\n\n{prompt}");
        }
        let mut system = self
            .system_prompt(agent.config().system.as_deref(), &agent_key, &ctx, sections)
            .await?;
        if let Some(client) = request.api.system.filter(|s| !s.trim().is_empty()) {
            system = Some(match system {
                Some(s) => format!("{s}\n\n{client}"),
                None => client,
            });
        }
        if let Some(summary) = summary {
            let earlier = format!("# Earlier in this session (summary)\n\n{summary}");
            system = Some(match system {
                Some(s) => format!("{s}\n\n{earlier}"),
                None => earlier,
            });
        }
        // The runs this session started that still run: listed after any compaction too.
        if let Some(session) = &request.session
            && let Some(live) = sections.session_note(session).await
        {
            system = Some(match system {
                Some(s) => format!("{s}\n\n{live}"),
                None => live,
            });
        }
        let bus = self.pipeline.events();
        let started = std::time::Instant::now();
        bus.run_started(
            &talon_core::events::TurnIds {
                session_key: &ctx.session_key,
                agent_key: &agent_key,
                user: ctx.user.as_deref(),
                run: &ctx.run,
            },
            request.channel,
        );
        let (session_key, user, run_ref) =
            (ctx.session_key.clone(), ctx.user.clone(), ctx.run.clone());
        // A resumed run's turn continues from its checkpoint: those messages are the turn's
        // own (saved with it), and there is no new prompt.
        let resumed = request
            .child
            .as_ref()
            .map(|c| c.resume_from.clone())
            .unwrap_or_default();
        history.extend(resumed.iter().cloned());
        let message = (!request.api.resume && resumed.is_empty()).then_some(Message::User {
            text: prompt,
            images: request.api.images,
        });
        let input = TurnInput {
            system: system.as_deref(),
            history: &history,
            user: message,
            options: &request.api.options,
        };
        let outcome = agent.run_turn_with(input, Arc::new(ctx), events).await;
        bus.run_finished(
            &talon_core::events::TurnIds {
                session_key: &session_key,
                agent_key: &agent_key,
                user: user.as_deref(),
                run: &run_ref,
            },
            stop_label(&outcome.stop),
            outcome.iterations,
            started.elapsed(),
        );
        if let (Some(session), Some(start)) = (&request.session, start) {
            // A mode the turn moved to (an approved plan) is where the next turn starts; while
            // the session stays in plan mode, so is the mode an approved plan returns to.
            let mut keep = Vec::new();
            if outcome.permission_mode != starting_mode {
                keep.push((PERMISSION_MODE, outcome.permission_mode));
            }
            if outcome.permission_mode == PermissionMode::Plan
                && stored_mode(&settings, MODE_BEFORE_PLAN) != Some(outcome.mode_after_plan)
            {
                keep.push((MODE_BEFORE_PLAN, outcome.mode_after_plan));
            }
            for (setting, mode) in keep {
                let mode = serde_json::json!(mode.as_str());
                if let Err(e) = self
                    .store
                    .set_session_setting(session, setting, &mode)
                    .await
                {
                    tracing::warn!(session, error = %e, "cannot keep the session's permission mode");
                }
            }
            let messages: Vec<String> = resumed
                .iter()
                .chain(&outcome.messages)
                .filter_map(|m| serde_json::to_string(m).ok())
                .collect();
            let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            // The model's work is done and paid for: an unreachable database delays the save,
            // it does not drop the turn.
            crate::landing::until_landed("a turn", || {
                self.store.finish_turn_delivering(
                    session,
                    start.turn,
                    &messages,
                    stop_label(&outcome.stop),
                    (
                        to_i64(outcome.usage.input_tokens),
                        to_i64(outcome.usage.output_tokens),
                    ),
                    &request.delivering,
                )
            })
            .await
            .map_err(|e| store_failed("the turn ran but could not be saved", e))?;
        }
        Ok(Ran {
            outcome,
            agent: agent_key,
            session: request.session,
            previous_interrupted: start.is_some_and(|s| s.previous_interrupted),
        })
    }

    /// Refuses a turn in `session` unless it is new or a session of `agent` and `user`, before
    /// anything of it is read: another user's conversation is theirs. Keys Talon builds for a
    /// user ([`TurnEngine::session_key`]) or for stateless turns cannot be taken by anyone else.
    async fn check_session(
        &self,
        session: &str,
        agent: &str,
        user: Option<&str>,
    ) -> Result<(), RunError> {
        let reserved = match session.split(':').collect::<Vec<_>>().as_slice() {
            ["agent", _, _, "stateless", ..] => true,
            ["agent", _, _, "user", owner, _, ..] => user.map(key_part).as_deref() != Some(*owner),
            _ => false,
        };
        if reserved {
            return Err(RunError::Invalid(format!(
                "session {session:?} is reserved for another caller; choose another session key"
            )));
        }
        self.store
            .check_session_owner(session, agent, user)
            .await
            .map_err(session_error)
    }
}

/// A store error about a session key: the caller's to fix when the key is invalid or taken.
fn session_error(e: talon_store::StoreError) -> RunError {
    match e {
        talon_store::StoreError::Invalid { .. } => RunError::Invalid(e.to_string()),
        e => store_failed("the session cannot be used", e),
    }
}

//! The runtime's services over the turn engine: [`Runner`], what every entry point holds.
//!
//! The turn engine ([`crate::agent_runs::TurnEngine`]) runs one turn and knows no service. The
//! services that start turns on it live in modules of their own — child runs ([`crate::runs`]:
//! subagents, delegation, evaluate rounds, gates, handoff), teams ([`crate::teams`]), scheduled
//! jobs ([`crate::cron`]) and channels ([`crate::channels`]) — each with its tools, its HTTP
//! routes, its typed operations and its error enum, and all sharing the run service's one way to
//! start a run ([`crate::runs::authority`]). `Runner` is where they meet: it holds the engine and
//! the services' state, and a person's turn passes here first (a handed-off chat goes to its
//! target, a blocking gate holds the answer). A new kind of work is a new service module, never
//! a new field of the engine.

use std::sync::Arc;

use talon_agent::RunEvent;
use talon_core::Pipeline;
use talon_core::questions::Questions;
use talon_store::Store;

use crate::agent_runs::{Ran, RunError, TurnEngine, TurnRequest, TurnSections};

/// The turn engine and the services that run on it; cheap to clone. Entry points hold one.
#[derive(Clone)]
pub struct Runner {
    engine: TurnEngine,
    /// The child runs this process runs and announces (see [`crate::runs`]).
    pub(crate) runs: Arc<crate::runs::RunState>,
    /// The embedding model (remembering its candidates' vectors), for ranking delegation
    /// targets by meaning; `None`: by words only.
    pub(crate) embedder: Option<talon_embed::CachedEmbedder>,
    /// The configured chat channels: scheduled jobs deliver results through them.
    pub(crate) channels: crate::channels::Channels,
}

impl Runner {
    /// The services over `engine`.
    pub fn new(engine: TurnEngine) -> Self {
        Self {
            engine,
            runs: Arc::default(),
            embedder: None,
            channels: crate::channels::Channels::default(),
        }
    }

    /// Tools' questions in turns whose entry point gives no client of its own wait in
    /// `questions` (answered over `/v1/questions`).
    pub fn with_questions(mut self, questions: Arc<Questions>) -> Self {
        self.engine.set_questions(questions);
        self
    }

    /// Jobs deliver results to chats of `channels`.
    pub fn with_channels(mut self, channels: crate::channels::Channels) -> Self {
        self.channels = channels;
        self
    }

    /// Lists `skills` (name and description) in every turn's system prompt.
    pub fn with_skills(mut self, skills: talon_tools::skills::catalog::Skills) -> Self {
        self.engine.set_skills(skills);
        self
    }

    /// Ranks delegation targets by meaning as well as words, with `embedder`.
    pub fn with_embedder(mut self, embedder: Arc<dyn talon_embed::Embedder>) -> Self {
        self.embedder = Some(talon_embed::CachedEmbedder::new(embedder));
        self
    }

    /// The turn engine the services run their turns on.
    pub fn engine(&self) -> &TurnEngine {
        &self.engine
    }

    pub fn store(&self) -> &Store {
        self.engine.store()
    }

    /// The pipeline every call of its turns goes through.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        self.engine.pipeline()
    }

    /// `[subagents]`: the limits and deny lists of child runs.
    pub fn subagent_policy(&self) -> &talon_core::policy::SubagentPolicy {
        self.engine.subagent_policy()
    }

    /// Runs one turn: binds the caller, loads the session, runs the loop, saves the turn. A
    /// person's turn in a chat that was handed off runs as the agent it was handed to, in that
    /// agent's session for the chat ([`crate::runs::handoff`]).
    pub async fn run(
        &self,
        request: TurnRequest<'_>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let route = match (&request.session, &request.child) {
            (Some(session), None) if request.delivering.is_empty() => {
                self.route(request.channel, session, request.user).await
            }
            _ => None,
        };
        let request = match &route {
            Some(route) => TurnRequest {
                agent: Some(&route.target_agent),
                session: Some(route.target_session.clone()),
                ..request
            },
            None => request,
        };
        // A person's turn in a stored session passes the agent's `agent.final` gates.
        let gated = request.child.is_none()
            && request.delivering.is_empty()
            && request.session.is_some()
            && !request.api.resume;
        let retry = gated.then(|| crate::runs::gates::Resend {
            user: request.user.map(str::to_string),
            channel: request.channel,
            client: request.client.clone(),
            permission_mode: request.permission_mode,
            cancel: request.cancel.clone(),
        });
        let Some(retry) = retry else {
            return self.run_turn(request, events).await;
        };
        // An answer a blocking gate judges is not shown before it passes: its text is held
        // (tool activity still shows) and given once, judged; a rejected draft is never seen.
        let agent = request
            .agent
            .unwrap_or(self.engine.default_agent())
            .to_string();
        if !self.blocking_final_gates(&agent).await {
            let ran = self.run_turn(request, events).await?;
            return self.gate_final(ran, retry, events).await;
        }
        let holding = |event: RunEvent| {
            if !matches!(event, RunEvent::Text { .. }) {
                events(event);
            }
        };
        let ran = self.run_turn(request, &holding).await?;
        let ran = self.gate_final(ran, retry, &holding).await?;
        if ran.outcome.stop == talon_agent::TurnStop::Final && !ran.outcome.text.is_empty() {
            events(RunEvent::Text {
                text: ran.outcome.text.clone(),
            });
        }
        Ok(ran)
    }

    /// One turn on the engine, with what the services add to its system prompt.
    pub(crate) async fn run_turn(
        &self,
        request: TurnRequest<'_>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        self.engine.turn(request, self, events).await
    }
}

impl TurnSections for Runner {
    async fn files(&self, agent: &str, user: Option<&str>) -> Vec<(&'static str, String)> {
        let mut files = Vec::new();
        // Generated for an agent with delegation targets.
        if let Some(delegation) = self.delegation_file(agent, user).await {
            files.push(("DELEGATION.md", delegation));
        }
        // The lead of a team sees TEAM.md (members see it only in the runs of team work).
        if let Some(team) = self.team_file(agent, user.unwrap_or_default()).await {
            files.push(("TEAM.md", team));
        }
        files
    }

    async fn session_note(&self, session: &str) -> Option<String> {
        self.live_children_note(session).await
    }
}

//! A person's chat with an agent at a terminal (`talon chat`): the session it is in, the
//! permission mode its next turn starts in, the last turn's messages, the background runs'
//! results announced into it, and what its slash commands change. The binary reads lines and
//! prints; every rule of the chat is here, where the HTTP API's rules for the same things live.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use talon_agent::{Message, RunEvent};
use talon_core::ClientHandle;
use talon_core::events::ToolEvent;
use talon_core::permission::PermissionMode;
use talon_core::visible::visible;
use talon_store::SessionRecord;
use talon_tools::claude_code::config::{ModelRefused, model_choice};
use tokio_util::sync::CancellationToken;

use crate::agent_runs::{Ran, RunError, TurnEngine, TurnRequest, store_failed};
use crate::runner::Runner;
use crate::runs::announce::Announcement;

/// The channel a terminal chat's sessions and calls are on.
const CHANNEL: &str = "cli";

/// A chat bound to its agent and session; the binary drives it.
pub struct ChatSession {
    runner: Runner,
    agent: String,
    /// The session the next turn runs in (`clear` starts another); shared with whoever shows
    /// the session's child runs.
    session: Arc<Mutex<String>>,
    /// The mode the next turn runs in (`None`: as configured); an approved plan moves it on.
    mode: Mutex<Option<PermissionMode>>,
    /// The last turn's messages.
    last_turn: Mutex<Vec<Message>>,
}

/// Which model the session's turns use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionModel {
    /// One the session chose (`/model NAME`, the `Config` tool).
    Own(String),
    /// Its agent's.
    Agent(String),
}

/// Why a model cannot be chosen for the session.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The name is not one `[subagents.models]` lists.
    #[error(transparent)]
    NotAllowed(#[from] ModelRefused),
    #[error(transparent)]
    Run(#[from] RunError),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new session's name: the time and this process.
pub fn new_session_name() -> String {
    format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    )
}

impl ChatSession {
    /// A chat with `agent` (default: the configured default agent) in `session` (default: a
    /// new one), its turns starting in `mode`. A missing agent or an unusable model
    /// configuration is said here, before anything runs ([`RunError::Invalid`] or
    /// [`RunError::UnknownAgent`]).
    pub async fn open(
        runner: Runner,
        agent: Option<&str>,
        session: Option<&str>,
        mode: Option<PermissionMode>,
    ) -> Result<Self, RunError> {
        let ctx = runner.engine().context(agent, None, CHANNEL).await?;
        let agent = ctx.agent_key.unwrap_or_default();
        runner.engine().check_model(&agent).await?;
        let name = session.map_or_else(new_session_name, str::to_string);
        let session = TurnEngine::session_key(&agent, CHANNEL, None, &name);
        Ok(Self {
            runner,
            agent,
            session: Arc::new(Mutex::new(session)),
            mode: Mutex::new(mode),
            last_turn: Mutex::new(Vec::new()),
        })
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The session's key now.
    pub fn session(&self) -> String {
        lock(&self.session).clone()
    }

    /// The session's key as it changes (for a task that follows the session's events).
    pub fn session_handle(&self) -> Arc<Mutex<String>> {
        Arc::clone(&self.session)
    }

    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    /// Runs a person's turn; `client` answers the tools' questions, `cancel` stops it.
    pub async fn turn(
        &self,
        prompt: &str,
        client: Option<ClientHandle>,
        cancel: CancellationToken,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        self.turn_delivering(prompt, Vec::new(), client, cancel, events)
            .await
    }

    /// Runs the turn announcing background results to the session; the claim on them is given
    /// back when it cannot run (another turn or gateway announces them).
    pub async fn announced(
        &self,
        announcement: Announcement,
        client: Option<ClientHandle>,
        cancel: CancellationToken,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let ran = self
            .turn_delivering(
                &announcement.prompt(),
                announcement.ids(),
                client,
                cancel,
                events,
            )
            .await;
        if ran.is_err() {
            self.runner.give_back(&announcement.session).await;
        }
        ran
    }

    async fn turn_delivering(
        &self,
        prompt: &str,
        delivering: Vec<String>,
        client: Option<ClientHandle>,
        cancel: CancellationToken,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<Ran, RunError> {
        let mode = *lock(&self.mode);
        let ran = self
            .runner
            .run(
                TurnRequest {
                    agent: Some(&self.agent),
                    user: None,
                    session: Some(self.session()),
                    history: Vec::new(),
                    prompt: prompt.to_string(),
                    channel: CHANNEL,
                    client,
                    permission_mode: mode,
                    cancel,
                    api: Default::default(),
                    child: None,
                    delivering,
                    origin: None,
                },
                events,
            )
            .await?;
        // A chat started in a mode follows it (an approved plan moves it on).
        if let Some(mode) = lock(&self.mode).as_mut() {
            *mode = ran.outcome.permission_mode;
        }
        *lock(&self.last_turn) = ran.outcome.messages.clone();
        Ok(ran)
    }

    /// The announcements for the current session, while the receiver lives.
    pub fn listen(&self) -> tokio::sync::mpsc::UnboundedReceiver<Announcement> {
        self.runner.listen(&self.session())
    }

    /// Whether runs the session started still run or results of theirs wait to be announced.
    pub async fn awaits_results(&self) -> bool {
        let session = self.session();
        let store = self.runner.store();
        store
            .live_child_runs(&session)
            .await
            .is_ok_and(|runs| !runs.is_empty())
            || store
                .pending_deliveries(&session, 1)
                .await
                .is_ok_and(|p| !p.is_empty())
    }

    /// Starts a new session (the last one stays in the store); its key.
    pub fn clear(&self) -> String {
        let key = TurnEngine::session_key(&self.agent, CHANNEL, None, &new_session_name());
        *lock(&self.session) = key.clone();
        lock(&self.last_turn).clear();
        key
    }

    /// The stored session's history.
    pub async fn history(&self) -> Result<Vec<Message>, RunError> {
        self.runner.engine().history(&self.session()).await
    }

    /// The last turn's messages.
    pub fn last_turn(&self) -> Vec<Message> {
        lock(&self.last_turn).clone()
    }

    /// The model the session's turns use: its own, when it chose one `[subagents.models]` still
    /// lists, else its agent's.
    pub async fn model(&self) -> Result<SessionModel, RunError> {
        let settings = self
            .runner
            .store()
            .session_settings(&self.session())
            .await
            .map_err(|e| store_failed("cannot read the session's settings", e))?;
        match self.runner.engine().session_model(&settings) {
            Some(own) => Ok(SessionModel::Own(own.to_string())),
            None => Ok(SessionModel::Agent(
                self.runner.engine().agent_model(&self.agent).await?,
            )),
        }
    }

    /// Later turns of the session use `model`: a name `[subagents.models]` lists, as for the
    /// `Config` tool.
    pub async fn set_model(&self, model: &str) -> Result<(), ModelError> {
        let listed: Vec<String> = self
            .runner
            .subagent_policy()
            .models
            .keys()
            .cloned()
            .collect();
        let model = model_choice(&listed, &serde_json::json!(model))?;
        self.runner
            .store()
            .set_session_setting(&self.session(), "model", &serde_json::json!(model))
            .await
            .map_err(|e| ModelError::Run(store_failed("cannot set the model", e)))
    }

    /// The mode the next turn starts in (`None`: as configured).
    pub fn mode(&self) -> Option<PermissionMode> {
        *lock(&self.mode)
    }

    pub fn set_mode(&self, mode: PermissionMode) {
        *lock(&self.mode) = Some(mode);
    }

    /// Summarises the session's oldest messages now; how many were.
    pub async fn compact(&self) -> Result<usize, RunError> {
        self.runner
            .engine()
            .compact(&self.agent, &self.session())
            .await
    }

    /// The session's turns and tokens so far (`None`: no turn has run in it yet).
    pub async fn usage(&self) -> Result<Option<SessionRecord>, RunError> {
        self.runner
            .store()
            .session(&self.session())
            .await
            .map_err(|e| store_failed("cannot read the session", e))
    }
}

/// A line for a person following a session: a child run starting or ending, a handoff, a team
/// board change; `None` for other events. What a model wrote is shown with control characters
/// visible.
pub fn progress_line(event: &ToolEvent) -> Option<String> {
    let run_id = |run: &talon_core::events::RunRef| run.run_id.clone().unwrap_or("-".into());
    Some(match event {
        ToolEvent::ChildRunStarted {
            origin,
            task,
            background,
            run,
            ..
        } => format!(
            "  ↳ {} {} started{}: {}",
            visible(origin),
            run_id(run),
            if *background {
                " in the background"
            } else {
                ""
            },
            visible(task)
        ),
        ToolEvent::ChildRunFinished {
            status,
            input_tokens,
            output_tokens,
            run,
            ..
        } => format!(
            "  ↳ {} {status} ({input_tokens} tokens in, {output_tokens} out)",
            run_id(run)
        ),
        ToolEvent::Handoff {
            from_agent,
            to_agent,
            reason,
            ..
        } => format!(
            "  ↪ the conversation goes from {} to {}: {}",
            visible(from_agent),
            visible(to_agent),
            visible(reason)
        ),
        ToolEvent::Team {
            team,
            agent_key,
            change,
            task_id,
            subject,
            ..
        } => format!(
            "  ▣ {} {}: {} {}",
            visible(team),
            change.replace('_', " "),
            if *task_id > 0 {
                format!("#{task_id} {}", visible(subject))
            } else {
                format!("to {}", visible(subject))
            },
            visible(agent_key)
        ),
        _ => return None,
    })
}

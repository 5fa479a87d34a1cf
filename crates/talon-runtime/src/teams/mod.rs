//! Agent teams at work (seed 000 §8, seed 002 §8): the lead posts tasks on the board, the
//! server dispatches them to idle members as runs, results reach the lead once.
//!
//! Lifecycle is the server's, not negotiated by models:
//! - **Dispatch** ([`Runner::dispatch_team`]): for each member with no live run for the team, the
//!   pending task of highest priority is claimed *for* it (one conditional statement, the same
//!   as a model's claim) and a run of that member is started on it (origin `team`), its parent
//!   the lead's session that posted the task. The run's task carries TEAM.md (members see it
//!   only in team work) and the results of the task's prerequisites.
//! - **End** ([`Runner::end_team_task`]): a run that completes completes its task with its
//!   answer, which reaches the lead's session once through the run outbox, prefixed
//!   `teammate:`; a run that ends otherwise gives its task back to the board (owner cleared), or
//!   fails it after three dispatches. Either way the team is dispatched again: tasks a
//!   completion unblocked, or one given back, go to whoever is idle.
//! - **Leases**: a gateway renews the claims of the runs it holds; one that dies stops renewing,
//!   and the supervisor of any gateway gives the tasks back ([`Runner::supervise_teams`]).
//! - **Telling the lead**: a task that fails (or is cancelled) names what it leaves blocked, in
//!   a message to the lead's mailbox; TEAM.md in the lead's prompt counts its unread messages.
//!
//! Which team a call works with is [`Runner::team_in_play`]: a member run's own team, a team
//! the call names (then it sticks to the conversation), the conversation's, or the agent's only
//! one — never the first of several (GoClaw #490).

use talon_core::CallContext;
use talon_store::{StoreError, TaskRecord, TaskStatus, TeamRecord};

use crate::runner::Runner;
use crate::runs::{ChildOverrides, ChildSpec, Ending};

mod board;
pub mod claude_code;
pub mod ops;
pub mod tools;

/// The session setting that holds a conversation's team.
const TEAM_SETTING: &str = "team";

/// Why a call has no team to work with ([`Runner::team_in_play`]).
#[derive(Debug, thiserror::Error)]
pub enum TeamInPlayError {
    /// The agent is on no team, not on the one named, or on several with none chosen; the
    /// message says what to do.
    #[error("{0}")]
    NoTeam(String),
    /// The team a member's run works for was deleted.
    #[error("team {0} no longer exists")]
    Gone(String),
    #[error("cannot read the teams: {0}")]
    Store(#[source] StoreError),
}

impl Runner {
    /// The team `ctx`'s call works with; `named`: the team the call names. Refused, saying
    /// what to do, when the agent is on no team, not on the named one, or on several and the
    /// conversation has none yet.
    pub async fn team_in_play(
        &self,
        ctx: &CallContext,
        named: Option<&str>,
    ) -> Result<TeamRecord, TeamInPlayError> {
        let agent = ctx.agent_key.clone().unwrap_or_default();
        let store = self.store();
        // A member's run works for the team that dispatched it, whatever it names.
        if let Some(team) = self.run_team(ctx).await {
            return match store.team(&team).await.map_err(TeamInPlayError::Store)? {
                Some(record) => Ok(record),
                None => Err(TeamInPlayError::Gone(team)),
            };
        }
        let teams = store
            .teams_of(&agent)
            .await
            .map_err(TeamInPlayError::Store)?;
        if let Some(named) = named.filter(|n| !n.trim().is_empty()) {
            let Some(team) = teams.iter().find(|t| t.name == named) else {
                return Err(TeamInPlayError::NoTeam(format!(
                    "you are not on a team named {}; {}",
                    talon_core::visible::visible(named),
                    on_teams(&teams)
                )));
            };
            // The conversation works with it from now on.
            let _ = store
                .set_session_setting(&ctx.session_key, TEAM_SETTING, &named.into())
                .await;
            return Ok(team.clone());
        }
        let chosen = store
            .session_settings(&ctx.session_key)
            .await
            .ok()
            .and_then(|s| {
                s.get(TEAM_SETTING)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            });
        if let Some(team) = chosen.and_then(|c| teams.iter().find(|t| t.name == c)) {
            return Ok(team.clone());
        }
        match teams.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(TeamInPlayError::NoTeam(
                "you are not on any team; an operator creates teams with `talon teams create`"
                    .into(),
            )),
            several => Err(TeamInPlayError::NoTeam(format!(
                "you are on several teams ({}); name the one you mean with team",
                several
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The team of the member run `ctx` is in, if it is one.
    async fn run_team(&self, ctx: &CallContext) -> Option<String> {
        let id = ctx.run.run_id.as_deref()?;
        let run = self.store().run(id).await.ok()??;
        ChildOverrides::of(&run).ok()?.team
    }

    /// TEAM.md for `agent`'s prompt in `user`'s conversation: the teams it leads, their members
    /// and how the board works, and its unread team messages; `None` when it leads none.
    pub(crate) async fn team_file(&self, agent: &str, user: &str) -> Option<String> {
        let teams = self.store().teams_of(agent).await.ok()?;
        let led: Vec<&TeamRecord> = teams.iter().filter(|t| t.lead == agent).collect();
        if led.is_empty() {
            return None;
        }
        let mut file = String::new();
        for team in led {
            file.push_str(&team_md(team, agent));
            let unread = self
                .store()
                .unread_team_messages(&team.name, agent, user)
                .await
                .unwrap_or(0);
            if unread > 0 {
                file.push_str(&format!(
                    "\nYou have {unread} unread team message(s): team_message action read.\n"
                ));
            }
        }
        Some(file)
    }

    /// Dispatches `team`'s pending tasks to its idle members (see the module docs); how many
    /// runs it started.
    pub async fn dispatch_team(&self, team: &str) -> usize {
        let Ok(Some(record)) = self.store().team(team).await else {
            return 0;
        };
        let busy = self.busy_members(team).await;
        let mut started = 0;
        for member in record.members.iter().filter(|m| !busy.contains(&m.agent)) {
            let claimed = self
                .store()
                .claim_task(team, &member.agent, None, self.lease_until(), None)
                .await;
            let task = match claimed {
                Ok(Some(task)) => {
                    self.task_event(&task, &member.agent, "task_claimed");
                    task
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(team, error = %e, "cannot claim a task to dispatch");
                    break;
                }
            };
            match self.start_member_run(&record, &member.agent, &task).await {
                Ok(()) => started += 1,
                Err(e) => {
                    tracing::warn!(team, task = task.id, error = %e, "cannot start a member's run; the task stays on the board");
                    let _ = self.store().return_task(task.id).await;
                    break;
                }
            }
        }
        started
    }

    /// The members of `team` with a live run for it.
    pub(crate) async fn busy_members(&self, team: &str) -> Vec<String> {
        let live = self
            .store()
            .live_runs_of_origin("team")
            .await
            .unwrap_or_default();
        live.into_iter()
            .filter(|run| ChildOverrides::of(run).is_ok_and(|o| o.team.as_deref() == Some(team)))
            .map(|run| run.agent_key)
            .collect()
    }

    /// Starts `member`'s run on `task` (claimed for it), as a child of the lead's session
    /// that posted the task.
    async fn start_member_run(
        &self,
        team: &TeamRecord,
        member: &str,
        task: &TaskRecord,
    ) -> Result<(), String> {
        let user = (!task.user_id.is_empty()).then_some(task.user_id.as_str());
        let mut lead = self
            .engine()
            .context(Some(&team.lead), user, "team")
            .await
            .map_err(|e| e.to_string())?;
        lead.session_key = task.lead_session.clone();
        let prompt = self.member_prompt(team, member, task).await;
        let run = self
            .start_team_run(&lead, team, member, &prompt, Some(task.id))
            .await?;
        self.store()
            .set_task_run(task.id, &run.id)
            .await
            .map_err(|e| e.to_string())?;
        self.launch(run);
        Ok(())
    }

    /// Starts a run of `member` for `team` to read its messages, as a child of the sender's
    /// conversation `ctx`.
    pub(crate) async fn start_mail_run(
        &self,
        ctx: &CallContext,
        team: &TeamRecord,
        member: &str,
    ) -> Result<(), String> {
        let prompt = format!(
            "{}
You have unread team messages. Read them with team_message action read and act \
             on them; your final answer goes back to whoever wrote to you.",
            team_md(team, member)
        );
        let run = self
            .start_team_run(ctx, team, member, &prompt, None)
            .await?;
        self.launch(run);
        Ok(())
    }

    /// Creates the run of `member` for `team` (origin `team`, with its own tools), a child of
    /// `parent`'s conversation.
    async fn start_team_run(
        &self,
        parent: &CallContext,
        team: &TeamRecord,
        member: &str,
        prompt: &str,
        task: Option<i64>,
    ) -> Result<talon_store::RunRecord, String> {
        let user = parent.user.as_deref();
        // A member works on another model's instructions, as a delegation's target does: its
        // own tools one level down (the subagent and leaf deny lists apply), plus the team's
        // board, which the subagent deny list takes from subagents. Its turn runs at depth 0
        // (see `Runner::child_turn`), so the board is not refused there; this stored list is
        // what narrows it.
        let fail = |e: crate::agent_runs::RunError| e.to_string();
        let mut tools = self
            .engine()
            .own_tool_names(member, user, 1)
            .await
            .map_err(fail)?;
        for spec in self
            .engine()
            .own_tool_specs(member, user, 0)
            .await
            .map_err(fail)?
        {
            if spec.groups.iter().any(|g| g == "teams") && !tools.contains(&spec.name) {
                tools.push(spec.name);
            }
        }
        let spec = ChildSpec {
            agent: member,
            task: prompt,
            tools,
            origin: "team",
            background: true,
            over_link: None,
            target_load: None,
            context_mode: "fresh",
            overrides: ChildOverrides {
                team: Some(team.name.clone()),
                team_task: task,
                ..ChildOverrides::default()
            },
        };
        self.start_child(parent, &spec, None)
            .await
            .map_err(|refused| refused.to_string())
    }

    /// What a member's run is given: TEAM.md, its task, and the results of the task's
    /// prerequisites (fenced: teammates' models wrote them).
    async fn member_prompt(&self, team: &TeamRecord, member: &str, task: &TaskRecord) -> String {
        let mut prompt = format!(
            "{}\n# Your task: #{} {}\n\n[Team task from {}]\n{}\n",
            team_md(team, member),
            task.id,
            task.subject,
            team.lead,
            task.description
        );
        for id in &task.blocked_by {
            // Only the same user's: a prerequisite row of another user (written before the
            // board checked, or by a bug) is never pasted into this user's run.
            if let Ok(Some(done)) = self.store().task(&team.name, *id).await
                && done.user_id == task.user_id
            {
                let fenced =
                    talon_core::untrusted::wrap("team_tasks", &format!("task #{id}"), &done.result);
                prompt.push_str(&format!(
                    "\nResult of prerequisite #{id} ({}):\n{fenced}\n",
                    done.subject
                ));
            }
        }
        prompt.push_str(
            "\nDo this task. Your final answer is its result and goes to the lead. If it cannot \
             be done, fail it with the reason (team_tasks action fail, or TaskUpdate status \
             failed).",
        );
        prompt
    }

    /// Ends the task of the team run `run` by how the run ended (see the module docs); the
    /// ending as the lead is told it.
    pub(crate) async fn end_team_task(
        &self,
        run: &talon_store::RunRecord,
        overrides: &ChildOverrides,
        mut ending: Ending,
    ) -> Ending {
        let (Some(team), Some(id)) = (&overrides.team, overrides.team_task) else {
            return ending;
        };
        let store = self.store();
        if ending.status == talon_store::RunStatus::Completed {
            match store
                .complete_task(team, id, &run.agent_key, &run.user_id, &ending.text)
                .await
            {
                Ok((task, _)) => self.task_event(&task, &run.agent_key, "task_completed"),
                // The member ended the task itself (completed or failed it with team_tasks).
                Err(e) => tracing::debug!(task = id, error = %e, "task not completed by its run"),
            }
        } else {
            let why = format!("its run ended {}: {}", ending.status.as_str(), ending.text);
            if let Ok(Some(task)) = store.release_task(id, Some(&run.id), &why).await
                && task.status == TaskStatus::Failed
            {
                self.task_event(&task, "talon", "task_failed");
                self.tell_lead_of_failure(team, &task).await;
            }
        }
        // Whoever is idle takes what this unblocked or gave back, before this run ends (a
        // caller waiting for the lead's children never sees none live in between); this
        // member is dispatched again once its run has ended.
        self.dispatch_team(team).await;
        let subject = match store.task(team, id).await {
            Ok(Some(task)) => task.subject,
            _ => String::new(),
        };
        ending.text = format!(
            "teammate: {} on task #{id} ({subject}):\n{}",
            run.agent_key, ending.text
        );
        ending
    }

    /// Ends `lost` the team run `run` whose gateway died (taken over by this one), giving its
    /// task back to the board, where an idle member takes it.
    pub(crate) async fn end_lost_team_run(&self, run: &talon_store::RunRecord) {
        let ending = Ending {
            status: talon_store::RunStatus::Lost,
            text: "the gateway running it stopped; its task went back to the board".into(),
            usage: talon_store::RunUsage::default(),
        };
        let overrides = ChildOverrides::of(run).unwrap_or_default();
        let ending = self.end_team_task(run, &overrides, ending).await;
        self.end_run(run, &ending, false).await;
        if let Some(team) = &overrides.team {
            self.dispatch_team(team).await;
        }
    }

    /// Messages the lead of `team` that `task` failed and what it leaves blocked.
    pub(crate) async fn tell_lead_of_failure(&self, team: &str, task: &TaskRecord) {
        let Ok(Some(record)) = self.store().team(team).await else {
            return;
        };
        let blocked: Vec<String> = match self.store().blocked_dependents(task.id).await {
            Ok(tasks) => tasks.iter().map(|t| format!("#{}", t.id)).collect(),
            Err(_) => Vec::new(),
        };
        let mut body = format!(
            "[Team board] task #{} ({}) {}: {}",
            task.id,
            task.subject,
            task.status.as_str(),
            task.result
        );
        if !blocked.is_empty() {
            body.push_str(&format!(
                "\nIt blocks {}: they cannot start until it is posted again and completes.",
                blocked.join(", ")
            ));
        }
        if let Err(e) = self
            .store()
            .send_team_message(team, "talon", &record.lead, &task.user_id, &body)
            .await
        {
            tracing::warn!(team, error = %e, "cannot tell the lead of a failed task");
        }
    }

    /// One supervisor pass over the teams: renews the claims of this gateway's runs, gives
    /// back the tasks whose claims ran out (a gateway died), and dispatches their teams.
    pub async fn supervise_teams(&self) {
        let store = self.store();
        if let Err(e) = store
            .renew_task_leases(self.engine().instance(), self.lease_until())
            .await
        {
            tracing::warn!(error = %e, "cannot renew task claims");
        }
        match store.release_expired_tasks().await {
            Ok(released) => {
                let mut teams: Vec<String> = Vec::new();
                for task in released {
                    if task.status == TaskStatus::Failed {
                        self.task_event(&task, "talon", "task_failed");
                        self.tell_lead_of_failure(&task.team, &task).await;
                    }
                    if !teams.contains(&task.team) {
                        teams.push(task.team);
                    }
                }
                for team in teams {
                    self.dispatch_team(&team).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot give back expired task claims"),
        }
    }
}

impl Runner {
    /// Tells watchers (`/v1/events`, `talon chat`) that `agent` changed `task` (`change`).
    pub(crate) fn task_event(&self, task: &TaskRecord, agent: &str, change: &'static str) {
        self.pipeline_events()
            .run_event(talon_core::events::ToolEvent::Team {
                session_key: task.lead_session.as_str().into(),
                team: task.team.as_str().into(),
                agent_key: agent.into(),
                user: (!task.user_id.is_empty()).then(|| task.user_id.as_str().into()),
                change,
                task_id: task.id,
                subject: task.subject.as_str().into(),
            });
    }

    /// Tells watchers that `ctx`'s agent sent a message on `team` to `to` (`*`: everyone).
    pub(crate) fn message_event(&self, ctx: &CallContext, team: &str, to: &str) {
        self.pipeline_events()
            .run_event(talon_core::events::ToolEvent::Team {
                session_key: ctx.session_key.as_str().into(),
                team: team.into(),
                agent_key: ctx.agent_key.as_deref().unwrap_or_default().into(),
                user: ctx.user.as_deref().map(Into::into),
                change: "message_sent",
                task_id: 0,
                subject: to.into(),
            });
    }
}

/// The event change that ends a task with `status`.
pub(crate) fn ended(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Completed => "task_completed",
        TaskStatus::Cancelled => "task_cancelled",
        _ => "task_failed",
    }
}

/// What the teams the agent is on are, in words for a model.
fn on_teams(teams: &[TeamRecord]) -> String {
    if teams.is_empty() {
        "you are on no team".into()
    } else {
        format!(
            "you are on: {}",
            teams
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// TEAM.md of `team` as `agent` sees it (the lead, or a member).
fn team_md(team: &TeamRecord, agent: &str) -> String {
    let mut md = format!("# TEAM.md: team {}\n\n", team.name);
    if !team.description.is_empty() {
        md.push_str(&format!("{}\n\n", team.description));
    }
    md.push_str(&format!("Lead: {}", team.lead));
    md.push_str(if team.lead == agent { " (you)\n" } else { "\n" });
    md.push_str("Members:\n");
    for member in &team.members {
        md.push_str(&format!("- {}", member.agent));
        if !member.role.is_empty() {
            md.push_str(&format!(": {}", member.role));
        }
        md.push_str(if member.agent == agent {
            " (you)\n"
        } else {
            "\n"
        });
    }
    if team.lead == agent {
        md.push_str(
            "\nYou lead: split the work into tasks on the board (team_tasks action create, or \
             TaskCreate: subject, description, and blocked_by for tasks that need others' \
             results first). Idle members are given tasks as runs; each result comes back to \
             you, prefixed teammate:. A failed task keeps the tasks it blocks waiting and you \
             are told. The board lists the tasks (team_tasks list, TaskList); team messages \
             reach a member or everyone (team_message, SendMessage). When every task is done, \
             answer the user from the results.\n",
        );
    } else {
        md.push_str(
            "\nYou are a member: you work on the task you were given. The board lists the tasks \
             (team_tasks list, TaskList); team messages reach the lead or a teammate \
             (team_message, SendMessage).\n",
        );
    }
    md
}

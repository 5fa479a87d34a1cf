//! What a call may do on its team's board and mailbox: the one implementation under both
//! dialects' tools (GoClaw's `team_tasks` / `team_message`, Claude Code's `TaskCreate`,
//! `TaskList`, `TaskGet`, `TaskUpdate`, `SendMessage`).
//!
//! Who may do what is decided here, from the store's record of the team, never from what a
//! model says it is: the lead posts, cancels and fails tasks; a member claims, completes and
//! fails only its own; anyone on the team lists, reads and searches the board and uses the
//! mailbox. Every answer is text for the model, or why not and what to do instead. Task text
//! and messages were written by models: they are returned fenced.

use talon_core::CallContext;
use talon_store::{NewTask, TaskFilter, TaskOrder, TaskRecord, TaskStatus, TeamRecord};

use crate::runner::Runner;

/// Tasks a listing or search shows at most.
const LIST_LIMIT: i64 = 50;

/// A call's view of its team: the team in play, who the caller is on it, for which user.
pub(crate) struct Board<'a> {
    runner: &'a Runner,
    ctx: &'a CallContext,
    pub team: TeamRecord,
    agent: String,
    user: String,
}

impl<'a> Board<'a> {
    /// The board of the team `ctx`'s call works with (`named`: the team it names).
    pub(crate) async fn open(
        runner: &'a Runner,
        ctx: &'a CallContext,
        named: Option<&str>,
    ) -> Result<Self, String> {
        let team = runner
            .team_in_play(ctx, named)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            runner,
            ctx,
            team,
            agent: ctx.agent_key.clone().unwrap_or_default(),
            // The board of the user this conversation is for: another user's tasks are not
            // there.
            user: ctx.user.clone().unwrap_or_default(),
        })
    }

    fn is_lead(&self) -> bool {
        self.team.lead == self.agent
    }

    pub(crate) async fn list(
        &self,
        filter: TaskFilter,
        order: TaskOrder,
    ) -> Result<String, String> {
        self.runner
            .store()
            .tasks(&self.team.name, Some(&self.user), filter, order, LIST_LIMIT)
            .await
            .map(|tasks| board(&self.team, &tasks))
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn search(&self, query: &str) -> Result<String, String> {
        self.runner
            .store()
            .search_tasks(&self.team.name, &self.user, query, LIST_LIMIT)
            .await
            .map(|tasks| board(&self.team, &tasks))
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn get(&self, id: i64) -> Result<String, String> {
        match self.runner.store().task(&self.team.name, id).await {
            Ok(Some(task)) if task.user_id == self.user => Ok(detail(&task)),
            Ok(_) => Err(self.no_task(id)),
            Err(e) => Err(e.to_string()),
        }
    }

    fn no_task(&self, id: i64) -> String {
        format!(
            "there is no task #{id} on {}'s board; list the board for the ids",
            self.team.name
        )
    }

    pub(crate) async fn create(
        &self,
        subject: &str,
        description: &str,
        priority: i64,
        blocked_by: &[i64],
    ) -> Result<String, String> {
        if !self.is_lead() {
            return Err(format!(
                "only {}'s lead ({}) posts tasks; tell the lead with a team message",
                self.team.name, self.team.lead
            ));
        }
        let new = NewTask {
            team: &self.team.name,
            subject,
            description,
            priority,
            blocked_by,
            created_by: &self.agent,
            lead_session: &self.ctx.session_key,
            user: &self.user,
        };
        let task = self
            .runner
            .store()
            .create_task(&new)
            .await
            .map_err(|e| e.to_string())?;
        self.runner.task_event(&task, &self.agent, "task_created");
        let started = self.runner.dispatch_team(&self.team.name).await;
        Ok(format!(
            "Posted task #{} ({}){}; {started} member run(s) started.",
            task.id,
            task.status.as_str(),
            if task.blocked_by.is_empty() {
                String::new()
            } else {
                format!(", after {}", ids(&task.blocked_by))
            }
        ))
    }

    pub(crate) async fn claim(&self, id: Option<i64>) -> Result<String, String> {
        if self.is_lead() {
            return Err("you lead this team: post tasks and let members take them".into());
        }
        let claimed = self
            .runner
            .store()
            .claim_task(
                &self.team.name,
                &self.agent,
                id,
                self.runner.lease_until(),
                Some(&self.user),
            )
            .await
            .map_err(|e| e.to_string())?;
        let Some(task) = claimed else {
            return Ok(match id {
                Some(id) => format!(
                    "task #{id} is not pending: another member has it, it is blocked, or it ended"
                ),
                None => "no pending task to claim".to_string(),
            });
        };
        self.runner.task_event(&task, &self.agent, "task_claimed");
        if let Some(run) = self.ctx.run.run_id.as_deref() {
            let _ = self.runner.store().set_task_run(task.id, run).await;
        }
        Ok(format!("You claimed:\n{}", detail(&task)))
    }

    pub(crate) async fn complete(&self, id: i64, result: &str) -> Result<String, String> {
        if result.trim().is_empty() {
            return Err("result is empty: give the task's result".into());
        }
        let (task, unblocked) = self
            .runner
            .store()
            .complete_task(&self.team.name, id, &self.agent, &self.user, result)
            .await
            .map_err(|e| e.to_string())?;
        self.runner.task_event(&task, &self.agent, "task_completed");
        if !unblocked.is_empty() {
            self.runner.dispatch_team(&self.team.name).await;
        }
        Ok(format!(
            "Completed task #{id}.{}",
            if unblocked.is_empty() {
                String::new()
            } else {
                format!(" Now unblocked: {}.", ids_of(&unblocked))
            }
        ))
    }

    /// Fails (`cancel` false) or cancels task `id` with `reason`.
    pub(crate) async fn end(&self, id: i64, cancel: bool, reason: &str) -> Result<String, String> {
        let status = match (cancel, self.is_lead()) {
            (false, _) => TaskStatus::Failed,
            (true, true) => TaskStatus::Cancelled,
            (true, false) => {
                return Err("only the lead cancels tasks; fail your own with a reason".into());
            }
        };
        if reason.trim().is_empty() {
            return Err("give the reason".into());
        }
        let owner = (!self.is_lead()).then_some(self.agent.as_str());
        let (task, blocked) = self
            .runner
            .store()
            .end_task(&self.team.name, id, status, owner, &self.user, reason)
            .await
            .map_err(|e| e.to_string())?;
        self.runner
            .task_event(&task, &self.agent, super::ended(task.status));
        if !self.is_lead() {
            self.runner
                .tell_lead_of_failure(&self.team.name, &task)
                .await;
        }
        Ok(format!(
            "Task #{id} {}.{}",
            task.status.as_str(),
            if blocked.is_empty() {
                String::new()
            } else {
                format!(
                    " It blocks {}: they wait until it is posted again.",
                    ids_of(&blocked)
                )
            }
        ))
    }

    /// The message as it is stored: it says who it is from and in which role.
    fn message(&self, text: &str) -> Result<String, String> {
        if text.trim().is_empty() {
            return Err("the message is empty: write it".into());
        }
        let role = if self.is_lead() { "lead" } else { "teammate" };
        Ok(format!("[Team message from {role} {}]: {text}", self.agent))
    }

    pub(crate) async fn send(&self, to: &str, text: &str) -> Result<String, String> {
        if to.is_empty() {
            return Err("name the teammate to send to (its agent key)".into());
        }
        let body = self.message(text)?;
        self.runner
            .store()
            .send_team_message(&self.team.name, &self.agent, to, &self.user, &body)
            .await
            .map_err(|e| e.to_string())?;
        self.runner.message_event(self.ctx, &self.team.name, to);
        let woke = self.runner.wake_member(self.ctx, &self.team, to).await;
        Ok(format!(
            "Sent to {to}.{}",
            if woke {
                " It was idle and is now working on it."
            } else {
                ""
            }
        ))
    }

    pub(crate) async fn broadcast(&self, text: &str) -> Result<String, String> {
        let body = self.message(text)?;
        let sent = self
            .runner
            .store()
            .broadcast_team_message(&self.team.name, &self.agent, &self.user, &body)
            .await
            .map_err(|e| e.to_string())?;
        self.runner.message_event(self.ctx, &self.team.name, "*");
        Ok(format!("Sent to {sent} teammate(s)."))
    }

    pub(crate) async fn read(&self) -> Result<String, String> {
        let messages = self
            .runner
            .store()
            .read_team_messages(&self.team.name, &self.agent, &self.user, LIST_LIMIT)
            .await
            .map_err(|e| e.to_string())?;
        if messages.is_empty() {
            return Ok("No unread messages.".into());
        }
        // Teammates wrote them: the pipeline fences the tool's output as untrusted (after
        // scrubbing it), as it does every tool's that declares so.
        Ok(messages
            .iter()
            .map(|m| format!("message {} from {}:\n{}", m.id, m.sender, m.body))
            .collect::<Vec<_>>()
            .join("\n\n"))
    }
}

fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ids_of(tasks: &[TaskRecord]) -> String {
    ids(&tasks.iter().map(|t| t.id).collect::<Vec<_>>())
}

/// One line a task on the board.
fn line(task: &TaskRecord) -> String {
    let mut line = format!(
        "#{} [{}] p{} {}",
        task.id,
        task.status.as_str(),
        task.priority,
        task.subject
    );
    if !task.owner.is_empty() {
        line.push_str(&format!(" (owner {})", task.owner));
    }
    if !task.blocked_by.is_empty() {
        line.push_str(&format!(" after {}", ids(&task.blocked_by)));
    }
    line
}

/// The board as the model sees it (models wrote the tasks: the pipeline fences the tool's
/// output).
fn board(team: &TeamRecord, tasks: &[TaskRecord]) -> String {
    if tasks.is_empty() {
        return format!("No tasks on {}'s board match.", team.name);
    }
    tasks.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// One task whole.
fn detail(task: &TaskRecord) -> String {
    let mut text = line(task);
    if !task.description.is_empty() {
        text.push_str(&format!("\n{}", task.description));
    }
    if !task.result.is_empty() {
        text.push_str(&format!("\nResult: {}", task.result));
    }
    text
}

//! A team's task board. Every change that depends on what the board holds is one statement or
//! one transaction under the team's lock, so it holds across gateways:
//!
//! - **create** checks the prerequisites (`blocked_by`) exist on the same board, are the same
//!   user's, and have not failed; a task waits `blocked` until all of them completed. Prerequisites are only named at
//!   creation and only existing tasks can be named, so they never form a cycle.
//! - **claim** is one conditional `UPDATE` (`FOR UPDATE SKIP LOCKED` on PostgreSQL): of any
//!   number of claimers exactly one gets a task. The claim holds a lease; a task whose lease
//!   ran out goes back to `pending` with its owner cleared (GoClaw left the owner, and the task
//!   could never be claimed again), or fails once it was dispatched [`MAX_DISPATCHES`] times.
//! - **complete** makes a dependent `pending` only when *all* its prerequisites completed; a
//!   failed or cancelled prerequisite keeps its dependents blocked (GoClaw unblocked them as
//!   though it had succeeded), and the caller is given them to tell the lead.
//!
//! A task belongs to the user whose conversation posted it: every call a model makes names its
//! user, and another user's tasks are as absent to it as tasks of another team. Only the
//! dispatcher (the server) claims across users, running each task as its own user.

use sqlx::Row;

use crate::locked::Locked;
use crate::{Store, StoreError, now_ms, placeholders};

/// Dispatches after which a task that still did not finish fails (GoClaw's maxTaskDispatches).
pub const MAX_DISPATCHES: i64 = 3;

/// Characters of a task's subject and of its description at most.
const MAX_SUBJECT: usize = 200;
const MAX_DESCRIPTION: usize = 20_000;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Blocked,
    InProgress,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Blocked => "blocked",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "pending" => Self::Pending,
            "blocked" => Self::Blocked,
            "in_progress" => Self::InProgress,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => {
                return Err(StoreError::Invalid {
                    what: "task status",
                    reason: format!("{other:?} is not a task status"),
                });
            }
        })
    }

    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// One task on a board.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskRecord {
    pub id: i64,
    pub team: String,
    pub subject: String,
    pub description: String,
    pub priority: i64,
    pub status: TaskStatus,
    /// The member working on it (claimed), or who last did.
    pub owner: String,
    /// The run working on it, if the runtime dispatched one.
    pub run_id: String,
    pub lease_until: i64,
    /// How many times it was claimed.
    pub dispatches: i64,
    pub result: String,
    pub created_by: String,
    /// The lead's session that posted it: where its result is announced.
    pub lead_session: String,
    pub user_id: String,
    pub blocked_by: Vec<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: i64,
}

/// A task to post.
#[derive(Debug, Clone, Default)]
pub struct NewTask<'a> {
    pub team: &'a str,
    pub subject: &'a str,
    pub description: &'a str,
    /// Higher is claimed first.
    pub priority: i64,
    pub blocked_by: &'a [i64],
    pub created_by: &'a str,
    pub lead_session: &'a str,
    pub user: &'a str,
}

/// Which tasks a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskFilter {
    /// Pending, blocked and in progress.
    Active,
    Completed,
    All,
}

/// How a listing is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskOrder {
    /// Highest priority first, then oldest.
    Priority,
    Newest,
}

pub(super) const TASK_COLUMNS: &str = "id, team, subject, description, priority, status, owner, run_id, lease_until, dispatches, result, created_by, lead_session, user_id, created_at, updated_at, finished_at";

pub(super) fn task(row: &sqlx::any::AnyRow) -> Result<TaskRecord, StoreError> {
    Ok(TaskRecord {
        id: row.try_get("id")?,
        team: row.try_get("team")?,
        subject: row.try_get("subject")?,
        description: row.try_get("description")?,
        priority: row.try_get("priority")?,
        status: TaskStatus::parse(&row.try_get::<String, _>("status")?)?,
        owner: row.try_get("owner")?,
        run_id: row.try_get("run_id")?,
        lease_until: row.try_get("lease_until")?,
        dispatches: row.try_get("dispatches")?,
        result: row.try_get("result")?,
        created_by: row.try_get("created_by")?,
        lead_session: row.try_get("lead_session")?,
        user_id: row.try_get("user_id")?,
        blocked_by: Vec::new(),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

fn invalid(reason: String) -> StoreError {
    StoreError::Invalid {
        what: "task",
        reason,
    }
}

impl Store {
    /// Posts a task on its team's board: `pending`, or `blocked` until its prerequisites all
    /// completed. Refused, saying why, for an unknown team, an empty or overlong text, or a
    /// prerequisite that is not on the board or has failed or been cancelled.
    pub async fn create_task(&self, new: &NewTask<'_>) -> Result<TaskRecord, StoreError> {
        let subject = new.subject.trim();
        if subject.is_empty() {
            return Err(invalid(
                "the subject is empty; say what is to be done".into(),
            ));
        }
        if subject.chars().count() > MAX_SUBJECT
            || new.description.chars().count() > MAX_DESCRIPTION
        {
            return Err(invalid(format!(
                "the subject takes at most {MAX_SUBJECT} characters and the description \
                 {MAX_DESCRIPTION}; put the detail in the description"
            )));
        }
        let mut blockers = new.blocked_by.to_vec();
        blockers.sort_unstable();
        blockers.dedup();
        let mut tx = Locked::begin(self, &[format!("talon-team:{}", new.team)]).await?;
        let made = async {
            let known = sqlx::query("SELECT 1 FROM teams WHERE name = $1")
                .bind(new.team)
                .fetch_optional(&mut *tx.conn)
                .await?;
            if known.is_none() {
                return Err(StoreError::NotFound {
                    what: "team",
                    key: new.team.to_string(),
                });
            }
            let mut waiting = false;
            if !blockers.is_empty() {
                let sql = format!(
                    "SELECT id, status FROM team_tasks WHERE team = $1 AND user_id = $2 AND id IN ({})",
                    placeholders(3, blockers.len())
                );
                // Another user's task is as absent as another team's: its result would be
                // pasted into this user's member run.
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(new.team)
                    .bind(new.user);
                for id in &blockers {
                    query = query.bind(*id);
                }
                let found = query.fetch_all(&mut *tx.conn).await?;
                for id in &blockers {
                    let Some(row) = found
                        .iter()
                        .find(|r| r.try_get::<i64, _>("id").ok() == Some(*id))
                    else {
                        return Err(invalid(format!(
                            "blocked_by names task #{id}, which is not on {}'s board; list the board for the ids",
                            new.team
                        )));
                    };
                    match TaskStatus::parse(&row.try_get::<String, _>("status")?)? {
                        TaskStatus::Completed => {}
                        status @ (TaskStatus::Failed | TaskStatus::Cancelled) => {
                            return Err(invalid(format!(
                                "prerequisite #{id} {}; a task blocked by it could never start. \
                                 Post the prerequisite again, or this task without it",
                                status.as_str()
                            )));
                        }
                        _ => waiting = true,
                    }
                }
            }
            let now = now_ms();
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO team_tasks (team, subject, description, priority, status, created_by, lead_session, user_id, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {TASK_COLUMNS}"
            )))
            .bind(new.team)
            .bind(subject)
            .bind(new.description)
            .bind(new.priority)
            .bind(if waiting { "blocked" } else { "pending" })
            .bind(new.created_by)
            .bind(new.lead_session)
            .bind(new.user)
            .bind(now)
            .fetch_one(&mut *tx.conn)
            .await?;
            let mut created = task(&row)?;
            for blocker in &blockers {
                sqlx::query("INSERT INTO team_task_deps (task, blocked_by) VALUES ($1, $2)")
                    .bind(created.id)
                    .bind(*blocker)
                    .execute(&mut *tx.conn)
                    .await?;
            }
            created.blocked_by = blockers.clone();
            Ok(created)
        }
        .await;
        match made {
            Ok(created) => {
                tx.commit().await?;
                Ok(created)
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Claims for `owner` the pending task `id`, or the pending task of highest priority
    /// (oldest first among equals), until `lease_until`: the task claimed, or `None` when there
    /// is none to claim (another claimer won it). One statement.
    pub async fn claim_task(
        &self,
        team: &str,
        owner: &str,
        id: Option<i64>,
        lease_until: i64,
        user: Option<&str>,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (\
             SELECT id FROM team_tasks WHERE team = $1 AND status = 'pending' AND ($4 < 0 OR id = $4){} \
             ORDER BY priority DESC, id LIMIT 1{}) \
             UPDATE team_tasks SET status = 'in_progress', owner = $2, run_id = '', lease_until = $3, \
             dispatches = dispatches + 1, updated_at = $5 \
             WHERE status = 'pending' AND id IN (SELECT id FROM picked) RETURNING {TASK_COLUMNS}",
            if user.is_some() { " AND user_id = $6" } else { "" },
            self.skip_locked()
        )))
        .bind(team)
        .bind(owner)
        .bind(lease_until)
        .bind(id.unwrap_or(-1))
        .bind(now_ms())
        .bind(user.unwrap_or_default())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(self.with_blockers(vec![task(&row)?]).await?.pop())
    }

    /// Records `run` as the run working on task `id` (claimed for it).
    pub async fn set_task_run(&self, id: i64, run: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE team_tasks SET run_id = $2 WHERE id = $1 AND status = 'in_progress'")
            .bind(id)
            .bind(run)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Puts task `id`, claimed for a run that could not be started, back on the board as it
    /// was: `pending`, no owner, the dispatch not counted.
    pub async fn return_task(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE team_tasks SET status = 'pending', owner = '', lease_until = 0, dispatches = dispatches - 1, updated_at = $2 \
             WHERE id = $1 AND status = 'in_progress' AND run_id = ''",
        )
        .bind(id)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Renews until `until` the leases of tasks whose runs `instance` holds.
    pub async fn renew_task_leases(&self, instance: &str, until: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE team_tasks SET lease_until = $2 WHERE status = 'in_progress' AND run_id IN \
             (SELECT id FROM agent_runs WHERE owner = $1 AND status IN {})",
            crate::runs::LIVE
        )))
        .bind(instance)
        .bind(until)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Gives task `id` back to the board: `pending` with no owner (its run ended without
    /// finishing it), or `failed` once it was dispatched [`MAX_DISPATCHES`] times. `run`: only if
    /// that run still holds it. The task as it is now, if it was in progress.
    pub async fn release_task(
        &self,
        id: i64,
        run: Option<&str>,
        why: &str,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let now = now_ms();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE team_tasks SET \
             status = CASE WHEN dispatches >= $3 THEN 'failed' ELSE 'pending' END, \
             result = CASE WHEN dispatches >= $3 THEN $4 ELSE result END, \
             finished_at = CASE WHEN dispatches >= $3 THEN $5 ELSE 0 END, \
             owner = CASE WHEN dispatches >= $3 THEN owner ELSE '' END, \
             run_id = '', lease_until = 0, updated_at = $5 \
             WHERE id = $1 AND status = 'in_progress' AND ($2 = '' OR run_id = $2) RETURNING {TASK_COLUMNS}"
        )))
        .bind(id)
        .bind(run.unwrap_or_default())
        .bind(MAX_DISPATCHES)
        .bind(format!(
            "dispatched {MAX_DISPATCHES} times without finishing; the last time: {why}"
        ))
        .bind(now)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(task).transpose()
    }

    /// Gives back to the board every task whose lease ran out (see [`Store::release_task`]);
    /// the tasks released, those that failed among them.
    pub async fn release_expired_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let expired = sqlx::query(
            "SELECT id FROM team_tasks WHERE status = 'in_progress' AND lease_until < $1 ORDER BY id LIMIT 100",
        )
        .bind(now_ms())
        .fetch_all(self.pool())
        .await?;
        let mut released = Vec::new();
        for row in expired {
            let id: i64 = row.try_get("id")?;
            if let Some(task) = self
                .release_task(id, None, "its worker stopped renewing its claim")
                .await?
            {
                released.push(task);
            }
        }
        Ok(released)
    }

    /// Completes task `id` of `team` for its owner `owner` with `result`; the task and the
    /// dependents that became `pending` (all their prerequisites completed).
    pub async fn complete_task(
        &self,
        team: &str,
        id: i64,
        owner: &str,
        user: &str,
        result: &str,
    ) -> Result<(TaskRecord, Vec<TaskRecord>), StoreError> {
        let mut tx = Locked::begin(self, &[format!("talon-team:{team}")]).await?;
        let now = now_ms();
        let done = async {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE team_tasks SET status = 'completed', result = $4, finished_at = $5, updated_at = $5, lease_until = 0 \
                 WHERE id = $1 AND team = $2 AND status = 'in_progress' AND owner = $3 AND user_id = $6 RETURNING {TASK_COLUMNS}"
            )))
            .bind(id)
            .bind(team)
            .bind(owner)
            .bind(result)
            .bind(now)
            .bind(user)
            .fetch_optional(&mut *tx.conn)
            .await?;
            let Some(row) = row else {
                return Err(self.why_not_yours(team, id, owner, user).await);
            };
            let unblocked = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE team_tasks SET status = 'pending', updated_at = $2 WHERE status = 'blocked' \
                 AND id IN (SELECT task FROM team_task_deps WHERE blocked_by = $1) \
                 AND NOT EXISTS (SELECT 1 FROM team_task_deps d JOIN team_tasks b ON b.id = d.blocked_by \
                 WHERE d.task = team_tasks.id AND b.status <> 'completed') RETURNING {TASK_COLUMNS}"
            )))
            .bind(id)
            .bind(now)
            .fetch_all(&mut *tx.conn)
            .await?;
            Ok((
                task(&row)?,
                unblocked.iter().map(task).collect::<Result<Vec<_>, _>>()?,
            ))
        }
        .await;
        match done {
            Ok(done) => {
                tx.commit().await?;
                Ok(done)
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }

    /// Ends task `id` of `team` `failed` or `cancelled` with `reason`; `owner`: only if it is
    /// that member's task in progress (a member failing its own), otherwise any task not ended
    /// (the lead). The task, and the tasks still blocked by it (to tell the lead: they cannot
    /// start until it is posted again).
    pub async fn end_task(
        &self,
        team: &str,
        id: i64,
        status: TaskStatus,
        owner: Option<&str>,
        user: &str,
        reason: &str,
    ) -> Result<(TaskRecord, Vec<TaskRecord>), StoreError> {
        if !matches!(status, TaskStatus::Failed | TaskStatus::Cancelled) {
            return Err(invalid(format!(
                "a task is ended failed or cancelled, not {}",
                status.as_str()
            )));
        }
        let now = now_ms();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE team_tasks SET status = $3, result = $4, finished_at = $5, updated_at = $5, lease_until = 0, run_id = '' \
             WHERE id = $1 AND team = $2 AND user_id = $7 AND status IN ('pending', 'blocked', 'in_progress') \
             AND ($6 = '' OR (owner = $6 AND status = 'in_progress')) RETURNING {TASK_COLUMNS}"
        )))
        .bind(id)
        .bind(team)
        .bind(status.as_str())
        .bind(reason)
        .bind(now)
        .bind(owner.unwrap_or_default())
        .bind(user)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Err(match owner {
                Some(owner) => self.why_not_yours(team, id, owner, user).await,
                None => self.why_not_open(team, id, user).await,
            });
        };
        let blocked = self.blocked_dependents(id).await?;
        Ok((task(&row)?, blocked))
    }

    /// Why `owner` cannot finish task `id`, for the model.
    async fn why_not_yours(&self, team: &str, id: i64, owner: &str, user: &str) -> StoreError {
        match self
            .task(team, id)
            .await
            .map(|t| t.filter(|t| t.user_id == user))
        {
            Ok(Some(t)) if t.status != TaskStatus::InProgress => invalid(format!(
                "task #{id} is {}, not in progress; claim a pending task first",
                t.status.as_str()
            )),
            Ok(Some(t)) if t.owner != owner => invalid(format!(
                "task #{id} was claimed by {}, not you; finish your own tasks",
                t.owner
            )),
            Ok(_) => invalid(format!(
                "there is no task #{id} on {team}'s board; list the board for the ids"
            )),
            Err(e) => e,
        }
    }

    /// Why task `id` cannot be ended, for the model.
    async fn why_not_open(&self, team: &str, id: i64, user: &str) -> StoreError {
        match self
            .task(team, id)
            .await
            .map(|t| t.filter(|t| t.user_id == user))
        {
            Ok(Some(t)) => invalid(format!(
                "task #{id} has ended already ({})",
                t.status.as_str()
            )),
            Ok(None) => invalid(format!(
                "there is no task #{id} on {team}'s board; list the board for the ids"
            )),
            Err(e) => e,
        }
    }
}

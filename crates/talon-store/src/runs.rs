//! Agent runs: every run other than a person's own turn (a subagent, a delegation, an
//! evaluate-loop round, a quality-gate review) as one row, and the outbox that carries each
//! child's result to its parent.
//!
//! What every peer gets wrong (research/multi-agent.md §10), and how this module holds it:
//! - **Limits count live rows, across gateways.** A run is created by one `INSERT … SELECT`
//!   whose conditions count the live runs of the tenant and of the parent *run* (not the agent),
//!   inside a transaction that first takes the tenant's lock (`BEGIN IMMEDIATE` on SQLite, a
//!   transaction-scoped advisory lock on PostgreSQL), so two gateways cannot both take the last
//!   slot. A run that ends frees its slot in the same statement that ends it.
//! - **Restart-safe ownership.** The gateway running a run holds a lease it renews; a run whose
//!   lease ran out is taken over by another ([`Store::take_over_runs`]) or ended `lost`, never
//!   swept at start-up.
//! - **Exactly-once delivery.** A run's terminal status and its outbox row are written in one
//!   transaction; the parent session's turn that shows a result marks it delivered in the
//!   transaction that saves the turn ([`Store::finish_turn_delivering`]), so a crash on either
//!   side neither loses nor repeats it.
//! - **Cancellation reaches the tree.** Cancelling a run flags it and every descendant (one
//!   statement over the root), so whichever gateway runs them sees the flag.
//! - **Terminal states tell the truth**: `limit_reached`, `timed_out` and `lost` are their own.

use sqlx::Row;

use crate::{Engine, Store, StoreError, now_ms};

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    /// Waiting for a person to answer an approval (on the approvals queue).
    WaitingApproval,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
    /// Stopped by a limit (the iteration cap, a budget): not a success.
    LimitReached,
    /// Its gateway died and nobody could take it over.
    Lost,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::WaitingApproval => "waiting_approval",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::LimitReached => "limit_reached",
            Self::Lost => "lost",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "waiting_approval" => Self::WaitingApproval,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "timed_out" => Self::TimedOut,
            "limit_reached" => Self::LimitReached,
            "lost" => Self::Lost,
            other => {
                return Err(StoreError::Invalid {
                    what: "run status",
                    reason: format!("{other:?} is not a run status"),
                });
            }
        })
    }

    /// Whether the run still holds a slot.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Queued | Self::Running | Self::WaitingApproval)
    }
}

/// The live statuses, as SQL.
const LIVE: &str = "('queued', 'running', 'waiting_approval')";

/// The limits a new run is checked against (seed 002 §6's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Live runs per tenant.
    pub max_concurrent: i64,
    /// How deep runs may nest (1: a person's turn may start runs, runs may not).
    pub max_depth: i64,
    /// Live children per parent run (or per parent session for runs a turn started).
    pub max_children: i64,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_concurrent: 8,
            max_depth: 1,
            max_children: 5,
        }
    }
}

/// A run to create.
#[derive(Debug, Clone, Default)]
pub struct NewRun<'a> {
    /// The run that starts it; `None` when a person's turn does.
    pub parent: Option<&'a str>,
    /// Where its result is delivered.
    pub parent_session: &'a str,
    /// The run's own session key is this followed by the run's id (the caller's key scheme:
    /// it says whose session it is).
    pub session_prefix: &'a str,
    pub agent: &'a str,
    pub tenant: &'a str,
    pub user: &'a str,
    /// `subagent`, `delegation`, `evaluate`, `gate`, …
    pub origin: &'a str,
    /// `fresh` (its task only) or `fork` (the parent's history).
    pub context_mode: &'a str,
    pub task: &'a str,
    /// The gateway that will run it, and until when it holds it.
    pub owner: &'a str,
    pub lease_until: i64,
}

/// Why a run was not created: the limit and the model-facing words for it.
#[derive(Debug, thiserror::Error)]
pub enum RunRefused {
    #[error("Agent at capacity ({live}/{max}). Try a different agent or handle it yourself.")]
    Children { live: i64, max: i64 },
    #[error(
        "Too many agent runs at once ({live}/{max}). Wait for one to finish or handle it yourself."
    )]
    Concurrent { live: i64, max: i64 },
    #[error(
        "Runs may nest only {max} level(s) deep; this run is at depth {depth} and cannot start another. Do the work yourself."
    )]
    Depth { depth: i64, max: i64 },
    #[error("no parent run {0:?}")]
    NoParent(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One stored run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunRecord {
    pub id: String,
    pub root_id: String,
    pub parent_id: String,
    pub parent_session: String,
    pub session_key: String,
    pub depth: i64,
    pub agent_key: String,
    pub tenant: String,
    pub user_id: String,
    pub origin: String,
    pub context_mode: String,
    pub status: RunStatus,
    pub owner: String,
    pub lease_until: i64,
    pub cancel_requested: bool,
    pub task: String,
    pub result: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: i64,
}

/// A result waiting in the outbox for its parent session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Delivery {
    pub parent_session: String,
    pub child_id: String,
    pub status: RunStatus,
    pub result: String,
}

const COLUMNS: &str = "id, root_id, parent_id, parent_session, session_key, depth, agent_key, tenant, user_id, origin, context_mode, status, owner, lease_until, cancel_requested, task, result, input_tokens, output_tokens, created_at, updated_at, finished_at";

fn record(row: &sqlx::any::AnyRow) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: row.try_get("id")?,
        root_id: row.try_get("root_id")?,
        parent_id: row.try_get("parent_id")?,
        parent_session: row.try_get("parent_session")?,
        session_key: row.try_get("session_key")?,
        depth: row.try_get("depth")?,
        agent_key: row.try_get("agent_key")?,
        tenant: row.try_get("tenant")?,
        user_id: row.try_get("user_id")?,
        origin: row.try_get("origin")?,
        context_mode: row.try_get("context_mode")?,
        status: RunStatus::parse(&row.try_get::<String, _>("status")?)?,
        owner: row.try_get("owner")?,
        lease_until: row.try_get("lease_until")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        task: row.try_get("task")?,
        result: row.try_get("result")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

/// A transaction holding the write lock a limit check needs (see the module docs).
struct Locked {
    conn: sqlx::pool::PoolConnection<sqlx::Any>,
    open: bool,
}

impl Locked {
    async fn begin(store: &Store, tenant: &str) -> Result<Self, StoreError> {
        let mut conn = store.pool().acquire().await?;
        match store.engine() {
            Engine::Sqlite => {
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
            }
            Engine::Postgres => {
                sqlx::raw_sql("BEGIN").execute(&mut *conn).await?;
                // The lock is taken before the counting statement starts, so that statement's
                // snapshot sees every run a gateway that held the lock before has created.
                sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                    .bind(format!("talon-runs:{tenant}"))
                    .execute(&mut *conn)
                    .await?;
            }
        }
        Ok(Self { conn, open: true })
    }

    async fn commit(mut self) -> Result<(), StoreError> {
        self.open = false;
        sqlx::raw_sql("COMMIT").execute(&mut *self.conn).await?;
        Ok(())
    }

    async fn rollback(mut self) {
        self.open = false;
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *self.conn).await;
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if self.open {
            // A transaction left open would hold the lock: the connection is not returned.
            self.conn.close_on_drop();
        }
    }
}

/// A count of `sql` (one `$1`) inside `tx`.
async fn count_live(
    tx: &mut Locked,
    sql: sqlx::AssertSqlSafe<String>,
    key: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query(sql)
        .bind(key)
        .fetch_one(&mut *tx.conn)
        .await?
        .try_get::<i64, _>(0)?)
}

impl Store {
    /// Creates a run if the limits allow it (see the module docs), as `running`, owned by
    /// `new.owner`; the limit it would break otherwise.
    pub async fn create_run(
        &self,
        new: &NewRun<'_>,
        limits: RunLimits,
    ) -> Result<RunRecord, RunRefused> {
        let parent = match new.parent {
            Some(id) => Some(
                self.run(id)
                    .await?
                    .ok_or_else(|| RunRefused::NoParent(id.to_string()))?,
            ),
            None => None,
        };
        let depth = parent.as_ref().map_or(1, |p| p.depth + 1);
        if depth > limits.max_depth {
            return Err(RunRefused::Depth {
                depth: depth - 1,
                max: limits.max_depth,
            });
        }
        let id = format!("run-{}", uuid::Uuid::new_v4().simple());
        let root = parent.as_ref().map_or(id.clone(), |p| p.root_id.clone());
        let parent_id = new.parent.unwrap_or_default();
        // Runs a person's turn started are counted per parent session; a run's, per parent run.
        let (sibling_column, sibling_key) = if parent_id.is_empty() {
            ("parent_session", new.parent_session)
        } else {
            ("parent_id", parent_id)
        };
        let session_key = format!("{}{id}", new.session_prefix);
        let now = now_ms();
        let mut tx = Locked::begin(self, new.tenant).await?;
        let insert = format!(
            "INSERT INTO agent_runs (id, root_id, parent_id, parent_session, session_key, depth, agent_key, tenant, user_id, origin, context_mode, status, owner, lease_until, task, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'running', $12, $13, $14, $15, $15 \
             WHERE (SELECT COUNT(*) FROM agent_runs WHERE tenant = $8 AND status IN {LIVE}) < $16 \
             AND (SELECT COUNT(*) FROM agent_runs WHERE {sibling_column} = $17 AND parent_id = $3 AND status IN {LIVE}) < $18"
        );
        let inserted = sqlx::query(sqlx::AssertSqlSafe(insert))
            .bind(&id)
            .bind(&root)
            .bind(parent_id)
            .bind(new.parent_session)
            .bind(&session_key)
            .bind(depth)
            .bind(new.agent)
            .bind(new.tenant)
            .bind(new.user)
            .bind(new.origin)
            .bind(new.context_mode)
            .bind(new.owner)
            .bind(new.lease_until)
            .bind(new.task)
            .bind(now)
            .bind(limits.max_concurrent)
            .bind(sibling_key)
            .bind(limits.max_children)
            .execute(&mut *tx.conn)
            .await;
        let inserted = match inserted {
            Ok(done) => done.rows_affected(),
            Err(e) => {
                tx.rollback().await;
                return Err(StoreError::from(e).into());
            }
        };
        if inserted == 0 {
            // Say which limit, counted under the same lock.
            let children = count_live(
                &mut tx,
                sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM agent_runs WHERE {sibling_column} = $1 AND status IN {LIVE}"
                )),
                sibling_key,
            )
            .await;
            let tenant = count_live(
                &mut tx,
                sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM agent_runs WHERE tenant = $1 AND status IN {LIVE}"
                )),
                new.tenant,
            )
            .await;
            tx.rollback().await;
            let (children, tenant) = (children?, tenant?);
            return Err(if children >= limits.max_children {
                RunRefused::Children {
                    live: children,
                    max: limits.max_children,
                }
            } else {
                RunRefused::Concurrent {
                    live: tenant,
                    max: limits.max_concurrent,
                }
            });
        }
        tx.commit().await?;
        Ok(self.run(&id).await?.ok_or_else(|| StoreError::NotFound {
            what: "run",
            key: id.clone(),
        })?)
    }

    /// One run.
    pub async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_runs WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(record).transpose()
    }

    /// The runs of `user` (`None`: of calls naming no user), newest first, at most `limit`.
    pub async fn runs_of(
        &self,
        user: Option<&str>,
        limit: i64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_runs WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2"
        )))
        .bind(user.unwrap_or_default())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record).collect()
    }

    /// The runs a parent run (or, for `None`, a parent session's turns) started, newest first.
    pub async fn child_runs(
        &self,
        parent: Option<&str>,
        parent_session: &str,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_runs WHERE parent_id = $1 AND parent_session = $2 ORDER BY created_at DESC, id"
        )))
        .bind(parent.unwrap_or_default())
        .bind(parent_session)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record).collect()
    }

    /// Ends a live run with `status` and `result`, and puts the result in the outbox for its
    /// parent session, in one transaction; `delivered`: the caller waited for the run and has
    /// the result now, so the row is written delivered. `false` when the run had ended already
    /// (its first end stands: a result is delivered once).
    pub async fn finish_run(
        &self,
        id: &str,
        status: RunStatus,
        result: &str,
        usage: (i64, i64),
        delivered: bool,
    ) -> Result<bool, StoreError> {
        if status.is_live() {
            return Err(StoreError::Invalid {
                what: "run status",
                reason: format!("{} is not an end", status.as_str()),
            });
        }
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let ended = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE agent_runs SET status = $2, result = $3, input_tokens = input_tokens + $4, output_tokens = output_tokens + $5, owner = '', lease_until = 0, updated_at = $6, finished_at = $6 \
             WHERE id = $1 AND status IN {LIVE} RETURNING parent_session"
        )))
        .bind(id)
        .bind(status.as_str())
        .bind(result)
        .bind(usage.0)
        .bind(usage.1)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = ended else {
            tx.rollback().await?;
            return Ok(false);
        };
        let parent_session: String = row.try_get("parent_session")?;
        sqlx::query(
            "INSERT INTO run_outbox (parent_session, child_id, status, result, created_at, delivered_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&parent_session)
        .bind(id)
        .bind(status.as_str())
        .bind(result)
        .bind(now)
        .bind(if delivered { now } else { 0 })
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Renews `owner`'s lease on its live runs until `until`; the runs it no longer holds
    /// (taken over, or ended) are not renewed.
    pub async fn renew_run_leases(&self, owner: &str, until: i64) -> Result<u64, StoreError> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE agent_runs SET lease_until = $2, updated_at = $3 WHERE owner = $1 AND status IN {LIVE}"
        )))
        .bind(owner)
        .bind(until)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Takes over, for `owner` until `until`, at most `limit` live runs whose lease ran out (their
    /// gateway died); the runs taken. Two gateways never take the same run: each run is moved by
    /// one conditional update.
    pub async fn take_over_runs(
        &self,
        owner: &str,
        until: i64,
        limit: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let now = now_ms();
        let expired = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id, owner, lease_until FROM agent_runs WHERE status IN {LIVE} AND lease_until < $1 ORDER BY lease_until LIMIT $2"
        )))
        .bind(now)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut taken = Vec::new();
        for row in expired {
            let id: String = row.try_get("id")?;
            let (old_owner, old_lease): (String, i64) =
                (row.try_get("owner")?, row.try_get("lease_until")?);
            let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE agent_runs SET owner = $2, lease_until = $3, updated_at = $4 \
                 WHERE id = $1 AND owner = $5 AND lease_until = $6 AND status IN {LIVE}"
            )))
            .bind(&id)
            .bind(owner)
            .bind(until)
            .bind(now)
            .bind(&old_owner)
            .bind(old_lease)
            .execute(self.pool())
            .await?;
            if moved.rows_affected() == 1
                && let Some(run) = self.run(&id).await?
            {
                taken.push(run);
            }
        }
        Ok(taken)
    }

    /// Flags `id` and every live run below it as cancelled-on-request; the number flagged. The
    /// gateways running them (whichever they are) see the durable flag, stop them and end them
    /// `cancelled`. Runs nest a few levels at most, so the tree is walked level by level.
    pub async fn request_run_cancel(&self, id: &str) -> Result<u64, StoreError> {
        let flag = |column: &'static str, key: String| async move {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE agent_runs SET cancel_requested = 1, updated_at = $2 WHERE {column} = $1 AND status IN {LIVE}"
            )))
            .bind(key)
            .bind(now_ms())
            .execute(self.pool())
            .await
            .map(|done| done.rows_affected())
        };
        let mut flagged = flag("id", id.to_string()).await?;
        let mut level = vec![id.to_string()];
        while !level.is_empty() {
            let mut next = Vec::new();
            for parent in &level {
                flagged += flag("parent_id", parent.clone()).await?;
                let children = sqlx::query("SELECT id FROM agent_runs WHERE parent_id = $1")
                    .bind(parent)
                    .fetch_all(self.pool())
                    .await?;
                for child in children {
                    next.push(child.try_get::<String, _>("id")?);
                }
            }
            level = next;
        }
        Ok(flagged)
    }

    /// The results waiting for `parent_session`, oldest first (at most `limit`): a turn of the
    /// session shows them to its model and marks them delivered when it is saved
    /// ([`Store::finish_turn_delivering`]).
    pub async fn pending_deliveries(
        &self,
        parent_session: &str,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT child_id, status, result FROM run_outbox WHERE parent_session = $1 AND delivered_at = 0 ORDER BY created_at, child_id LIMIT $2",
        )
        .bind(parent_session)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Delivery {
                    parent_session: parent_session.to_string(),
                    child_id: row.try_get("child_id")?,
                    status: RunStatus::parse(&row.try_get::<String, _>("status")?)?,
                    result: row.try_get("result")?,
                })
            })
            .collect()
    }
}

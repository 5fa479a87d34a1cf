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

mod delivery;
mod ownership;

pub use ownership::{RUNS_CHANNEL, RunsCancelled};

use crate::locked::Locked;
use crate::{Store, StoreError, now_ms};

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
pub(crate) const LIVE: &str = "('queued', 'running', 'waiting_approval')";

/// The delegations (evaluate-loop rounds are delegations too) over one agent link, as SQL: from `$19` (the source, `parent_agent`) to `$7`
/// (the target), and back when `$23` is 1 (a bidirectional link).
/// The pool a new run (origin `$10`) counts in: scheduled jobs' runs apart from the rest.
const POOL: &str = "((origin = 'cron') = ($10 = 'cron'))";
/// The same, for a count whose second parameter is the origin.
const POOL_OF_2: &str = "((origin = 'cron') = ($2 = 'cron'))";

const OVER_LINK: &str = "origin IN ('delegation', 'evaluate') AND ((parent_agent = $19 AND agent_key = $7) OR ($23 = 1 AND parent_agent = $7 AND agent_key = $19))";

/// The limits a new run is checked against (seed 002 §6's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Live runs per tenant: of its scheduled jobs for a run of origin `cron`, of everything
    /// else for any other run.
    pub max_concurrent: i64,
    /// Live runs (not of scheduled jobs) one user of the tenant may hold; negative: no limit
    /// of its own.
    pub max_per_user: i64,
    /// How deep runs may nest (1: a person's turn may start runs, runs may not).
    pub max_depth: i64,
    /// Live children per parent run (or per parent session for runs a turn started).
    pub max_children: i64,
    /// For a delegation: live delegations over its agent link at most (and whether the link
    /// goes both ways, so delegations back count too).
    pub max_over_link: Option<(i64, bool)>,
    /// For a delegation: live delegations to its target agent, from anyone, at most
    /// (`max_delegation_load`).
    pub max_target_load: Option<i64>,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_concurrent: 8,
            max_per_user: -1,
            max_depth: 1,
            max_children: 5,
            max_over_link: None,
            max_target_load: None,
        }
    }
}

/// A run to create.
#[derive(Debug, Clone, Default)]
pub struct NewRun<'a> {
    /// The run that starts it; `None` when a person's turn does.
    pub parent: Option<&'a str>,
    /// Where its result is delivered, and the agent of that session (whose turn announces it).
    pub parent_session: &'a str,
    pub parent_agent: &'a str,
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
    /// The tools it may use (never more than its parent's).
    pub tools: &'a [String],
    /// What its definition narrows beyond the tools (the runtime's JSON; `{}`: nothing), kept
    /// for whoever steers or resumes it.
    pub overrides: &'a str,
    /// The gateway that will run it, and until when it holds it.
    pub owner: &'a str,
    pub lease_until: i64,
}

/// What a run used: added to the run when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_requests: i64,
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
        "You have {live} agent runs going, your share of this gateway ({max}); the rest are kept for other users. Wait for one of yours to finish or handle it yourself."
    )]
    PerUser { live: i64, max: i64 },
    #[error(
        "Runs may nest only {max} level(s) deep; this run is at depth {depth} and cannot start another. Do the work yourself."
    )]
    Depth { depth: i64, max: i64 },
    #[error("no parent run {0:?}")]
    NoParent(String),
    #[error("run {0} has ended already; start a new one instead")]
    NotLive(String),
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
    pub parent_agent: String,
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
    /// How often another gateway took the run over from one that died.
    pub takeovers: i64,
    /// The tools it may use.
    pub tools: Vec<String>,
    /// What its definition narrows beyond the tools (see [`NewRun::overrides`]).
    pub overrides: String,
    /// Model requests it made.
    pub model_requests: i64,
}

/// A result waiting in the outbox for its parent session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Delivery {
    pub parent_session: String,
    pub child_id: String,
    pub status: RunStatus,
    pub result: String,
}

pub(crate) const COLUMNS: &str = "id, root_id, parent_id, parent_session, parent_agent, takeovers, tools, overrides, model_requests, session_key, depth, agent_key, tenant, user_id, origin, context_mode, status, owner, lease_until, cancel_requested, task, result, input_tokens, output_tokens, created_at, updated_at, finished_at";

pub(crate) fn record(row: &sqlx::any::AnyRow) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: row.try_get("id")?,
        root_id: row.try_get("root_id")?,
        parent_id: row.try_get("parent_id")?,
        parent_session: row.try_get("parent_session")?,
        parent_agent: row.try_get("parent_agent")?,
        takeovers: row.try_get("takeovers")?,
        model_requests: row.try_get("model_requests")?,
        tools: serde_json::from_str(&row.try_get::<String, _>("tools")?).map_err(|e| {
            StoreError::Invalid {
                what: "run tools",
                reason: e.to_string(),
            }
        })?,
        overrides: row.try_get("overrides")?,
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

/// A count of `sql` (binding `keys` as `$1`, `$2`, …) inside `tx`.
async fn count_live(
    tx: &mut Locked,
    sql: sqlx::AssertSqlSafe<String>,
    keys: &[&str],
) -> Result<i64, StoreError> {
    let mut query = sqlx::query(sql);
    for key in keys {
        query = query.bind(*key);
    }
    Ok(query.fetch_one(&mut *tx.conn).await?.try_get::<i64, _>(0)?)
}

impl Store {
    /// Creates a run if the limits allow it (see the module docs), as `running`, owned by
    /// `new.owner`; the limit it would break otherwise.
    pub async fn create_run(
        &self,
        new: &NewRun<'_>,
        limits: RunLimits,
    ) -> Result<RunRecord, RunRefused> {
        self.create_run_replacing(new, limits, None).await
    }

    /// Ends the live run `old` as `cancelled` (its result, "replaced", written delivered: the
    /// caller that replaced it knows) and creates `new` in its slot, in one transaction: a
    /// steered run keeps its place however full the limits are (GoClaw lost it: steering a 5th
    /// child failed). Refused, with nothing changed, when `old` is not live.
    pub async fn replace_run(
        &self,
        old: &str,
        new: &NewRun<'_>,
        limits: RunLimits,
    ) -> Result<RunRecord, RunRefused> {
        self.create_run_replacing(new, limits, Some(old)).await
    }

    async fn create_run_replacing(
        &self,
        new: &NewRun<'_>,
        limits: RunLimits,
        replacing: Option<&str>,
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
        let mut locks = vec![format!("talon-runs:{}", new.tenant)];
        if limits.max_target_load.is_some() || limits.max_over_link.is_some() {
            // Delegations to one agent are counted across tenants.
            locks.push(format!("talon-agent:{}", new.agent));
        }
        let mut tx = Locked::begin(self, &locks).await?;
        if let Some(old) = replacing {
            match delivery::end_in(
                &mut tx.conn,
                old,
                None,
                RunStatus::Cancelled,
                "replaced by a new message",
                RunUsage::default(),
                true,
                now,
            )
            .await
            {
                Ok(Some(_)) => {}
                Ok(None) => {
                    tx.rollback().await;
                    return Err(RunRefused::NotLive(old.to_string()));
                }
                Err(e) => {
                    tx.rollback().await;
                    return Err(e.into());
                }
            }
        }
        let insert = format!(
            "INSERT INTO agent_runs (id, root_id, parent_id, parent_session, session_key, depth, agent_key, tenant, user_id, origin, context_mode, status, owner, lease_until, task, created_at, updated_at, parent_agent, tools, overrides) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'running', $12, $13, $14, $15, $15, $19, $20, $24 \
             WHERE (SELECT COUNT(*) FROM agent_runs WHERE tenant = $8 AND {POOL} AND status IN {LIVE}) < $16 \
             AND ($25 < 0 OR (SELECT COUNT(*) FROM agent_runs WHERE tenant = $8 AND user_id = $9 AND origin <> 'cron' AND status IN {LIVE}) < $25) \
             AND (SELECT COUNT(*) FROM agent_runs WHERE {sibling_column} = $17 AND parent_id = $3 AND status IN {LIVE}) < $18 \
             AND ($21 < 0 OR (SELECT COUNT(*) FROM agent_runs WHERE {OVER_LINK} AND status IN {LIVE}) < $21) \
             AND ($22 < 0 OR (SELECT COUNT(*) FROM agent_runs WHERE origin IN ('delegation', 'evaluate') AND agent_key = $7 AND status IN {LIVE}) < $22)"
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
            .bind(new.parent_agent)
            .bind(serde_json::to_string(new.tools).unwrap_or_else(|_| "[]".into()))
            .bind(limits.max_over_link.map_or(-1, |(max, _)| max))
            .bind(limits.max_target_load.unwrap_or(-1))
            .bind(i64::from(
                limits.max_over_link.is_some_and(|(_, both)| both),
            ))
            .bind(new.overrides)
            .bind(if new.origin == "cron" {
                -1
            } else {
                limits.max_per_user
            })
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
                &[sibling_key],
            )
            .await;
            let tenant = count_live(
                &mut tx,
                sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM agent_runs WHERE tenant = $1 AND {POOL_OF_2} AND status IN {LIVE}"
                )),
                &[new.tenant, new.origin],
            )
            .await;
            let user = count_live(
                &mut tx,
                sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM agent_runs WHERE tenant = $1 AND user_id = $2 AND origin <> 'cron' AND status IN {LIVE}"
                )),
                &[new.tenant, new.user],
            )
            .await;
            let over_link = match limits.max_over_link {
                Some((max, both)) => Some((
                    count_live(
                        &mut tx,
                        sqlx::AssertSqlSafe(format!(
                            "SELECT COUNT(*) FROM agent_runs WHERE origin IN ('delegation', 'evaluate') AND status IN {LIVE} AND ((parent_agent = $1 AND agent_key = $2) OR ($3 = '1' AND parent_agent = $2 AND agent_key = $1))"
                        )),
                        &[new.parent_agent, new.agent, if both { "1" } else { "0" }],
                    )
                    .await,
                    max,
                )),
                None => None,
            };
            let target_load = match limits.max_target_load {
                Some(max) => Some((
                    count_live(
                        &mut tx,
                        sqlx::AssertSqlSafe(format!(
                            "SELECT COUNT(*) FROM agent_runs WHERE origin IN ('delegation', 'evaluate') AND agent_key = $1 AND status IN {LIVE}"
                        )),
                        &[new.agent],
                    )
                    .await,
                    max,
                )),
                None => None,
            };
            tx.rollback().await;
            let (children, tenant, user) = (children?, tenant?, user?);
            for (live, max) in [over_link, target_load].into_iter().flatten() {
                let live = live?;
                if live >= max {
                    return Err(RunRefused::Children { live, max });
                }
            }
            return Err(if children >= limits.max_children {
                RunRefused::Children {
                    live: children,
                    max: limits.max_children,
                }
            } else if new.origin != "cron"
                && limits.max_per_user >= 0
                && user >= limits.max_per_user
            {
                RunRefused::PerUser {
                    live: user,
                    max: limits.max_per_user,
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

    /// The live runs of `origin` (`team`, …), oldest first.
    pub async fn live_runs_of_origin(&self, origin: &str) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_runs WHERE origin = $1 AND status IN {LIVE} ORDER BY created_at, id"
        )))
        .bind(origin)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(record).collect()
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

    /// What the runs of the tree under `root` used, and when the root started (Unix ms): what a
    /// budget per root run is counted against.
    pub async fn root_usage(&self, root: &str) -> Result<(RunUsage, i64), StoreError> {
        let row = sqlx::query(
            // Sums are NUMERIC on PostgreSQL: cast back to what both engines decode.
            "SELECT CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS i, CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS o, CAST(COALESCE(SUM(model_requests), 0) AS BIGINT) AS r, CAST(COALESCE(MIN(created_at), 0) AS BIGINT) AS c FROM agent_runs WHERE root_id = $1",
        )
        .bind(root)
        .fetch_one(self.pool())
        .await?;
        Ok((
            RunUsage {
                input_tokens: row.try_get("i")?,
                output_tokens: row.try_get("o")?,
                model_requests: row.try_get("r")?,
            },
            row.try_get("c")?,
        ))
    }

    /// The live runs a session's turns started, newest first: read on every turn of the session
    /// (its prompt lists them), so only live rows, however many runs it started before.
    pub async fn live_child_runs(
        &self,
        parent_session: &str,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_runs WHERE parent_session = $1 AND parent_id = '' AND status IN {LIVE} ORDER BY created_at DESC, id"
        )))
        .bind(parent_session)
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
}

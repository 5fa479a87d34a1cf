//! Reading a team's board: one task, a filtered and ordered listing, full-text search (FTS5
//! bm25 on SQLite, `ts_rank` on PostgreSQL), and the tasks a task blocks; each task with its
//! prerequisites.

use sqlx::Row;

use super::tasks::{TASK_COLUMNS, TaskFilter, TaskOrder, TaskRecord, task};
use crate::placeholders;
use crate::{Store, StoreError};

impl Store {
    /// The tasks blocked by `id` that have not ended (they wait until it is posted again).
    pub async fn blocked_dependents(&self, id: i64) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM team_tasks WHERE status = 'blocked' AND id IN \
             (SELECT task FROM team_task_deps WHERE blocked_by = $1) ORDER BY id"
        )))
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(task).collect()
    }

    /// Task `id` of `team`, with its prerequisites (whoever's it is: callers acting for a
    /// user check [`TaskRecord::user_id`]).
    pub async fn task(&self, team: &str, id: i64) -> Result<Option<TaskRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM team_tasks WHERE id = $1 AND team = $2"
        )))
        .bind(id)
        .bind(team)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut tasks = self.with_blockers(vec![task(&row)?]).await?;
        Ok(tasks.pop())
    }

    /// `team`'s tasks that `filter` keeps, in `order`, at most `limit`; `user`: only that
    /// user's (`None`: everyone's, for the operator).
    pub async fn tasks(
        &self,
        team: &str,
        user: Option<&str>,
        filter: TaskFilter,
        order: TaskOrder,
        limit: i64,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let status = match filter {
            TaskFilter::Active => " AND status IN ('pending', 'blocked', 'in_progress')",
            TaskFilter::Completed => " AND status = 'completed'",
            TaskFilter::All => "",
        };
        let order = match order {
            TaskOrder::Priority => "priority DESC, id",
            TaskOrder::Newest => "id DESC",
        };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TASK_COLUMNS} FROM team_tasks WHERE team = $1{status}{} ORDER BY {order} LIMIT $2",
            if user.is_some() { " AND user_id = $3" } else { "" }
        )))
        .bind(team)
        .bind(limit)
        .bind(user.unwrap_or_default())
        .fetch_all(self.pool())
        .await?;
        self.with_blockers(rows.iter().map(task).collect::<Result<Vec<_>, _>>()?)
            .await
    }

    /// `team`'s tasks whose subject or description match `query`'s words, best first (FTS5
    /// bm25 on SQLite, `ts_rank` on PostgreSQL), at most `limit`. The query is bounded as
    /// memory searches are.
    pub async fn search_tasks(
        &self,
        team: &str,
        user: &str,
        query: &str,
        limit: i64,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let terms = crate::memory_query_terms(query)?;
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let rows = match self.engine() {
            crate::Engine::Sqlite => {
                let fts = terms
                    .iter()
                    .map(|t| format!("\"{t}\""))
                    .collect::<Vec<_>>()
                    .join(" OR ");
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "WITH m AS MATERIALIZED (SELECT rowid AS id, -bm25(team_tasks_fts) AS score FROM team_tasks_fts \
                     WHERE team_tasks_fts MATCH $1) \
                     SELECT {} FROM m JOIN team_tasks t ON t.id = m.id WHERE t.team = $2 AND t.user_id = $4 \
                     ORDER BY m.score DESC, t.id LIMIT $3",
                    qualified("t")
                )))
                .bind(fts)
                .bind(team)
                .bind(limit)
                .bind(user)
                .fetch_all(self.pool())
                .await?
            }
            crate::Engine::Postgres => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {TASK_COLUMNS} FROM team_tasks WHERE team = $2 AND user_id = $4 AND search @@ to_tsquery('simple', $1) \
                     ORDER BY ts_rank(search, to_tsquery('simple', $1)) DESC, id LIMIT $3"
                )))
                .bind(terms.join(" | "))
                .bind(team)
                .bind(limit)
                .bind(user)
                .fetch_all(self.pool())
                .await?
            }
        };
        self.with_blockers(rows.iter().map(task).collect::<Result<Vec<_>, _>>()?)
            .await
    }

    pub(super) async fn with_blockers(
        &self,
        mut tasks: Vec<TaskRecord>,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if tasks.is_empty() {
            return Ok(tasks);
        }
        let sql = format!(
            "SELECT task, blocked_by FROM team_task_deps WHERE task IN ({}) ORDER BY blocked_by",
            placeholders(1, tasks.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for t in &tasks {
            query = query.bind(t.id);
        }
        for row in query.fetch_all(self.pool()).await? {
            let (id, blocker): (i64, i64) = (row.try_get("task")?, row.try_get("blocked_by")?);
            if let Some(t) = tasks.iter_mut().find(|t| t.id == id) {
                t.blocked_by.push(blocker);
            }
        }
        Ok(tasks)
    }
}

/// [`TASK_COLUMNS`] of table alias `alias`.
fn qualified(alias: &str) -> String {
    TASK_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c} AS {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

//! Full-text search over the memory chunks a user can see (SQLite FTS5 with bm25; PostgreSQL
//! `tsvector` with `ts_rank`), bounded so one caller cannot starve the store.
//!
//! A model writes the query, so it is untrusted input: a 600 KB query of one repeated word once
//! took 23 s (the engines' cost grows with the number of terms, quadratically with repeats),
//! and eight of them held every pooled connection, so other users' memory reads and chat turns
//! failed with "pool timed out". Three bounds, all here where every search passes:
//! - the query: at most [`MAX_MEMORY_QUERY_BYTES`] bytes and [`MAX_MEMORY_QUERY_TERMS`] different words,
//!   repeats removed; beyond that the error says the limit and what to search for instead;
//! - the time: [`MEMORY_SEARCH_TIMEOUT`] for waiting and running together; PostgreSQL also cancels the
//!   statement itself (`statement_timeout`);
//! - the pool: at most [`memory_search_slots`] searches hold a connection at once, fewer than the pool,
//!   so other queries always find one. A search that outlives its caller's deadline keeps its
//!   slot until the database is done with it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use tokio::sync::Semaphore;

use super::MemoryHit;
use crate::{Engine, Store, StoreError};

/// The longest query searched, in bytes.
pub const MAX_MEMORY_QUERY_BYTES: usize = 1024;
/// The most different words a query may have.
pub const MAX_MEMORY_QUERY_TERMS: usize = 32;
/// How long a search may wait for its turn and run.
pub const MEMORY_SEARCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What a bounded search runs.
pub(crate) type SearchFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<MemoryHit>, StoreError>> + Send>>;

/// The hits of rows with `path`, `user_id`, `start_line`, `end_line`, `content` and `score`.
pub(crate) fn hits(rows: &[sqlx::any::AnyRow]) -> Result<Vec<MemoryHit>, StoreError> {
    rows.iter()
        .map(|r| {
            Ok(MemoryHit {
                path: r.try_get("path")?,
                user: r.try_get("user_id")?,
                start_line: r.try_get("start_line")?,
                end_line: r.try_get("end_line")?,
                content: r.try_get("content")?,
                score: r.try_get("score")?,
            })
        })
        .collect()
}

/// The SQLSTATE PostgreSQL reports for a statement cancelled by `statement_timeout`.
const PG_QUERY_CANCELED: &str = "57014";

/// How many searches may hold a connection at once with a pool of `pool_size`: half of it (at
/// least one), so the other half always serves everything else.
pub fn memory_search_slots(pool_size: u32) -> usize {
    usize::try_from(pool_size / 2).unwrap_or(1).max(1)
}

/// The searches in flight, shared by a store's clones.
#[derive(Debug, Clone)]
pub(crate) struct SearchLimits {
    slots: Arc<Semaphore>,
    timeout: Duration,
}

impl SearchLimits {
    pub(crate) fn new(pool_size: u32) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(memory_search_slots(pool_size))),
            timeout: MEMORY_SEARCH_TIMEOUT,
        }
    }
}

/// English function words, left out of a query that has other words: matched with OR, "the"
/// or "when" make every passage a match (a question worded as a person asks it found
/// passages by its "the" and "is" before its subject).
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "but", "by", "can", "could", "did", "do", "does", "for", "from", "get",
    "got", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "just", "me", "my", "of", "on", "or", "our", "she", "should", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "was",
    "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would",
    "you", "your",
];

/// The words of `query` to search for: lowercase, each once, in order of first appearance,
/// without English function words unless the query has nothing else. Refuses a query longer
/// than [`MAX_MEMORY_QUERY_BYTES`] or with more than [`MAX_MEMORY_QUERY_TERMS`] different
/// words, saying how to fix it.
pub fn memory_query_terms(query: &str) -> Result<Vec<String>, StoreError> {
    let invalid = |reason: String| StoreError::Invalid {
        what: "memory search query",
        reason,
    };
    if query.len() > MAX_MEMORY_QUERY_BYTES {
        return Err(invalid(format!(
            "it is {} bytes, and at most {MAX_MEMORY_QUERY_BYTES} are searched; search for a few distinctive words, not a passage",
            query.len()
        )));
    }
    let mut seen = HashSet::new();
    let terms: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|t| seen.insert(t.clone()))
        .collect();
    if terms.len() > MAX_MEMORY_QUERY_TERMS {
        return Err(invalid(format!(
            "it has {} different words, and at most {MAX_MEMORY_QUERY_TERMS} are searched; keep the few most distinctive ones",
            terms.len()
        )));
    }
    let content: Vec<String> = terms
        .iter()
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .cloned()
        .collect();
    Ok(if content.is_empty() { terms } else { content })
}

impl Store {
    /// Full-text search over the chunks a user can see, best first. The query is bounded (see
    /// [`memory_query_terms`]), and so are the time and the connections searches take.
    pub async fn search_memory(
        &self,
        agent: &str,
        user: &str,
        query: &str,
        limit: i64,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let terms = memory_query_terms(query)?;
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let (agent, user) = (agent.to_string(), user.to_string());
        self.bounded_search("memory search", move |store, deadline| {
            Box::pin(async move {
                store
                    .run_search(&agent, &user, &terms, limit, deadline)
                    .await
            })
        })
        .await
    }

    /// Runs `search` within the searches' bounds: one of the [`memory_search_slots`], and the
    /// time limit for waiting and running together (the search is given its deadline, for
    /// PostgreSQL's `statement_timeout`). `what` names it in the timeout's message.
    pub(crate) async fn bounded_search<F>(
        &self,
        what: &'static str,
        search: F,
    ) -> Result<Vec<MemoryHit>, StoreError>
    where
        F: FnOnce(Store, tokio::time::Instant) -> SearchFuture + Send + 'static,
    {
        let limits = self.memory_search.clone();
        let deadline = tokio::time::Instant::now() + limits.timeout;
        let timed_out = || StoreError::TimedOut {
            what,
            limit: limits.timeout,
            hint: "the store is busy with other searches or the query matches too much; try again with fewer, more distinctive words",
        };
        let bounded = async {
            let slot = Arc::clone(&limits.slots)
                .acquire_owned()
                .await
                .map_err(|_| timed_out())?;
            // A search whose deadline passed while it waited for a slot is not started (a fast
            // database would otherwise finish it before the deadline is looked at).
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out());
            }
            let store = self.clone();
            // Its own task, holding the slot until the database is done even when the caller
            // stops waiting: searches never hold more connections than their slots.
            let running = tokio::spawn(async move {
                let _slot = slot;
                search(store, deadline).await
            });
            match running.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => Err(timed_out()),
            }
        };
        match tokio::time::timeout_at(deadline, bounded).await {
            Ok(Err(StoreError::Database(sqlx::Error::Database(e))))
                if e.code().as_deref() == Some(PG_QUERY_CANCELED) =>
            {
                Err(timed_out())
            }
            Ok(result) => result,
            Err(_) => Err(timed_out()),
        }
    }

    /// `query`'s rows, cancelled by PostgreSQL at `deadline` (`statement_timeout` in a
    /// transaction of its own; 0 would mean no limit); on SQLite the caller's deadline is the
    /// bound ([`Store::bounded_search`]).
    pub(crate) async fn fetch_bounded<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<sqlx::any::AnyRow>, StoreError> {
        if self.engine() == Engine::Sqlite {
            return Ok(query.fetch_all(self.pool()).await?);
        }
        let mut tx = self.pool().begin().await?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let left_ms = left.as_millis().clamp(1, u128::from(u32::MAX));
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(format!("{left_ms}ms"))
            .execute(&mut *tx)
            .await?;
        let rows = query.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// The search statement itself, on one connection.
    async fn run_search(
        &self,
        agent: &str,
        user: &str,
        terms: &[String],
        limit: i64,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let query = match self.engine() {
            Engine::Sqlite => {
                // Quote each term: FTS5 syntax characters in a query are data, not operators.
                let fts = terms
                    .iter()
                    .map(|t| format!("\"{t}\""))
                    .collect::<Vec<_>>()
                    .join(" OR ");
                // The full-text match runs first, once (materialised); scoping joins come after.
                // Letting the planner start from the documents runs the MATCH per document.
                sqlx::query(
                    "WITH m AS MATERIALIZED (SELECT rowid AS id, -bm25(memory_chunks_fts) AS score FROM memory_chunks_fts \
                     WHERE memory_chunks_fts MATCH $1) \
                     SELECT d.path AS path, d.user_id AS user_id, c.start_line AS start_line, c.end_line AS end_line, \
                     c.content AS content, m.score AS score FROM m JOIN memory_chunks c ON c.id = m.id \
                     JOIN memory_documents d ON d.id = c.document_id \
                     WHERE d.agent_key = $2 AND (d.user_id = $3 OR d.user_id = '') ORDER BY m.score DESC LIMIT $4",
                )
                .bind(fts)
                .bind(agent)
                .bind(user)
                .bind(limit)
            }
            Engine::Postgres => {
                let tsquery = terms.join(" | ");
                // As on SQLite: match first (the GIN index), then scope, so a planner working from
                // stale statistics cannot start from the documents and probe the index per row.
                sqlx::query(
                    "WITH m AS MATERIALIZED (SELECT id, document_id, start_line, end_line, content, \
                     CAST(ts_rank(tsv, to_tsquery('simple', $1)) AS DOUBLE PRECISION) AS score FROM memory_chunks \
                     WHERE tsv @@ to_tsquery('simple', $1)) \
                     SELECT d.path AS path, d.user_id AS user_id, m.start_line AS start_line, m.end_line AS end_line, \
                     m.content AS content, m.score AS score FROM m JOIN memory_documents d ON d.id = m.document_id \
                     WHERE d.agent_key = $2 AND (d.user_id = $3 OR d.user_id = '') ORDER BY m.score DESC LIMIT $4",
                )
                .bind(tsquery)
                .bind(agent)
                .bind(user)
                .bind(limit)
            }
        };
        let rows = self.fetch_bounded(query, deadline).await?;
        hits(&rows)
    }

    /// The same store with searches bounded by `timeout` instead of [`MEMORY_SEARCH_TIMEOUT`] (the
    /// slots stay shared with the other clones).
    pub fn with_memory_search_timeout(mut self, timeout: Duration) -> Self {
        self.memory_search.timeout = timeout;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreConfig;

    #[test]
    fn searches_never_take_the_whole_pool() {
        assert_eq!(memory_search_slots(1), 1);
        for pool in 2..64 {
            assert!(memory_search_slots(pool) < pool as usize, "pool {pool}");
            assert!(memory_search_slots(pool) >= 1);
        }
    }

    #[test]
    fn terms_are_deduplicated_and_bounded() {
        assert_eq!(
            memory_query_terms("Cat cat, CAT tuna!").unwrap(),
            ["cat", "tuna"],
            "repeats count once"
        );
        assert_eq!(
            memory_query_terms("When does the cat eat?").unwrap(),
            ["cat", "eat"],
            "function words go"
        );
        assert_eq!(memory_query_terms("to be or not").unwrap(), ["not"],);
        assert_eq!(
            memory_query_terms("the who").unwrap(),
            ["the", "who"],
            "unless nothing else is left"
        );
        assert_eq!(
            memory_query_terms(&"cat ".repeat(200)).unwrap(),
            ["cat"],
            "800 bytes of one word is one term"
        );
        let long = memory_query_terms(&"cat ".repeat(300))
            .unwrap_err()
            .to_string();
        assert!(
            long.contains("1200 bytes") && long.contains("1024"),
            "{long}"
        );
        let many: String = (0..40).map(|i| format!("w{i} ")).collect();
        let many = memory_query_terms(&many).unwrap_err().to_string();
        assert!(
            many.contains("40 different words") && many.contains("32"),
            "{many}"
        );
    }

    /// Searches occupying every slot make the next one wait (and give up at its deadline with a
    /// clear error) while the rest of the store still gets connections.
    #[tokio::test]
    async fn h22_8_busy_search_slots_leave_the_pool_to_everything_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::sqlite_in(dir.path());
        config.max_connections = 4;
        let store = Store::open(&config).await.unwrap();
        let impatient = store
            .clone()
            .with_memory_search_timeout(Duration::from_millis(200));
        store
            .put_memory("helper", "", "MEMORY.md", "the cat likes tuna")
            .await
            .unwrap();
        // Two searches in flight (the slots of a pool of four) and their connections.
        let held = Arc::clone(&store.memory_search.slots)
            .acquire_many_owned(2)
            .await
            .unwrap();
        let mut busy = Vec::new();
        for _ in 0..2 {
            busy.push(store.pool().acquire().await.unwrap());
        }
        let err = impatient
            .search_memory("helper", "alice", "tuna", 5)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::TimedOut { .. }) && err.to_string().contains("try again"),
            "{err}"
        );
        // Everything else still gets a connection.
        let doc = store.memory("helper", "alice", "MEMORY.md").await.unwrap();
        assert_eq!(
            doc.map(|d| d.content).as_deref(),
            Some("the cat likes tuna")
        );
        drop(held);
        let hits = store
            .search_memory("helper", "alice", "tuna", 5)
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        drop(busy);
    }
}

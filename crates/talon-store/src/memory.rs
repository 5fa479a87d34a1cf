//! Memory documents (`MEMORY.md`, `memory/*.md`), their line-aware chunks, and full-text search
//! ([`search`]: SQLite FTS5 with bm25; PostgreSQL `tsvector` with `ts_rank`; bounded).
//!
//! Every write re-chunks the document in the same transaction, so chunks never disagree with the
//! content. [`Store::put_memory`] replaces a document; [`Store::update_memory`] applies a change
//! to the current content with compare-and-set on the document's version and retries on
//! conflict, so concurrent edits never lose one another.

mod search;
mod vectors;

use sqlx::Row;

pub(crate) use search::SearchLimits;
pub use search::{
    MAX_MEMORY_QUERY_BYTES, MAX_MEMORY_QUERY_TERMS, MEMORY_SEARCH_TIMEOUT, memory_query_terms,
    memory_search_slots,
};
pub(crate) use vectors::register_sqlite_vec;
pub use vectors::{ChunkVector, EmbeddingProgress};

use crate::{Store, StoreError, now_ms};

/// Target chunk size in characters.
pub const CHUNK_CHARS: usize = 1000;
/// Characters of overlap between consecutive chunks.
pub const CHUNK_OVERLAP: usize = 200;

/// One chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: i64,
    /// 1-based first line.
    pub start_line: i64,
    /// 1-based last line.
    pub end_line: i64,
    pub content: String,
}

/// Splits text into chunks of whole lines of about [`CHUNK_CHARS`], each starting with the last
/// ~[`CHUNK_OVERLAP`] characters' worth of lines of the previous one. A single longer line is its
/// own chunk.
pub fn chunk(text: &str) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let mut chunks = Vec::new();
    let mut start = 0usize;
    while start < lines.len() {
        let mut end = start;
        let mut size = 0usize;
        while end < lines.len() && (end == start || size + lines[end].len() < CHUNK_CHARS) {
            size += lines[end].len() + 1;
            end += 1;
        }
        chunks.push(Chunk {
            index: chunks.len() as i64,
            start_line: start as i64 + 1,
            end_line: end as i64,
            content: lines[start..end].join("\n"),
        });
        if end >= lines.len() {
            break;
        }
        // Step back over whole lines worth about CHUNK_OVERLAP characters, but always advance.
        let mut back = end;
        let mut overlap = 0usize;
        while back > start + 1 && overlap + lines[back - 1].len() < CHUNK_OVERLAP {
            overlap += lines[back - 1].len() + 1;
            back -= 1;
        }
        start = back.max(start + 1);
    }
    chunks
}

/// A memory document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryDocument {
    pub agent: String,
    /// Empty for the agent's global memory.
    pub user: String,
    pub path: String,
    pub content: String,
    pub version: i64,
}

/// A search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub path: String,
    pub user: String,
    pub start_line: i64,
    pub end_line: i64,
    pub content: String,
    /// Higher is better.
    pub score: f64,
}

/// Why an update could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError<E> {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The change itself refused the content (for example: the text to replace is missing).
    #[error("{0}")]
    Rejected(E),
}

impl Store {
    /// Writes a document (replacing it), re-chunks and re-indexes it; returns the new version.
    pub async fn put_memory(
        &self,
        agent: &str,
        user: &str,
        path: &str,
        content: &str,
    ) -> Result<i64, StoreError> {
        self.write_memory(agent, user, path, content, None)
            .await
            .map(|v| v.unwrap_or(0))
    }

    /// Writes only if the document is at `expected` version (0: must not exist). `None` when
    /// another writer got there first.
    async fn write_memory(
        &self,
        agent: &str,
        user: &str,
        path: &str,
        content: &str,
        expected: Option<i64>,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.pool().begin().await?;
        let now = now_ms();
        let row = match expected {
            None => {
                sqlx::query(
                    "INSERT INTO memory_documents (agent_key, user_id, path, content, version, updated_at) VALUES ($1, $2, $3, $4, 1, $5) \
                     ON CONFLICT (agent_key, user_id, path) DO UPDATE SET content = excluded.content, \
                     version = memory_documents.version + 1, updated_at = excluded.updated_at RETURNING id, version",
                )
                .bind(agent)
                .bind(user)
                .bind(path)
                .bind(content)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
            }
            Some(0) => {
                let inserted = sqlx::query(
                    "INSERT INTO memory_documents (agent_key, user_id, path, content, version, updated_at) VALUES ($1, $2, $3, $4, 1, $5) \
                     ON CONFLICT (agent_key, user_id, path) DO NOTHING RETURNING id, version",
                )
                .bind(agent)
                .bind(user)
                .bind(path)
                .bind(content)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                match inserted {
                    Some(row) => row,
                    None => return Ok(None),
                }
            }
            Some(version) => {
                let updated = sqlx::query(
                    "UPDATE memory_documents SET content = $1, version = version + 1, updated_at = $2 \
                     WHERE agent_key = $3 AND user_id = $4 AND path = $5 AND version = $6 RETURNING id, version",
                )
                .bind(content)
                .bind(now)
                .bind(agent)
                .bind(user)
                .bind(path)
                .bind(version)
                .fetch_optional(&mut *tx)
                .await?;
                match updated {
                    Some(row) => row,
                    None => return Ok(None),
                }
            }
        };
        let id: i64 = row.try_get("id")?;
        let version: i64 = row.try_get("version")?;
        // The new chunks go in beside the old ones; a chunk whose text did not change keeps
        // its vector (an edit to one paragraph re-embeds that paragraph, not the document);
        // then the old chunks go, with their vectors and full-text entries.
        let last_old: i64 = sqlx::query(
            "SELECT COALESCE(MAX(id), 0) AS last FROM memory_chunks WHERE document_id = $1",
        )
        .bind(id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("last")?;
        for c in chunk(content) {
            sqlx::query("INSERT INTO memory_chunks (document_id, chunk_index, start_line, end_line, content) VALUES ($1, $2, $3, $4, $5)")
                .bind(id)
                .bind(c.index)
                .bind(c.start_line)
                .bind(c.end_line)
                .bind(c.content)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "INSERT INTO memory_vectors (chunk_id, model, dims, vector, embedded_at) \
             SELECT n.id, v.model, v.dims, v.vector, v.embedded_at FROM memory_chunks n \
             JOIN memory_chunks o ON o.document_id = n.document_id AND o.id <= $2 AND o.content = n.content \
             JOIN memory_vectors v ON v.chunk_id = o.id \
             WHERE n.document_id = $1 AND n.id > $2 ON CONFLICT (chunk_id) DO NOTHING",
        )
        .bind(id)
        .bind(last_old)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM memory_chunks WHERE document_id = $1 AND id <= $2")
            .bind(id)
            .bind(last_old)
            .execute(&mut *tx)
            .await?;
        // Queued for the knowledge graph at this version (see `knowledge_graph`).
        sqlx::query(
            "INSERT INTO kg_jobs (document_id, version, attempts, next_at, last_error) VALUES ($1, $2, 0, $3, '') \
             ON CONFLICT (document_id) DO UPDATE SET version = excluded.version, attempts = 0, \
             next_at = excluded.next_at, last_error = ''",
        )
        .bind(id)
        .bind(version)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        self.memory_written.notify_one();
        tx.commit().await?;
        Ok(Some(version))
    }

    /// Applies `change` to the current content (empty if the document does not exist) and writes
    /// the result with compare-and-set, retrying on conflict: concurrent updates all land.
    pub async fn update_memory<E, F>(
        &self,
        agent: &str,
        user: &str,
        path: &str,
        change: F,
    ) -> Result<(i64, String), UpdateError<E>>
    where
        F: Fn(&str) -> Result<String, E>,
    {
        for _ in 0..64 {
            let current = self.own_memory(agent, user, path).await?;
            let (content, version) = current.map_or((String::new(), 0), |d| (d.content, d.version));
            let next = change(&content).map_err(UpdateError::Rejected)?;
            if let Some(v) = self
                .write_memory(agent, user, path, &next, Some(version))
                .await?
            {
                return Ok((v, next));
            }
        }
        Err(UpdateError::Store(StoreError::Invalid {
            what: "memory update",
            reason: format!("{path} kept changing under concurrent writers; try again"),
        }))
    }

    /// The document stored exactly at (agent, user, path).
    async fn own_memory(
        &self,
        agent: &str,
        user: &str,
        path: &str,
    ) -> Result<Option<MemoryDocument>, StoreError> {
        let row = sqlx::query("SELECT content, version FROM memory_documents WHERE agent_key = $1 AND user_id = $2 AND path = $3")
            .bind(agent)
            .bind(user)
            .bind(path)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| {
            Ok(MemoryDocument {
                agent: agent.to_string(),
                user: user.to_string(),
                path: path.to_string(),
                content: r.try_get("content")?,
                version: r.try_get("version")?,
            })
        })
        .transpose()
    }

    /// The user's document, falling back to the agent's global one.
    pub async fn memory(
        &self,
        agent: &str,
        user: &str,
        path: &str,
    ) -> Result<Option<MemoryDocument>, StoreError> {
        if !user.is_empty()
            && let Some(doc) = self.own_memory(agent, user, path).await?
        {
            return Ok(Some(doc));
        }
        self.own_memory(agent, "", path).await
    }

    /// Every document visible to a user, sorted by path: their own, else the agent's global one
    /// of that path (what [`Store::memory`] returns for each of [`Store::memory_paths`]), in one
    /// query — file tools list and search all of a user's memory at once.
    pub async fn memory_documents(
        &self,
        agent: &str,
        user: &str,
    ) -> Result<Vec<MemoryDocument>, StoreError> {
        let rows = sqlx::query("SELECT user_id, path, content, version FROM memory_documents WHERE agent_key = $1 AND (user_id = $2 OR user_id = '') ORDER BY path, user_id")
            .bind(agent)
            .bind(user)
            .fetch_all(self.pool())
            .await?;
        let mut out: Vec<MemoryDocument> = Vec::with_capacity(rows.len());
        for r in &rows {
            let doc = MemoryDocument {
                agent: agent.to_string(),
                user: r.try_get("user_id")?,
                path: r.try_get("path")?,
                content: r.try_get("content")?,
                version: r.try_get("version")?,
            };
            // Within a path the global row ('') sorts first: the user's own replaces it.
            match out.last_mut() {
                Some(last) if last.path == doc.path => *last = doc,
                _ => out.push(doc),
            }
        }
        Ok(out)
    }

    /// Paths of the documents visible to a user (their own and the global ones), sorted.
    pub async fn memory_paths(&self, agent: &str, user: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT path FROM memory_documents WHERE agent_key = $1 AND (user_id = $2 OR user_id = '') ORDER BY path")
            .bind(agent)
            .bind(user)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("path").map_err(StoreError::from))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_line_aware_with_overlap() {
        let text: String = (1..=100)
            .map(|i| format!("line number {i:03} with some words\n"))
            .collect();
        let chunks = chunk(&text);
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert!(c.content.len() <= CHUNK_CHARS + 40, "{}", c.content.len());
            assert_eq!(
                c.content.lines().count() as i64,
                c.end_line - c.start_line + 1
            );
        }
        for pair in chunks.windows(2) {
            assert!(
                pair[1].start_line <= pair[0].end_line,
                "overlap between {pair:?}"
            );
            assert!(pair[1].start_line > pair[0].start_line, "progress");
        }
        assert_eq!(chunks.last().map(|c| c.end_line), Some(100));
        assert!(chunk("").is_empty());
        let long = "x".repeat(5000);
        assert_eq!(chunk(&long).len(), 1, "a single long line is one chunk");
    }
}

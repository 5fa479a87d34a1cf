//! The memory chunks' embeddings and the vector half of hybrid search.
//!
//! Each chunk has at most one vector, stored with the name of the model that made it; searches
//! compare only vectors of the model asked for, so a changed model never mixes two models'
//! spaces. The vectors are made outside the store, in the background ([`Store::chunks_to_embed`]
//! then [`Store::put_chunk_vectors`]), so writing a document never waits for an embedder.
//!
//! Where the comparing happens:
//! - SQLite: sqlite-vec's `vec_distance_cosine` over the stored little-endian `f32` blobs
//!   (registered into every connection by [`register_sqlite_vec`]). It is an exact scan; a
//!   plain column instead of a `vec0` table keeps the agent / user scoping and the model in the
//!   same statement, and any number of dimensions.
//! - PostgreSQL: an exact dot product in SQL over `REAL[]` (the vectors are normalised, so it is
//!   the cosine). pgvector is not used: the servers this was built on do not have it, and code
//!   that cannot be run here is not shipped; [`Store::vector_backend`] says which is active.

use std::fmt::Write as _;
use std::sync::Once;

use sqlx::Row;

use super::MemoryHit;
use crate::{Engine, Store, StoreError, now_ms};

/// A vector for one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    pub chunk: i64,
    pub vector: Vec<f32>,
}

/// How far the chunks are embedded with one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddingProgress {
    /// Chunks with a vector of the model.
    pub embedded: i64,
    /// Every chunk.
    pub chunks: i64,
}

/// Makes sqlite-vec's functions available in every SQLite connection opened from now on, once
/// per process.
pub(crate) fn register_sqlite_vec() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point, with the signature
        // `sqlite3_auto_extension` expects (`int (*)(sqlite3*, char**, const sqlite3_api_routines*)`);
        // the crate declares it without arguments only because it is called from C. It is
        // registered once, before the connections that use it are opened, on the SQLite library
        // sqlx links (libsqlite3-sys, the same version this crate depends on).
        unsafe {
            let init: unsafe extern "C" fn(
                *mut libsqlite3_sys::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const libsqlite3_sys::sqlite3_api_routines,
            ) -> std::os::raw::c_int =
                std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
            libsqlite3_sys::sqlite3_auto_extension(Some(init));
        }
    });
}

/// The two engines' vector searches around their score expression: `$2` model, `$3` agent,
/// `$4` user, `$5` limit.
macro_rules! scoped_vector_search {
    (select) => {
        "SELECT d.path AS path, d.user_id AS user_id, c.start_line AS start_line, \
         c.end_line AS end_line, c.content AS content, "
    };
    (scope) => {
        "FROM memory_vectors v JOIN memory_chunks c ON c.id = v.chunk_id \
         JOIN memory_documents d ON d.id = c.document_id \
         WHERE v.model = $2 AND d.agent_key = $3 AND (d.user_id = $4 OR d.user_id = '') \
         ORDER BY score DESC LIMIT $5"
    };
}

/// The upsert of one chunk's vector, `$4` written as `$vector`: `$1` chunk, `$2` model,
/// `$3` dimensions, `$5` time. Only while the chunk exists.
macro_rules! upsert_vector {
    ($vector:literal) => {
        concat!(
            "INSERT INTO memory_vectors (chunk_id, model, dims, vector, embedded_at) SELECT $1, $2, $3, ",
            $vector,
            ", $5 WHERE EXISTS (SELECT 1 FROM memory_chunks WHERE id = $1) \
             ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, dims = excluded.dims, \
             vector = excluded.vector, embedded_at = excluded.embedded_at"
        )
    };
}

/// `v` as PostgreSQL's text form of a `REAL[]`.
fn pg_array(v: &[f32]) -> String {
    let mut out = String::with_capacity(v.len() * 10 + 2);
    out.push('{');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Non-finite values cannot be stored, and PostgreSQL refuses the text of a subnormal
        // REAL ("value out of range: underflow"); both are zero for a cosine.
        let x = if x.is_finite() && x.abs() >= f32::MIN_POSITIVE {
            *x
        } else {
            0.0
        };
        let _ = write!(out, "{x}");
    }
    out.push('}');
    out
}

/// `v` as little-endian `f32` bytes.
fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Store {
    /// What compares vectors here, for `talon doctor`.
    pub async fn vector_backend(&self) -> Result<String, StoreError> {
        match self.engine() {
            Engine::Sqlite => {
                let version: String = sqlx::query("SELECT vec_version() AS v")
                    .fetch_one(self.pool())
                    .await?
                    .try_get("v")?;
                Ok(format!("sqlite-vec {version} (exact cosine)"))
            }
            Engine::Postgres => {
                let pgvector = sqlx::query(
                    "SELECT 1 AS one FROM pg_available_extensions WHERE name = 'vector'",
                )
                .fetch_optional(self.pool())
                .await?
                .is_some();
                Ok(if pgvector {
                    "exact cosine in SQL (pgvector is available on this server but not used)".into()
                } else {
                    "exact cosine in SQL (this server has no pgvector)".into()
                })
            }
        }
    }

    /// Up to `limit` chunks with no vector of `model`, oldest first: what the background indexer
    /// embeds next (after a model change: every chunk).
    pub async fn chunks_to_embed(
        &self,
        model: &str,
        limit: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id AS id, c.content AS content FROM memory_chunks c \
             LEFT JOIN memory_vectors v ON v.chunk_id = c.id AND v.model = $1 \
             WHERE v.chunk_id IS NULL ORDER BY c.id LIMIT $2",
        )
        .bind(model)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("content")?)))
            .collect()
    }

    /// Stores `model`'s vectors for chunks, replacing any older model's. A chunk rewritten
    /// since it was read (so gone) is skipped: its successor is embedded in its own turn.
    pub async fn put_chunk_vectors(
        &self,
        model: &str,
        vectors: &[ChunkVector],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let now = now_ms();
        for v in vectors {
            let dims = i64::try_from(v.vector.len()).unwrap_or(i64::MAX);
            // The vector's parameter: a blob on SQLite, the text of a REAL[] on PostgreSQL.
            let sql = match self.engine() {
                Engine::Sqlite => upsert_vector!("$4"),
                Engine::Postgres => upsert_vector!("CAST($4 AS REAL[])"),
            };
            let query = sqlx::query(sql).bind(v.chunk).bind(model).bind(dims);
            let query = match self.engine() {
                Engine::Sqlite => query.bind(le_bytes(&v.vector)),
                Engine::Postgres => query.bind(pg_array(&v.vector)),
            };
            query.bind(now).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// How many chunks have a vector of `model`, of how many.
    pub async fn embedding_progress(&self, model: &str) -> Result<EmbeddingProgress, StoreError> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM memory_vectors WHERE model = $1) AS embedded, \
             (SELECT COUNT(*) FROM memory_chunks) AS chunks",
        )
        .bind(model)
        .fetch_one(self.pool())
        .await?;
        Ok(EmbeddingProgress {
            embedded: row.try_get("embedded")?,
            chunks: row.try_get("chunks")?,
        })
    }

    /// The chunks a user can see nearest to `query` (a normalised vector of `model`), most
    /// similar first; the score is the cosine similarity. Bounded like the full-text search
    /// (see [`Store::search_memory`]).
    pub async fn search_memory_vectors(
        &self,
        agent: &str,
        user: &str,
        model: &str,
        query: &[f32],
        limit: i64,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let (agent, user, model, query) = (
            agent.to_string(),
            user.to_string(),
            model.to_string(),
            query.to_vec(),
        );
        self.bounded_search("memory vector search", move |store, deadline| {
            Box::pin(async move {
                store
                    .run_vector_search(&agent, &user, &model, &query, limit, deadline)
                    .await
            })
        })
        .await
    }

    async fn run_vector_search(
        &self,
        agent: &str,
        user: &str,
        model: &str,
        query: &[f32],
        limit: i64,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let sql = match self.engine() {
            Engine::Sqlite => concat!(
                scoped_vector_search!(select),
                "1.0 - vec_distance_cosine(v.vector, $1) AS score ",
                scoped_vector_search!(scope)
            ),
            Engine::Postgres => concat!(
                scoped_vector_search!(select),
                // In double precision: a product of two small REALs underflows REAL.
                "(SELECT SUM(CAST(a AS DOUBLE PRECISION) * b) \
                 FROM unnest(v.vector, CAST($1 AS REAL[])) AS t(a, b)) AS score ",
                scoped_vector_search!(scope)
            ),
        };
        let query = match self.engine() {
            Engine::Sqlite => sqlx::query(sql).bind(le_bytes(query)),
            Engine::Postgres => sqlx::query(sql).bind(pg_array(query)),
        };
        let query = query.bind(model).bind(agent).bind(user).bind(limit);
        let rows = self.fetch_bounded(query, deadline).await?;
        super::search::hits(&rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_have_a_text_form_for_postgresql() {
        assert_eq!(pg_array(&[0.5, -1.0, f32::NAN, 1e-45]), "{0.5,-1,0,0}");
        assert_eq!(pg_array(&[]), "{}");
        assert_eq!(le_bytes(&[1.0]), 1.0f32.to_le_bytes());
    }
}

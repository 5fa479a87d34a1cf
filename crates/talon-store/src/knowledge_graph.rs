//! The knowledge graph: entities and relations extracted from memory documents, each citing
//! the documents it came from, and the queue of documents waiting for extraction.
//!
//! Writing a memory document queues it (`kg_jobs`, in the write's transaction: a job per
//! document, at its newest version); a background worker claims due jobs with a lease (one
//! statement, `FOR UPDATE SKIP LOCKED` on PostgreSQL, so gateways never extract a document
//! twice at once), has the agent's model extract, and stores the result with
//! [`Store::store_extraction`], which replaces what that document said before. A document
//! rewritten meanwhile is not stored over (its newer job does it); an entity no document
//! mentions any more is removed. Failures are retried with growing delays, then given up with
//! the error kept.
//!
//! Entities are per agent and user (`''`: the agent's global memory), as memory documents are;
//! names match case-insensitively, and aliases too.

use std::collections::{BTreeSet, HashMap};

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// Attempts before a document's extraction is given up.
pub const MAX_EXTRACTION_ATTEMPTS: i64 = 5;
/// How long a claimed job is leased to its gateway.
const LEASE_MS: i64 = 120_000;
/// Hops a search follows at most.
pub const MAX_HOPS: usize = 3;

/// A document waiting for extraction, claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractionJob {
    pub document_id: i64,
    pub version: i64,
    pub agent: String,
    pub user: String,
    pub path: String,
    pub content: String,
    /// This claim's attempt, from 1.
    pub attempt: i64,
}

/// An entity as extracted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEntity {
    pub name: String,
    pub kind: String,
    pub description: String,
    pub aliases: Vec<String>,
}

/// A relation as extracted, between entities by name (or alias).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRelation {
    pub source: String,
    pub relation: String,
    pub target: String,
}

/// An entity found, with how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphEntity {
    pub id: i64,
    pub name: String,
    pub kind: String,
    pub description: String,
    pub aliases: Vec<String>,
    /// Hops from an entity matching the query (0: it matched).
    pub hops: usize,
    /// The documents that mention it.
    pub documents: Vec<String>,
}

/// A relation on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphRelation {
    pub source: String,
    pub relation: String,
    pub target: String,
    pub documents: Vec<String>,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphHits {
    pub entities: Vec<GraphEntity>,
    pub relations: Vec<GraphRelation>,
}

fn key(name: &str) -> String {
    name.trim().to_lowercase()
}

impl Store {
    /// Claims up to `limit` due extraction jobs (leased to the caller), oldest first.
    pub async fn claim_extractions(&self, limit: i64) -> Result<Vec<ExtractionJob>, StoreError> {
        let now = now_ms();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "WITH picked AS MATERIALIZED (SELECT document_id FROM kg_jobs \
             WHERE next_at <= $1 AND attempts < $2 ORDER BY next_at LIMIT $3{}) \
             UPDATE kg_jobs SET next_at = $4, attempts = attempts + 1 \
             WHERE document_id IN (SELECT document_id FROM picked) \
             RETURNING document_id, version, attempts",
            self.skip_locked()
        )))
        .bind(now)
        .bind(MAX_EXTRACTION_ATTEMPTS)
        .bind(limit)
        .bind(now + LEASE_MS)
        .fetch_all(self.pool())
        .await?;
        let mut jobs = Vec::with_capacity(rows.len());
        for r in &rows {
            let document_id: i64 = r.try_get("document_id")?;
            let doc = sqlx::query(
                "SELECT agent_key, user_id, path, content, version FROM memory_documents WHERE id = $1",
            )
            .bind(document_id)
            .fetch_optional(self.pool())
            .await?;
            let Some(doc) = doc else { continue };
            jobs.push(ExtractionJob {
                document_id,
                version: doc.try_get("version")?,
                agent: doc.try_get("agent_key")?,
                user: doc.try_get("user_id")?,
                path: doc.try_get("path")?,
                content: doc.try_get("content")?,
                attempt: r.try_get("attempts")?,
            });
        }
        Ok(jobs)
    }

    /// Records a failed extraction: tried again after `retry_ms`, or given up (with `error`
    /// kept) after [`MAX_EXTRACTION_ATTEMPTS`].
    pub async fn extraction_failed(
        &self,
        document_id: i64,
        error: &str,
        retry_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE kg_jobs SET next_at = $1, last_error = $2 WHERE document_id = $3")
            .bind(now_ms() + retry_ms)
            .bind(error)
            .bind(document_id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Documents waiting for extraction, and those given up (with their errors).
    pub async fn extraction_backlog(&self) -> Result<(i64, Vec<(String, String)>), StoreError> {
        let waiting: i64 = sqlx::query("SELECT COUNT(*) AS n FROM kg_jobs WHERE attempts < $1")
            .bind(MAX_EXTRACTION_ATTEMPTS)
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let failed = sqlx::query(
            "SELECT d.path AS path, j.last_error AS last_error FROM kg_jobs j \
             JOIN memory_documents d ON d.id = j.document_id WHERE j.attempts >= $1 ORDER BY d.path",
        )
        .bind(MAX_EXTRACTION_ATTEMPTS)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| Ok((r.try_get("path")?, r.try_get("last_error")?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((waiting, failed))
    }

    /// Stores what `job`'s document says (replacing what it said before) and ends the job;
    /// `false` when the document changed or went since it was claimed (its newer version's
    /// job stores that one).
    pub async fn store_extraction(
        &self,
        job: &ExtractionJob,
        entities: &[NewEntity],
        relations: &[NewRelation],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let current: Option<i64> =
            sqlx::query("SELECT version FROM memory_documents WHERE id = $1")
                .bind(job.document_id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get("version"))
                .transpose()?;
        if current != Some(job.version) {
            tx.commit().await?;
            return Ok(false);
        }
        let (agent, user, path) = (&job.agent, &job.user, &job.path);
        // What the document said before goes.
        sqlx::query(
            "DELETE FROM kg_entity_docs WHERE path = $1 AND entity_id IN \
             (SELECT id FROM kg_entities WHERE agent_key = $2 AND user_id = $3)",
        )
        .bind(path)
        .bind(agent)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM kg_relation_docs WHERE path = $1 AND relation_id IN \
             (SELECT id FROM kg_relations WHERE agent_key = $2 AND user_id = $3)",
        )
        .bind(path)
        .bind(agent)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        let now = now_ms();
        let mut ids: HashMap<String, i64> = HashMap::new();
        for e in entities {
            let id: i64 = sqlx::query(
                "INSERT INTO kg_entities (agent_key, user_id, name, name_key, kind, description, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (agent_key, user_id, name_key) DO UPDATE SET \
                 kind = CASE WHEN excluded.kind = '' THEN kg_entities.kind ELSE excluded.kind END, \
                 description = CASE WHEN excluded.description = '' THEN kg_entities.description ELSE excluded.description END, \
                 updated_at = excluded.updated_at RETURNING id",
            )
            .bind(agent)
            .bind(user)
            .bind(e.name.trim())
            .bind(key(&e.name))
            .bind(&e.kind)
            .bind(&e.description)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?
            .try_get("id")?;
            ids.insert(key(&e.name), id);
            for alias in &e.aliases {
                let alias = key(alias);
                if alias.is_empty() {
                    continue;
                }
                sqlx::query(
                    "INSERT INTO kg_aliases (entity_id, alias_key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                )
                .bind(id)
                .bind(&alias)
                .execute(&mut *tx)
                .await?;
                ids.entry(alias).or_insert(id);
            }
            sqlx::query(
                "INSERT INTO kg_entity_docs (entity_id, path) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .bind(id)
            .bind(path)
            .execute(&mut *tx)
            .await?;
        }
        for r in relations {
            let (Some(source), Some(target)) = (ids.get(&key(&r.source)), ids.get(&key(&r.target)))
            else {
                continue;
            };
            let id: i64 = sqlx::query(
                "INSERT INTO kg_relations (agent_key, user_id, source_id, relation, target_id) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (source_id, relation, target_id) \
                 DO UPDATE SET relation = excluded.relation RETURNING id",
            )
            .bind(agent)
            .bind(user)
            .bind(source)
            .bind(key(&r.relation))
            .bind(target)
            .fetch_one(&mut *tx)
            .await?
            .try_get("id")?;
            sqlx::query(
                "INSERT INTO kg_relation_docs (relation_id, path) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .bind(id)
            .bind(path)
            .execute(&mut *tx)
            .await?;
        }
        // Nothing mentions them any more: gone (their relations and aliases with them).
        sqlx::query(
            "DELETE FROM kg_relations WHERE agent_key = $1 AND user_id = $2 AND NOT EXISTS \
             (SELECT 1 FROM kg_relation_docs d WHERE d.relation_id = kg_relations.id)",
        )
        .bind(agent)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM kg_entities WHERE agent_key = $1 AND user_id = $2 AND NOT EXISTS \
             (SELECT 1 FROM kg_entity_docs d WHERE d.entity_id = kg_entities.id)",
        )
        .bind(agent)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM kg_jobs WHERE document_id = $1 AND version = $2")
            .bind(job.document_id)
            .bind(job.version)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Entities `user` may see (theirs and the agent's global ones) whose name or alias contains
    /// `query` (case-insensitive), then what they relate to up to `hops` away (at most
    /// [`MAX_HOPS`]), following only `relation` when given; at most `limit` entities.
    pub async fn search_graph(
        &self,
        agent: &str,
        user: &str,
        query: &str,
        relation: Option<&str>,
        hops: usize,
        limit: usize,
    ) -> Result<GraphHits, StoreError> {
        let pattern = format!(
            "%{}%",
            key(query)
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let seeds = sqlx::query(
            "SELECT DISTINCT e.id AS id FROM kg_entities e LEFT JOIN kg_aliases a ON a.entity_id = e.id \
             WHERE e.agent_key = $1 AND (e.user_id = $2 OR e.user_id = '') \
             AND (e.name_key LIKE $3 ESCAPE '\\' OR a.alias_key LIKE $3 ESCAPE '\\') ORDER BY e.id LIMIT $4",
        )
        .bind(agent)
        .bind(user)
        .bind(&pattern)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut hop_of: HashMap<i64, usize> = HashMap::new();
        let mut order: Vec<i64> = Vec::new();
        for r in &seeds {
            let id: i64 = r.try_get("id")?;
            hop_of.insert(id, 0);
            order.push(id);
        }
        let relation = relation.map(key);
        let mut frontier: Vec<i64> = order.clone();
        let mut relation_ids: BTreeSet<i64> = BTreeSet::new();
        for hop in 1..=hops.min(MAX_HOPS) {
            if frontier.is_empty() || order.len() >= limit {
                break;
            }
            let mut next = Vec::new();
            for id in &frontier {
                let edges = sqlx::query(
                    "SELECT id, source_id, relation, target_id FROM kg_relations \
                     WHERE agent_key = $1 AND (user_id = $2 OR user_id = '') AND (source_id = $3 OR target_id = $3)",
                )
                .bind(agent)
                .bind(user)
                .bind(id)
                .fetch_all(self.pool())
                .await?;
                for e in &edges {
                    let name: String = e.try_get("relation")?;
                    if relation.as_ref().is_some_and(|r| *r != name) {
                        continue;
                    }
                    relation_ids.insert(e.try_get("id")?);
                    let (source, target): (i64, i64) =
                        (e.try_get("source_id")?, e.try_get("target_id")?);
                    let other = if source == *id { target } else { source };
                    if !hop_of.contains_key(&other) && order.len() < limit {
                        hop_of.insert(other, hop);
                        order.push(other);
                        next.push(other);
                    }
                }
            }
            frontier = next;
        }
        let mut hits = GraphHits::default();
        let mut names: HashMap<i64, String> = HashMap::new();
        for id in &order {
            let row = sqlx::query("SELECT name, kind, description FROM kg_entities WHERE id = $1")
                .bind(id)
                .fetch_one(self.pool())
                .await?;
            let aliases = self
                .texts(
                    "SELECT alias_key AS text FROM kg_aliases WHERE entity_id = $1 ORDER BY alias_key",
                    *id,
                )
                .await?;
            let documents = self
                .texts(
                    "SELECT path AS text FROM kg_entity_docs WHERE entity_id = $1 ORDER BY path",
                    *id,
                )
                .await?;
            let name: String = row.try_get("name")?;
            names.insert(*id, name.clone());
            hits.entities.push(GraphEntity {
                id: *id,
                name,
                kind: row.try_get("kind")?,
                description: row.try_get("description")?,
                aliases,
                hops: hop_of.get(id).copied().unwrap_or(0),
                documents,
            });
        }
        for id in relation_ids {
            let r = sqlx::query(
                "SELECT source_id, relation, target_id FROM kg_relations WHERE id = $1",
            )
            .bind(id)
            .fetch_one(self.pool())
            .await?;
            let (source, target): (i64, i64) = (r.try_get("source_id")?, r.try_get("target_id")?);
            let (Some(source), Some(target)) = (names.get(&source), names.get(&target)) else {
                continue;
            };
            let documents = self
                .texts(
                    "SELECT path AS text FROM kg_relation_docs WHERE relation_id = $1 ORDER BY path",
                    id,
                )
                .await?;
            hits.relations.push(GraphRelation {
                source: source.clone(),
                relation: r.try_get("relation")?,
                target: target.clone(),
                documents,
            });
        }
        Ok(hits)
    }

    /// The `text` column of `sql`'s rows for the id `id`.
    async fn texts(&self, sql: &'static str, id: i64) -> Result<Vec<String>, StoreError> {
        sqlx::query(sql)
            .bind(id)
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>("text").map_err(StoreError::from))
            .collect()
    }
}

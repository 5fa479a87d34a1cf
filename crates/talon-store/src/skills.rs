//! Skills published to the store (`publish_skill`, `talon skills publish`): a skill's
//! `SKILL.md` parts and every file of its directory, and the record of each use.
//!
//! A skill belongs to a user (`user_id`) or, published with none (the operator's CLI, a
//! single-user session), to everyone (`''`). A user sees their own and everyone's, their own
//! first on a name clash: a skill one user's agent publishes is instructions for that user's
//! conversations only, never another user's.

use sqlx::Row;

use crate::{Store, StoreError, now_ms};

/// A published skill, without its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSkill {
    pub name: String,
    /// `''`: everyone's.
    pub user: String,
    pub description: String,
    /// The frontmatter as JSON (every key the author wrote).
    pub frontmatter: String,
    /// The body of `SKILL.md`.
    pub instructions: String,
    /// Paths of the skill's other files, relative to its directory, sorted.
    pub files: Vec<String>,
    pub version: i64,
    pub published_at: i64,
}

/// What [`Store::publish_skill`] stores.
#[derive(Debug, Clone)]
pub struct NewSkill<'a> {
    pub name: &'a str,
    pub user: &'a str,
    pub description: &'a str,
    pub frontmatter: &'a str,
    pub instructions: &'a str,
    /// Every file but `SKILL.md`: (relative path, content).
    pub files: &'a [(String, Vec<u8>)],
}

impl Store {
    /// Stores `skill` (replacing the user's skill of that name and all its files); its version.
    pub async fn publish_skill(&self, skill: &NewSkill<'_>) -> Result<i64, StoreError> {
        let mut tx = self.pool().begin().await?;
        let version: i64 = sqlx::query(
            "INSERT INTO skills (user_id, name, description, frontmatter, instructions, version, published_at) \
             VALUES ($1, $2, $3, $4, $5, 1, $6) ON CONFLICT (user_id, name) DO UPDATE SET \
             description = excluded.description, frontmatter = excluded.frontmatter, \
             instructions = excluded.instructions, version = skills.version + 1, \
             published_at = excluded.published_at RETURNING version",
        )
        .bind(skill.user)
        .bind(skill.name)
        .bind(skill.description)
        .bind(skill.frontmatter)
        .bind(skill.instructions)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?
        .try_get("version")?;
        sqlx::query("DELETE FROM skill_files WHERE user_id = $1 AND skill = $2")
            .bind(skill.user)
            .bind(skill.name)
            .execute(&mut *tx)
            .await?;
        for (path, content) in skill.files {
            sqlx::query(
                "INSERT INTO skill_files (user_id, skill, path, content) VALUES ($1, $2, $3, $4)",
            )
            .bind(skill.user)
            .bind(skill.name)
            .bind(path)
            .bind(content.clone())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(version)
    }

    /// The skills `user` sees (their own, then everyone's of other names), by name.
    pub async fn published_skills(&self, user: &str) -> Result<Vec<StoredSkill>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.user_id AS user_id, s.name AS name, s.description AS description, \
             s.frontmatter AS frontmatter, s.instructions AS instructions, s.version AS version, \
             s.published_at AS published_at FROM skills s \
             WHERE s.user_id = $1 OR (s.user_id = '' AND NOT EXISTS \
             (SELECT 1 FROM skills o WHERE o.user_id = $1 AND o.name = s.name)) ORDER BY s.name",
        )
        .bind(user)
        .fetch_all(self.pool())
        .await?;
        // Every file path the user may see, in one query.
        let paths = sqlx::query(
            "SELECT user_id, skill, path FROM skill_files WHERE user_id = $1 OR user_id = '' ORDER BY path",
        )
        .bind(user)
        .fetch_all(self.pool())
        .await?;
        let mut by_skill: std::collections::HashMap<(String, String), Vec<String>> =
            std::collections::HashMap::new();
        for r in &paths {
            by_skill
                .entry((r.try_get("user_id")?, r.try_get("skill")?))
                .or_default()
                .push(r.try_get("path")?);
        }
        let mut skills = Vec::with_capacity(rows.len());
        for r in &rows {
            let user_id: String = r.try_get("user_id")?;
            let name: String = r.try_get("name")?;
            let files = by_skill
                .remove(&(user_id.clone(), name.clone()))
                .unwrap_or_default();
            skills.push(StoredSkill {
                name,
                user: user_id,
                description: r.try_get("description")?,
                frontmatter: r.try_get("frontmatter")?,
                instructions: r.try_get("instructions")?,
                files,
                version: r.try_get("version")?,
                published_at: r.try_get("published_at")?,
            });
        }
        Ok(skills)
    }

    /// One file of the skill `name` of `owner` (`''`: everyone's).
    pub async fn skill_file(
        &self,
        owner: &str,
        name: &str,
        path: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(
            "SELECT content FROM skill_files WHERE user_id = $1 AND skill = $2 AND path = $3",
        )
        .bind(owner)
        .bind(name)
        .bind(path)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| r.try_get::<Vec<u8>, _>("content").map_err(StoreError::from))
            .transpose()
    }

    /// Removes the skill `name` of `owner` (`''`: everyone's) with its files; whether it existed.
    pub async fn remove_skill(&self, owner: &str, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM skill_files WHERE user_id = $1 AND skill = $2")
            .bind(owner)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let removed = sqlx::query("DELETE FROM skills WHERE user_id = $1 AND name = $2")
            .bind(owner)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(removed > 0)
    }

    /// Records that `agent` (for `user`) loaded the skill `name` from `source`.
    pub async fn record_skill_use(
        &self,
        name: &str,
        source: &str,
        agent: &str,
        user: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO skill_uses (skill, source, agent_key, user_id, used_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(name)
        .bind(source)
        .bind(agent)
        .bind(user)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// How often each skill was loaded, by name.
    pub async fn skill_use_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT skill, COUNT(*) AS uses FROM skill_uses GROUP BY skill ORDER BY skill",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("skill")?, r.try_get("uses")?)))
            .collect()
    }
}

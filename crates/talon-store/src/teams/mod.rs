//! Agent teams (seed 000 §8, seed 002 §8): a lead, members with roles, a task board
//! ([`tasks`]) and a mailbox ([`mailbox`]), all in the store so every gateway sees one team.
//!
//! An agent may lead or belong to several teams; which one a conversation works with is the
//! runtime's to decide (never "the first one found": GoClaw #490). The lead is not a member of
//! its own team: it posts work, members do it.

use sqlx::Row;

use crate::agents::valid_key;
use crate::{Store, StoreError, now_ms};

mod listing;
mod mailbox;
mod tasks;

pub use mailbox::TeamMessage;
pub use tasks::{NewTask, TaskFilter, TaskOrder, TaskRecord, TaskStatus};

/// One team, with its members.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TeamRecord {
    pub name: String,
    pub lead: String,
    pub description: String,
    pub members: Vec<TeamMember>,
    pub created_at: i64,
}

impl TeamRecord {
    /// Whether `agent` leads the team or is one of its members.
    pub fn includes(&self, agent: &str) -> bool {
        self.lead == agent || self.members.iter().any(|m| m.agent == agent)
    }

    /// Whether `agent` is one of its members (the lead is not).
    pub fn has_member(&self, agent: &str) -> bool {
        self.members.iter().any(|m| m.agent == agent)
    }
}

/// A member of a team and its role there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TeamMember {
    pub agent: String,
    pub role: String,
    pub joined_at: i64,
}

/// Characters of a team's description or a member's role at most.
const MAX_TEXT: usize = 2_000;

fn bounded(what: &'static str, text: &str) -> Result<(), StoreError> {
    if text.chars().count() > MAX_TEXT {
        return Err(StoreError::Invalid {
            what,
            reason: format!("it is longer than {MAX_TEXT} characters; say it shorter"),
        });
    }
    Ok(())
}

impl Store {
    /// Creates team `name` led by `lead`; refused if the name is taken.
    pub async fn create_team(
        &self,
        name: &str,
        lead: &str,
        description: &str,
    ) -> Result<TeamRecord, StoreError> {
        valid_key("team name", name)?;
        valid_key("agent key", lead)?;
        bounded("team description", description)?;
        let now = now_ms();
        let created = sqlx::query(
            "INSERT INTO teams (name, lead, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(lead)
        .bind(description)
        .bind(now)
        .execute(self.pool())
        .await?;
        if created.rows_affected() == 0 {
            return Err(StoreError::Invalid {
                what: "team name",
                reason: format!("a team named {name:?} exists already; choose another name"),
            });
        }
        self.team(name).await?.ok_or_else(|| StoreError::NotFound {
            what: "team",
            key: name.to_string(),
        })
    }

    /// Deletes team `name` with its members, board and mailbox; whether it existed.
    pub async fn delete_team(&self, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        for sql in [
            "DELETE FROM team_task_deps WHERE task IN (SELECT id FROM team_tasks WHERE team = $1)",
            "DELETE FROM team_tasks WHERE team = $1",
            "DELETE FROM team_messages WHERE team = $1",
            "DELETE FROM team_members WHERE team = $1",
        ] {
            sqlx::query(sql).bind(name).execute(&mut *tx).await?;
        }
        let gone = sqlx::query("DELETE FROM teams WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone.rows_affected() == 1)
    }

    /// Adds `agent` to `team` with `role` (or changes its role).
    pub async fn add_team_member(
        &self,
        team: &str,
        agent: &str,
        role: &str,
    ) -> Result<(), StoreError> {
        valid_key("agent key", agent)?;
        bounded("member role", role)?;
        let Some(record) = self.team(team).await? else {
            return Err(StoreError::NotFound {
                what: "team",
                key: team.to_string(),
            });
        };
        if record.lead == agent {
            return Err(StoreError::Invalid {
                what: "team member",
                reason: format!("{agent} leads {team}; the lead posts work, members do it"),
            });
        }
        sqlx::query(
            "INSERT INTO team_members (team, agent, role, joined_at) VALUES ($1, $2, $3, $4) ON CONFLICT (team, agent) DO UPDATE SET role = excluded.role",
        )
        .bind(team)
        .bind(agent)
        .bind(role)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Removes `agent` from `team`; whether it was a member. Messages to it stay in the mailbox.
    pub async fn remove_team_member(&self, team: &str, agent: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM team_members WHERE team = $1 AND agent = $2")
            .bind(team)
            .bind(agent)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One team.
    pub async fn team(&self, name: &str) -> Result<Option<TeamRecord>, StoreError> {
        let Some(row) =
            sqlx::query("SELECT name, lead, description, created_at FROM teams WHERE name = $1")
                .bind(name)
                .fetch_optional(self.pool())
                .await?
        else {
            return Ok(None);
        };
        let mut teams = self.with_members(vec![row]).await?;
        Ok(teams.pop())
    }

    /// Every team, by name.
    pub async fn teams(&self) -> Result<Vec<TeamRecord>, StoreError> {
        let rows =
            sqlx::query("SELECT name, lead, description, created_at FROM teams ORDER BY name")
                .fetch_all(self.pool())
                .await?;
        self.with_members(rows).await
    }

    /// The teams `agent` leads or belongs to, by name.
    pub async fn teams_of(&self, agent: &str) -> Result<Vec<TeamRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, lead, description, created_at FROM teams WHERE lead = $1 \
             OR name IN (SELECT team FROM team_members WHERE agent = $1) ORDER BY name",
        )
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        self.with_members(rows).await
    }

    /// Whether `agent` leads or belongs to any team: one indexed lookup, for what is asked on
    /// every model request (which tools to offer).
    pub async fn on_a_team(&self, agent: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 FROM teams WHERE lead = $1 UNION ALL \
             SELECT 1 FROM team_members WHERE agent = $1 LIMIT 1",
        )
        .bind(agent)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }

    async fn with_members(
        &self,
        rows: Vec<sqlx::any::AnyRow>,
    ) -> Result<Vec<TeamRecord>, StoreError> {
        let mut teams = Vec::with_capacity(rows.len());
        for row in rows {
            let name: String = row.try_get("name")?;
            let members = sqlx::query(
                "SELECT agent, role, joined_at FROM team_members WHERE team = $1 ORDER BY agent",
            )
            .bind(&name)
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|m| {
                Ok(TeamMember {
                    agent: m.try_get("agent")?,
                    role: m.try_get("role")?,
                    joined_at: m.try_get("joined_at")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
            teams.push(TeamRecord {
                name,
                lead: row.try_get("lead")?,
                description: row.try_get("description")?,
                members,
                created_at: row.try_get("created_at")?,
            });
        }
        Ok(teams)
    }
}

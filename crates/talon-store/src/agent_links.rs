//! Agent links: who may delegate to whom (seed 000 §7). Delegation crosses agent boundaries
//! only over a link an operator made: `outbound` (source → target) or `bidirectional`, with a
//! cap on the live delegations over it and per-user allow and deny lists. The cap is counted by
//! the statement that creates the delegation's run ([`crate::Store::create_run`]).

use sqlx::Row;

use crate::agents::valid_key;
use crate::{Store, StoreError, now_ms};

/// Which way a link lets delegations go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkDirection {
    /// Only the source delegates to the target.
    Outbound,
    /// Each delegates to the other.
    Bidirectional,
}

impl LinkDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Outbound => "outbound",
            Self::Bidirectional => "bidirectional",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "outbound" => Ok(Self::Outbound),
            "bidirectional" => Ok(Self::Bidirectional),
            other => Err(StoreError::Invalid {
                what: "link direction",
                reason: format!("{other:?} is not outbound or bidirectional"),
            }),
        }
    }
}

/// Per-user settings of a link: with `allow_users`, only they may delegate over it; nobody in
/// `deny_users` may.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkSettings {
    pub allow_users: Vec<String>,
    pub deny_users: Vec<String>,
}

impl LinkSettings {
    /// Whether `user` (`None`: a call naming no user) may delegate over the link.
    pub fn admits(&self, user: Option<&str>) -> bool {
        let user = user.unwrap_or_default();
        !self.deny_users.iter().any(|u| u == user)
            && (self.allow_users.is_empty() || self.allow_users.iter().any(|u| u == user))
    }
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AgentLink {
    pub source: String,
    pub target: String,
    pub direction: LinkDirection,
    pub max_concurrent: i64,
    pub settings: LinkSettings,
    pub created_at: i64,
}

impl AgentLink {
    /// The agent on the other end of the link from `agent`, if the link lets `agent` delegate.
    pub fn target_for(&self, agent: &str) -> Option<&str> {
        if self.source == agent {
            Some(&self.target)
        } else if self.target == agent && self.direction == LinkDirection::Bidirectional {
            Some(&self.source)
        } else {
            None
        }
    }
}

fn link(row: &sqlx::any::AnyRow) -> Result<AgentLink, StoreError> {
    Ok(AgentLink {
        source: row.try_get("source")?,
        target: row.try_get("target")?,
        direction: LinkDirection::parse(&row.try_get::<String, _>("direction")?)?,
        max_concurrent: row.try_get("max_concurrent")?,
        settings: serde_json::from_str(&row.try_get::<String, _>("settings")?).map_err(|e| {
            StoreError::Invalid {
                what: "link settings",
                reason: e.to_string(),
            }
        })?,
        created_at: row.try_get("created_at")?,
    })
}

const COLUMNS: &str = "source, target, direction, max_concurrent, settings, created_at";

impl Store {
    /// Creates or replaces the link from `source` to `target` (both must be agents).
    pub async fn link_agents(
        &self,
        source: &str,
        target: &str,
        direction: LinkDirection,
        max_concurrent: i64,
        settings: &LinkSettings,
    ) -> Result<AgentLink, StoreError> {
        valid_key("agent key", source)?;
        valid_key("agent key", target)?;
        if source == target {
            return Err(StoreError::Invalid {
                what: "agent link",
                reason: "an agent cannot link to itself (subagents run the agent's own work)"
                    .into(),
            });
        }
        if max_concurrent < 1 {
            return Err(StoreError::Invalid {
                what: "agent link",
                reason: format!("max_concurrent must be at least 1, not {max_concurrent}"),
            });
        }
        for agent in [source, target] {
            if self.agent(agent).await?.is_none() {
                return Err(StoreError::NotFound {
                    what: "agent",
                    key: agent.to_string(),
                });
            }
        }
        let settings_json = serde_json::to_string(settings).map_err(|e| StoreError::Invalid {
            what: "link settings",
            reason: e.to_string(),
        })?;
        sqlx::query(
            "INSERT INTO agent_links (source, target, direction, max_concurrent, settings, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (source, target) DO UPDATE SET direction = excluded.direction, max_concurrent = excluded.max_concurrent, settings = excluded.settings",
        )
        .bind(source)
        .bind(target)
        .bind(direction.as_str())
        .bind(max_concurrent)
        .bind(settings_json)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        self.agent_link(source, target)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "agent link",
                key: format!("{source} -> {target}"),
            })
    }

    /// Removes the link from `source` to `target`; whether there was one.
    pub async fn unlink_agents(&self, source: &str, target: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM agent_links WHERE source = $1 AND target = $2")
            .bind(source)
            .bind(target)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The link from `source` to `target` as stored.
    pub async fn agent_link(
        &self,
        source: &str,
        target: &str,
    ) -> Result<Option<AgentLink>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_links WHERE source = $1 AND target = $2"
        )))
        .bind(source)
        .bind(target)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(link).transpose()
    }

    /// Every link, by source and target.
    pub async fn agent_links(&self) -> Result<Vec<AgentLink>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_links ORDER BY source, target"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(link).collect()
    }

    /// The links `agent` may delegate over: its outbound ones and the bidirectional ones that
    /// end at it.
    pub async fn delegation_links(&self, agent: &str) -> Result<Vec<AgentLink>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM agent_links WHERE source = $1 OR (target = $1 AND direction = 'bidirectional') ORDER BY source, target"
        )))
        .bind(agent)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(link).collect()
    }
}

//! The agents service's typed operations: creating and deleting agents, their context files
//! and their delegation links, with the rules each passes (settings a run can honour, the
//! default agent and the configured ones kept, a file read or listed only for an agent that
//! exists). `talon agents` calls them and prints; `/v1/agents` reads the same records
//! ([`crate::agents_http`]).

use talon_store::{AgentLink, AgentType, LinkDirection, LinkSettings, Store};

use crate::config::Config;
use crate::op_error::OpError;

/// Why an operation was refused or failed.
pub type AgentsError = OpError;

fn unknown_agent(key: &str) -> AgentsError {
    OpError::NotFound(format!("no agent {key:?}; `talon agents list` lists them"))
}

/// Creates (or changes) the agent `key` of type `agent_type` (`open`, `predefined`) with
/// `settings`, a JSON object a run can honour.
pub async fn create(
    store: &Store,
    key: &str,
    agent_type: &str,
    settings: &str,
) -> Result<AgentType, AgentsError> {
    let agent_type: AgentType = agent_type
        .parse()
        .map_err(|e| OpError::Invalid(format!("{e}")))?;
    let parsed: serde_json::Value = serde_json::from_str(settings)
        .map_err(|e| OpError::Invalid(format!("--settings is not valid JSON: {e}")))?;
    crate::runs::gates::check_agent_settings(&parsed)
        .map_err(|e| OpError::Invalid(format!("--settings: {e}")))?;
    store.upsert_agent(key, agent_type, settings).await?;
    Ok(agent_type)
}

/// Deletes the agent `key` and its context files; its sessions and memory stay. The default
/// agent and the agents `talon.toml` configures (created again at every start) are kept.
pub async fn delete(store: &Store, config: &Config, key: &str) -> Result<(), AgentsError> {
    if key == config.agents.default {
        return Err(OpError::Invalid(format!(
            "{key:?} is the default agent ([agents] default); choose another default first"
        )));
    }
    if config.agents.entries.contains_key(key) {
        return Err(OpError::Invalid(format!(
            "agent {key:?} is configured in talon.toml ([agents.{key}]), which creates it at every start: remove it there"
        )));
    }
    if store.delete_agent(key).await? {
        Ok(())
    } else {
        Err(unknown_agent(key))
    }
}

/// Sets the context file `file` of agent `key` (for `user` alone when given).
pub async fn set_file(
    store: &Store,
    key: &str,
    user: Option<&str>,
    file: &str,
    content: &str,
) -> Result<(), AgentsError> {
    match user {
        Some(user) => store.set_user_file(key, user, file, content).await?,
        None => store.set_agent_file(key, file, content).await?,
    }
    Ok(())
}

/// The context file `file` of agent `key` (of `user` when given).
pub async fn file(
    store: &Store,
    key: &str,
    user: Option<&str>,
    file: &str,
) -> Result<String, AgentsError> {
    let found = match user {
        Some(user) => store.user_file(key, user, file).await?,
        None => store.agent_file(key, file).await?,
    };
    found.ok_or_else(|| {
        OpError::NotFound(format!(
            "agent {key:?} has no {file}{}; `talon agents list-files {key}` lists them",
            user.map(|u| format!(" of user {u:?}")).unwrap_or_default()
        ))
    })
}

/// The names of agent `key`'s context files (of `user` when given).
pub async fn files(
    store: &Store,
    key: &str,
    user: Option<&str>,
) -> Result<Vec<String>, AgentsError> {
    if store.agent(key).await?.is_none() {
        return Err(unknown_agent(key));
    }
    Ok(match user {
        Some(user) => store.user_files(key, user).await?,
        None => store.agent_files(key).await?,
    })
}

/// Lets `source` delegate to `target` (both ways when `bidirectional`), at most
/// `max_concurrent` at once, for the users `settings` allows.
pub async fn link(
    store: &Store,
    (source, target): (&str, &str),
    bidirectional: bool,
    max_concurrent: i64,
    settings: &LinkSettings,
) -> Result<AgentLink, AgentsError> {
    let direction = if bidirectional {
        LinkDirection::Bidirectional
    } else {
        LinkDirection::Outbound
    };
    Ok(store
        .link_agents(source, target, direction, max_concurrent, settings)
        .await?)
}

/// Withdraws the link from `source` to `target`.
pub async fn unlink(store: &Store, source: &str, target: &str) -> Result<(), AgentsError> {
    if store.unlink_agents(source, target).await? {
        Ok(())
    } else {
        Err(OpError::NotFound(format!(
            "there is no link from {source:?} to {target:?}; `talon agents links` lists them"
        )))
    }
}

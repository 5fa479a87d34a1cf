//! The teams service's typed operations on a team itself (the board is the tools'): creating
//! and deleting a team and changing its members, with the rule that a lead or member is an
//! agent that exists. `talon teams` and `/v1/teams` call them and only translate [`TeamsError`].

use talon_core::visible::visible;
use talon_store::{Store, TeamRecord};

use crate::op_error::OpError;

/// Why an operation was refused or failed.
pub type TeamsError = OpError;

/// "No team NAME" in the words both callers use.
pub fn no_team(name: &str) -> TeamsError {
    OpError::NotFound(format!(
        "there is no team {}; `talon teams list` (GET /v1/teams) lists them",
        visible(name)
    ))
}

/// Refuses an agent that does not exist.
async fn existing_agent(store: &Store, agent: &str) -> Result<(), TeamsError> {
    match store.agent(agent).await? {
        Some(_) => Ok(()),
        None => Err(OpError::Invalid(format!(
            "there is no agent {}; create it first (`talon agents create`)",
            visible(agent)
        ))),
    }
}

/// Creates the team `name` led by the existing agent `lead`.
pub async fn create(
    store: &Store,
    name: &str,
    lead: &str,
    description: &str,
) -> Result<TeamRecord, TeamsError> {
    existing_agent(store, lead).await?;
    Ok(store.create_team(name, lead, description).await?)
}

/// Deletes the team `name` with its board and messages.
pub async fn delete(store: &Store, name: &str) -> Result<(), TeamsError> {
    if store.delete_team(name).await? {
        Ok(())
    } else {
        Err(no_team(name))
    }
}

/// Puts the existing agent `agent` on the team `name` with `role`; the team as it is now.
pub async fn add_member(
    store: &Store,
    name: &str,
    agent: &str,
    role: &str,
) -> Result<TeamRecord, TeamsError> {
    existing_agent(store, agent).await?;
    store.add_team_member(name, agent, role).await?;
    store.team(name).await?.ok_or_else(|| no_team(name))
}

/// Takes `agent` off the team `name`.
pub async fn remove_member(store: &Store, name: &str, agent: &str) -> Result<(), TeamsError> {
    if store.remove_team_member(name, agent).await? {
        Ok(())
    } else {
        Err(OpError::NotFound(format!(
            "{} is not a member of {}; `talon teams show {}` lists them",
            visible(agent),
            visible(name),
            visible(name)
        )))
    }
}

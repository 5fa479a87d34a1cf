//! The cron service's typed operations: adding and changing a job, with every rule a job must
//! pass (its agent, the session its results go to, the chat they are sent to) checked here
//! once. The `cron` tool, `/v1/cron` and `talon cron` call them and only translate
//! [`CronError`]: the tool into words for the model, HTTP into a status (an unreachable
//! database is 503, never a 400 telling the caller its request was wrong), the CLI into an exit
//! code in `main`.
//!
//! Who asks decides two things, so it is an [`Asker`]: which agent a job runs when the request
//! names none, and how a chat to deliver to is checked (a conversation that came from a chat
//! may only schedule for that chat; an operator at a terminal is held to the channels'
//! `automated_chats` alone).

use talon_core::visible::visible;
use talon_store::{CronDelivery, CronJob, Store, StoreError};

use crate::agent_runs::RunError;
use crate::config::Config;
use crate::cron::request::JobFields;
use crate::runner::Runner;

/// Why a cron operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The request is wrong; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// The caller has no job by that id or name.
    #[error("no job {} of this user", visible(.id))]
    NotFound { id: String },
    /// The database cannot be reached now: try again.
    #[error("the database cannot be reached now, try again shortly: {0}")]
    Unavailable(String),
    /// The store failed otherwise.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for CronError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { .. } => CronError::Invalid(e.to_string()),
            StoreError::NotFound { key, .. } => CronError::NotFound { id: key },
            e if e.is_unavailable() => CronError::Unavailable(e.to_string()),
            e => CronError::Store(e),
        }
    }
}

impl From<RunError> for CronError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Unavailable(reason) => CronError::Unavailable(reason),
            e => CronError::Invalid(e.to_string()),
        }
    }
}

impl CronError {
    /// Whether the caller's request was at fault (a usage error), not the service.
    pub fn is_usage(&self) -> bool {
        matches!(self, CronError::Invalid(_) | CronError::NotFound { .. })
    }
}

/// Who asks for a change to a job.
pub enum Asker<'a> {
    /// A model's call or the HTTP API, on a gateway: `origin` is the channel and chat of the
    /// calling conversation (`None` for HTTP), and `agent` runs a job that names none.
    Gateway {
        runner: &'a Runner,
        agent: &'a str,
        origin: Option<(&'a str, &'a str)>,
    },
    /// An operator at a terminal (`talon cron`), with the configuration's channels.
    Operator {
        store: &'a Store,
        config: &'a Config,
    },
}

impl Asker<'_> {
    fn store(&self) -> &Store {
        match self {
            Asker::Gateway { runner, .. } => runner.store(),
            Asker::Operator { store, .. } => store,
        }
    }

    fn default_agent(&self) -> &str {
        match self {
            Asker::Gateway { agent, .. } => agent,
            Asker::Operator { config, .. } => &config.agents.default,
        }
    }

    /// Refuses an agent that does not exist, or that `user` may not run.
    async fn check_agent(&self, agent: &str, user: &str) -> Result<(), CronError> {
        match self {
            Asker::Gateway { runner, .. } => {
                let user = (!user.is_empty()).then_some(user);
                runner
                    .engine()
                    .context(Some(agent), user, super::CHANNEL)
                    .await?;
            }
            Asker::Operator { store, .. } => {
                if store.agent(agent).await?.is_none() {
                    return Err(CronError::Invalid(format!(
                        "no agent {}; `talon agents create {}` creates it",
                        visible(agent),
                        visible(agent)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Refuses a chat the job may not send to; pins it when it is the asking conversation's own.
    async fn check_delivery(
        &self,
        agent: &str,
        user: &str,
        delivery: &mut CronDelivery,
    ) -> Result<(), CronError> {
        match self {
            Asker::Gateway { runner, origin, .. } => {
                runner
                    .check_job_delivery(*origin, agent, user, delivery)
                    .await
            }
            // The gateway checks again, with the job's tenant, at each delivery.
            Asker::Operator { config, .. } => {
                let Some(section) = config.channels.get(&delivery.channel) else {
                    let names: Vec<&str> = config.channels.keys().map(String::as_str).collect();
                    return Err(CronError::Invalid(format!(
                        "no channel {} in the configuration; the channels are: {}",
                        visible(&delivery.channel),
                        names.join(", ")
                    )));
                };
                let (chat, _) = delivery.chat_and_thread();
                crate::channels::admit_section(
                    &delivery.channel,
                    section,
                    section.tenant.as_deref(),
                    chat,
                    true,
                )
                .map_err(|e| CronError::Invalid(e.to_string()))
            }
        }
    }

    /// Tells the gateway's scheduler a job changed.
    fn changed(&self) {
        if let Asker::Gateway { runner, .. } = self {
            runner.wake_scheduler();
        }
    }
}

/// Adds the job `fields` describe for `user`, after every check.
pub async fn add(asker: &Asker<'_>, user: &str, fields: &JobFields) -> Result<CronJob, CronError> {
    let mut new = fields.new_job(user, asker.default_agent())?;
    asker.check_agent(new.agent, user).await?;
    if let Some(delivery) = &mut new.delivery {
        asker.check_delivery(new.agent, user, delivery).await?;
    }
    super::check_job_session(asker.store(), new.session_key, new.agent, user).await?;
    let job = asker.store().add_cron_job(&new).await?;
    asker.changed();
    Ok(job)
}

/// Changes `user`'s job `id` (its id or name) as `fields` ask, after every check.
pub async fn update(
    asker: &Asker<'_>,
    user: &str,
    id: &str,
    fields: &JobFields,
) -> Result<CronJob, CronError> {
    let job = asker
        .store()
        .cron_job(user, id)
        .await?
        .ok_or_else(|| CronError::NotFound { id: id.to_string() })?;
    let mut patch = fields.patch(&job)?;
    if let Some(Some(delivery)) = &mut patch.delivery {
        asker.check_delivery(&job.agent, user, delivery).await?;
    }
    if let Some(session) = &patch.session_key {
        super::check_job_session(asker.store(), session, &job.agent, user).await?;
    }
    let job = asker.store().update_cron_job(user, &job.id, &patch).await?;
    asker.changed();
    Ok(job)
}

/// Asks for a run of `user`'s job `id` now (`force`) or only if it is due; `true` when a run
/// was asked for.
pub async fn run(
    asker: &Asker<'_>,
    user: &str,
    id: &str,
    force: bool,
) -> Result<(CronJob, bool), CronError> {
    let (job, asked) = asker.store().request_cron_run(user, id, force).await?;
    if asked {
        asker.changed();
    }
    Ok((job, asked))
}

/// Reads the run mode of a request: `force` (the default) or `due`.
pub fn force_mode(mode: Option<&str>) -> Result<bool, CronError> {
    match mode.unwrap_or("force") {
        "force" => Ok(true),
        "due" => Ok(false),
        other => Err(CronError::Invalid(format!(
            "mode {} is not known; use force (run now) or due (only if it is due)",
            visible(other)
        ))),
    }
}

//! A job's result sent to a chat (`channel` and `to` on the job, GoClaw's delivery fields).
//!
//! Who may make a job deliver where is decided with the rule `message` follows
//! ([`crate::channels::check_job_delivery`]): a conversation that came from a chat schedules
//! for that chat only, and the job is pinned to it; any other caller (another session, a
//! terminal, the HTTP API) names a chat the channel takes automated messages for
//! (`automated_chats`). The rule is applied again at each delivery, with the job's tenant, so
//! a chat the operator has since removed from `automated_chats` gets nothing more.

use talon_store::{CronDelivery, CronJob, CronRunStatus};

use crate::agent_runs::RunError;
use crate::cron::ops::CronError;
use crate::runner::Runner;

impl Runner {
    /// The tenant of `agent`'s job for `user` (`''`: none), whose channels it may use.
    async fn job_tenant(&self, agent: &str, user: &str) -> Result<Option<String>, RunError> {
        let user = (!user.is_empty()).then_some(user);
        self.engine()
            .context(Some(agent), user, super::CHANNEL)
            .await
            .map(|ctx| ctx.tenant)
    }

    /// Checks that `agent`'s job for `user`, made by a call from `origin` (its conversation's
    /// channel and chat), may deliver to `delivery`, and pins it when it is the origin's own
    /// chat.
    pub async fn check_job_delivery(
        &self,
        origin: Option<(&str, &str)>,
        agent: &str,
        user: &str,
        delivery: &mut CronDelivery,
    ) -> Result<(), CronError> {
        let tenant = self.job_tenant(agent, user).await?;
        let tenant = tenant.as_deref();
        let channels = &self.channels;
        delivery.pinned = crate::channels::check_job_delivery(
            origin,
            &delivery.channel,
            &delivery.to,
            |chat, automated| {
                channels
                    .admit(&delivery.channel, tenant, chat, automated)
                    .map(|_| ())
            },
        )
        .map_err(|e| CronError::Invalid(e.to_string()))?;
        Ok(())
    }

    /// Sends the end of `job`'s run to its chat, if it names one and may still send there.
    pub(super) async fn deliver(&self, job: &CronJob, status: CronRunStatus, text: &str) {
        let Some(delivery) = &job.delivery else {
            return;
        };
        let body = match status {
            CronRunStatus::Ok if text.trim().is_empty() => return,
            CronRunStatus::Ok => text.to_string(),
            CronRunStatus::Skipped => return,
            _ => format!("Scheduled job {:?} did not finish: {text}", job.name),
        };
        let tenant = match self.job_tenant(&job.agent, &job.user).await {
            Ok(tenant) => tenant,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "a job's result is not delivered: its agent or user is gone");
                return;
            }
        };
        let (chat, thread) = delivery.chat_and_thread();
        let channel =
            match self
                .channels
                .admit(&delivery.channel, tenant.as_deref(), chat, !delivery.pinned)
            {
                Ok(channel) => channel,
                Err(e) => {
                    tracing::warn!(job = %job.id, error = %e, "a job's result is not delivered");
                    return;
                }
            };
        if let Err(e) = channel.send(chat, thread, &body, None).await {
            tracing::warn!(job = %job.id, channel = %delivery.channel, error = %e, "cannot deliver a job's result");
        }
    }
}

//! A stored session's history as a turn sees it: the live messages after the last summary,
//! compacted as the context window fills (or when a person asks: `/compact`).

use super::store_failed;
use talon_agent::{Agent, Message, RunEvent};

use super::RunError;
use super::engine::TurnEngine;

/// When a session's older messages are summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compaction {
    /// Never (the session turned it off).
    Off,
    /// As the history nears the context window.
    Auto,
    /// Now, whatever the size (asked for).
    Now,
}

/// Tokens of recent history a forced compaction keeps when the model's window is unknown.
const FORCED_KEEP: u64 = 2048;

impl TurnEngine {
    /// What a turn of `session` is given: the summary of its compacted part, if any, and the
    /// messages after it. When those near the model's context window, the oldest turns are
    /// summarised first (a failed summary only logs: the turn runs on the full history).
    pub(super) async fn live_history(
        &self,
        agent: &Agent,
        session: &str,
        compact: Compaction,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<(Option<String>, Vec<Message>), RunError> {
        let record = self
            .store
            .session(session)
            .await
            .map_err(|e| store_failed(format_args!("cannot read session {session}"), e))?;
        let (mut summary, after) =
            record.map_or((String::new(), 0), |r| (r.summary, r.summary_through));
        let stored = self
            .store
            .session_messages_after(session, after)
            .await
            .map_err(|e| store_failed(format_args!("cannot read session {session}"), e))?;
        let mut seqs = Vec::with_capacity(stored.len());
        let mut live = Vec::with_capacity(stored.len());
        for (seq, m) in &stored {
            seqs.push(*seq);
            live.push(parse_message(session, m)?);
        }
        let config = agent.config();
        let limits = match (compact, config.context_window) {
            (Compaction::Off, _) | (Compaction::Auto, None) => None,
            (Compaction::Auto, Some(window)) => Some((
                (window as f64 * config.compact_at) as u64,
                (window as f64 * config.compact_at / 2.0) as u64,
            )),
            // Asked for: everything but about the last turn's worth is summarised now.
            (Compaction::Now, window) => Some((
                0,
                window.map_or(FORCED_KEEP, |w| (w as f64 * config.compact_at / 4.0) as u64),
            )),
        };
        if let Some((threshold, keep)) = limits
            && talon_agent::compact::estimate_tokens(&live) > threshold
            && let Some(cut) = talon_agent::compact::cut_point(&live, keep)
        {
            let previous = (!summary.is_empty()).then_some(summary.as_str());
            match agent.summarize(previous, &live[..cut]).await {
                Ok(new) if !new.is_empty() => {
                    self.store
                        .compact_session(session, seqs[cut - 1], &new)
                        .await
                        .map_err(|e| store_failed(format_args!("cannot compact {session}"), e))?;
                    summary = new;
                    live.drain(..cut);
                    events(RunEvent::Compacted { messages: cut });
                }
                Ok(_) => {
                    tracing::warn!(session, "the model gave an empty summary; not compacted")
                }
                Err(e) => {
                    tracing::warn!(session, error = %e, "compaction failed; the turn runs on the whole history")
                }
            }
        }
        Ok(((!summary.is_empty()).then_some(summary), live))
    }

    /// Summarises a stored session's older messages now (`/compact` in `talon chat`); how many
    /// messages the summary replaced (0: too little to summarise).
    pub async fn compact(&self, agent: &str, session: &str) -> Result<usize, RunError> {
        let built = self.agent(agent).await?;
        let compacted = std::sync::atomic::AtomicUsize::new(0);
        let events = |event: RunEvent| {
            if let RunEvent::Compacted { messages } = event {
                compacted.store(messages, std::sync::atomic::Ordering::Relaxed);
            }
        };
        self.live_history(&built.agent, session, Compaction::Now, &events)
            .await?;
        Ok(compacted.into_inner())
    }

    /// The model `agent` talks to (a session may choose another with the Config tool).
    pub async fn agent_model(&self, agent: &str) -> Result<String, RunError> {
        Ok(self.agent(agent).await?.agent.config().model.clone())
    }

    /// A stored session's messages.
    pub async fn history(&self, session: &str) -> Result<Vec<Message>, RunError> {
        let stored = self
            .store
            .session_messages(session, None)
            .await
            .map_err(|e| store_failed(format_args!("cannot read session {session}"), e))?;
        stored.iter().map(|m| parse_message(session, m)).collect()
    }
}

/// One stored message.
fn parse_message(session: &str, stored: &str) -> Result<Message, RunError> {
    serde_json::from_str(stored).map_err(|e| {
        RunError::Store(format!(
            "session {session} holds a message this version cannot read ({e})"
        ))
    })
}

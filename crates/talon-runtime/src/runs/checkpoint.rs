//! A run's turn, checkpointed: after each model answer that calls tools (before the calls run)
//! and after their results, the turn's messages so far are kept in its session. A run taken over
//! after its gateway died continues from them instead of starting again from its task, so a call
//! whose result was kept is not made again, and one that was in flight is answered to the model
//! as interrupted (it may or may not have taken effect) rather than silently repeated.

use talon_agent::CheckpointSink;
use talon_store::RunRecord;
use tokio_util::sync::CancellationToken;

use crate::runner::Runner;

impl Runner {
    /// Where a run taken over after its gateway died picks up: the messages its turn had
    /// checkpointed (see [`CheckpointSink`]), with a call that was in flight answered as
    /// interrupted — never made again unseen. Empty for a run that was not taken over, or
    /// whose turn had made no calls yet (it starts from its task).
    pub(super) async fn checkpoint_of(&self, run: &RunRecord) -> Vec<talon_agent::Message> {
        if run.takeovers == 0 {
            return Vec::new();
        }
        let stored = match self.store().turn_checkpoint(&run.session_key).await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "cannot read a run's checkpoint; it starts again from its task");
                return Vec::new();
            }
        };
        let mut messages: Vec<talon_agent::Message> = stored
            .iter()
            .filter_map(|m| serde_json::from_str(m).ok())
            .collect();
        if messages.len() != stored.len() {
            tracing::warn!(run = %run.id, "a run's checkpoint cannot be read; it starts again from its task");
            return Vec::new();
        }
        if let Some(talon_agent::Message::Assistant { tool_calls, .. }) = messages.last()
            && !tool_calls.is_empty()
        {
            let results = tool_calls
                .iter()
                .map(|call| talon_agent::ToolResult {
                    call_id: call.id.clone(),
                    content: format!(
                        "[Talon] This {} call was interrupted: the gateway running it stopped \
                         while it ran, and it was not made again. It may or may not have taken \
                         effect; check before making it again.",
                        call.name
                    ),
                    is_error: true,
                    images: Vec::new(),
                })
                .collect();
            messages.push(talon_agent::Message::ToolResults { results });
        }
        messages
    }

    /// The sink that keeps `run`'s turn's messages so far in its session (`resumed`: the
    /// checkpointed messages it continues from, kept ahead of the new ones). A write waits
    /// while the database is unreachable, unless the run is cancelled meanwhile.
    pub(super) fn checkpoint_sink(
        &self,
        run: &RunRecord,
        resumed: &[talon_agent::Message],
        cancel: &CancellationToken,
    ) -> CheckpointSink {
        let (store, session, cancel) = (
            self.store().clone(),
            run.session_key.clone(),
            cancel.clone(),
        );
        let resumed: Vec<String> = resumed
            .iter()
            .filter_map(|m| serde_json::to_string(m).ok())
            .collect();
        CheckpointSink(std::sync::Arc::new(move |messages| {
            let (store, session, cancel) = (store.clone(), session.clone(), cancel.clone());
            let mut all = resumed.clone();
            all.extend(
                messages
                    .iter()
                    .filter_map(|m| serde_json::to_string(m).ok()),
            );
            Box::pin(async move {
                let write = crate::landing::until_landed("a run's checkpoint", || {
                    store.save_turn_checkpoint(&session, &all)
                });
                tokio::select! {
                    written = write => if let Err(e) = written {
                        tracing::warn!(session, error = %e, "cannot checkpoint a run's turn");
                    },
                    () = cancel.cancelled() => {}
                }
            })
        }))
    }
}

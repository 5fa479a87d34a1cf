//! A run's life after it is created, owned by the run service rather than by the tool call
//! that started it: waited for ([`Runner::await_child`]: the caller's cancellation, or its
//! future being dropped, cancels the child and its row still ends), launched in the background,
//! cancelled wherever it runs (ended at once where nobody holds it), and ended exactly once
//! with a write that is retried until it lands.

use std::sync::PoisonError;
use std::time::Duration;

use talon_core::events::ToolEvent;
use talon_store::{RunRecord, RunStatus, RunUsage};
use tokio_util::sync::CancellationToken;

use super::{Ending, run_ref};

/// Why an operation on runs failed: the CLI, the HTTP API and the tools tell these apart (a run
/// that does not exist is the caller's to fix; an unreachable database is worth a retry).
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error("no run {0:?}")]
    UnknownRun(String),
    /// The database cannot be reached now.
    #[error("{0}; the database cannot be reached now, try again shortly")]
    Unavailable(String),
    #[error("{0}")]
    Store(String),
}

impl RunsError {
    /// A store failure while doing `what`.
    fn of(what: String, e: talon_store::StoreError) -> Self {
        if e.is_unavailable() {
            Self::Unavailable(format!("{what}: {e}"))
        } else {
            Self::Store(format!("{what}: {e}"))
        }
    }
}
use crate::runner::Runner;

impl Runner {
    /// Records `run`'s end (once: a run ended elsewhere keeps its first end), tells the bus,
    /// and has a result nobody waited for announced (the announcer settles, without a turn, a
    /// result for the session of a run that has ended: see [`crate::runs::announce`]).
    ///
    /// The write is retried until it lands: a run whose end could not be recorded (the
    /// database is unreachable) stays held here — its lease renewed, never taken over by this
    /// process — so its result is neither lost nor produced twice.
    pub(crate) async fn end_run(&self, run: &RunRecord, ending: &Ending, waited: bool) {
        let ended = crate::landing::until_landed("the end of a run", || {
            self.store().finish_run(
                &run.id,
                Some(self.engine().instance()),
                ending.status,
                &ending.text,
                ending.usage,
                waited,
            )
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(run = %run.id, error = %e, "cannot record the end of a run");
            false
        });
        self.runs
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&run.id);
        self.runs.ended.notify_waiters();
        if ended {
            self.pipeline_events()
                .run_event(ToolEvent::ChildRunFinished {
                    session_key: run.parent_session.as_str().into(),
                    agent_key: run.agent_key.as_str().into(),
                    user: (!run.user_id.is_empty()).then(|| run.user_id.as_str().into()),
                    status: ending.status.as_str(),
                    input_tokens: ending.usage.input_tokens,
                    output_tokens: ending.usage.output_tokens,
                    run: run_ref(run),
                });
            if !waited {
                self.announce(&run.parent_session, &run.parent_agent, &run.user_id);
            }
        }
    }

    /// Runs `run` for a caller that waits for it, and its ending. The run belongs to the run
    /// service, not to the caller's future: it runs in a task of its own, the caller's
    /// cancellation (`parent`) cancels it, and so does the caller going away (a turn whose
    /// client disconnected is dropped mid-wait). Either way the run still ends here, `cancelled`,
    /// with its row, lease and slot released and nothing announced: the caller asked for it.
    pub(crate) async fn await_child(&self, run: RunRecord, parent: &CancellationToken) -> Ending {
        let cancel = parent.child_token();
        // Dropped with the caller's future: the child is cancelled, its task ends its row.
        let caller_gone = cancel.clone().drop_guard();
        let ended = self.spawn_waited(run, cancel).await;
        caller_gone.disarm();
        ended.unwrap_or_else(|e| Ending {
            status: RunStatus::Failed,
            text: format!("the run stopped unexpectedly ({e})"),
            usage: RunUsage::default(),
        })
    }

    /// Runs `run` for a waiting caller on a task of its own. A plain function, so the future of
    /// a run that waits for a child (which may be a run that waits…) is not part of its own type.
    fn spawn_waited(
        &self,
        run: RunRecord,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<Ending> {
        let runner = self.clone();
        tokio::spawn(async move { runner.execute(&run, cancel, true).await })
    }

    /// Starts `run` in the background (its result is announced); returns at once.
    pub(crate) fn launch(&self, run: RunRecord) {
        let runner = self.clone();
        tokio::spawn(async move {
            runner.execute(&run, CancellationToken::new(), false).await;
        });
    }

    /// Cancels `id` and its descendants wherever they run: the durable flag every gateway
    /// watches, at once for those running here, and ended now where nobody holds them
    /// ([`talon_store::Store::cancel_run_tree`]; `talon runs cancel` calls the same).
    pub async fn cancel_run(&self, id: &str) -> Result<talon_store::RunsCancelled, RunsError> {
        let mut done = self
            .store()
            .cancel_run_tree(id)
            .await
            .map_err(|e| RunsError::of(format!("cannot cancel {id}"), e))?;
        let held = {
            let local = self
                .runs
                .local
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            local.get(id).inspect(|cancel| cancel.cancel()).is_some()
        };
        // Its row is this process's but nothing here runs it (its lease has not lapsed yet):
        // nobody else would end it either.
        if !held
            && let Ok(Some(run)) = self.store().run(id).await
            && run.status.is_live()
            && run.owner == self.engine().instance()
            && self.end_unheld(&run, &Ending::cancelled()).await
        {
            done.ended += 1;
        }
        self.runs.ended.notify_waiters();
        Ok(done)
    }

    /// Ends `run`, which no executor holds, with `ending`, recorded delivered (whoever ended it
    /// knows; no model turn starts for it); whether this ended it.
    pub(crate) async fn end_unheld(&self, run: &RunRecord, ending: &Ending) -> bool {
        match self
            .store()
            .finish_run(
                &run.id,
                None,
                ending.status,
                &ending.text,
                ending.usage,
                true,
            )
            .await
        {
            Ok(ended) => {
                self.runs.ended.notify_waiters();
                ended
            }
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "cannot end a run nobody holds");
                false
            }
        }
    }

    /// Waits until `id` is no longer live, at most `timeout`; the run as it is then.
    pub async fn wait_run(&self, id: &str, timeout: Duration) -> Result<RunRecord, RunsError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ended = self.runs.ended.notified();
            let changed = self.runs.changed.notified();
            let run = self
                .store()
                .run(id)
                .await
                .map_err(|e| RunsError::of(format!("cannot read run {id}"), e))?
                .ok_or_else(|| RunsError::UnknownRun(id.to_string()))?;
            if !run.status.is_live() || tokio::time::Instant::now() >= deadline {
                return Ok(run);
            }
            // Woken by a local end; a run on another gateway is looked at again shortly.
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_millis(250)),
                async {
                    tokio::select! {
                        () = ended => {}
                        () = changed => {}
                    }
                },
            )
            .await;
        }
    }
}

//! The run supervisor of a long-running process (`talon serve`, `talon chat`): every third of a
//! lease it renews the leases of the runs this process runs, stops any it no longer holds (a
//! gateway that stalled past its lease and was taken over must not run it twice), takes over the
//! runs of gateways that died, and announces results nobody is announcing.
//!
//! A run taken over is resumed once, from its turn's checkpoint in its own session (calls whose
//! results were kept are not made again; one in flight is reported to the model as
//! interrupted), or from its task when it had made no calls. A run cancelled while nobody held
//! it is ended, not resumed. A process never takes over a run it still runs itself (its lease
//! may lapse while the database is unreachable). A run taken over a second time — its
//! resumption died too — is ended `lost`, and the parent is told so through the outbox like any
//! other end. Nothing is swept at start-up: a run belongs to whoever holds its lease, and only
//! an expired lease is taken.

use std::sync::PoisonError;

use talon_store::RunStatus;
use tokio_util::sync::CancellationToken;

use super::Ending;
use crate::runner::Runner;

/// Runs taken over in one pass at most (the rest in the next).
const TAKEOVER_BATCH: usize = 16;

/// How many times a run is resumed after its gateway died before it is ended `lost`.
const RESUMES: i64 = 1;

/// Stops the supervisor when dropped.
pub struct Supervisor {
    stop: CancellationToken,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Runner {
    /// Starts the supervisor (see the module docs); it runs until the guard is dropped.
    pub fn supervise(&self) -> Supervisor {
        let stop = CancellationToken::new();
        // Cancels and ends announced by other gateways wake this one's waiters at once.
        self.store()
            .notify_run_changes(std::sync::Arc::clone(&self.runs.changed));
        let runner = self.clone();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let period = runner.engine().lease() / 3;
            loop {
                runner.supervise_once().await;
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
            }
        });
        Supervisor { stop }
    }

    /// One pass of the supervisor.
    pub async fn supervise_once(&self) {
        let store = self.store().clone();
        let held = self.held_runs();
        if let Err(e) = store
            .renew_run_leases(self.engine().instance(), &held, self.lease_until())
            .await
        {
            tracing::warn!(error = %e, "cannot renew run leases");
        }
        // And the turn leases of the sessions whose turns run here: another gateway's
        // announcer waits for them (see `Runner::turn_runs_anywhere`).
        if let Err(e) = store
            .renew_session_turns(&self.engine().running_sessions())
            .await
        {
            tracing::warn!(error = %e, "cannot renew session turn leases");
        }
        self.stop_runs_held_elsewhere().await;
        match store
            .take_over_runs(
                self.engine().instance(),
                &held,
                self.lease_until(),
                TAKEOVER_BATCH,
            )
            .await
        {
            Ok(taken) => {
                for run in taken {
                    // Cancelled while nobody ran it: ended, never resumed (its people asked
                    // for it to stop).
                    if run.cancel_requested {
                        self.end_unheld(&run, &Ending::cancelled()).await;
                        continue;
                    }
                    // A team member's task goes back to the board for whoever is idle (the
                    // lifecycle is the server's): its run is not resumed.
                    if run.origin == "team" {
                        self.end_lost_team_run(&run).await;
                        continue;
                    }
                    if run.takeovers <= RESUMES {
                        tracing::info!(run = %run.id, "resuming a run whose gateway stopped");
                        self.launch(run);
                    } else {
                        tracing::warn!(run = %run.id, "a run's gateway stopped again: ending it lost");
                        let ending = Ending {
                            status: RunStatus::Lost,
                            text: "the gateway running it stopped, and so did the one that resumed it; nothing of it was kept".into(),
                            usage: talon_store::RunUsage::default(),
                        };
                        self.end_run(&run, &ending, false).await;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot take over runs"),
        }
        self.supervise_teams().await;
        match store.undelivered_sessions(64).await {
            Ok(sessions) => {
                for (session, agent, user) in sessions {
                    self.announce(&session, &agent, &user);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot look for results to announce"),
        }
    }

    /// The runs this process runs now (their executors are live here).
    pub(crate) fn held_runs(&self) -> Vec<String> {
        self.runs
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Cancels the local runs whose lease another gateway took (this one stalled past it).
    async fn stop_runs_held_elsewhere(&self) {
        let local: Vec<(String, CancellationToken)> = self
            .runs
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, cancel)| (id.clone(), cancel.clone()))
            .collect();
        for (id, cancel) in local {
            if let Ok(Some(run)) = self.store().run(&id).await
                && run.status.is_live()
                && run.owner != self.engine().instance()
            {
                tracing::warn!(run = %id, owner = %run.owner, "another gateway holds this run now: stopping it here");
                cancel.cancel();
            }
        }
    }
}

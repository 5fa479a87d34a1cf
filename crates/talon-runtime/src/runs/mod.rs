//! Child runs — subagents now, delegations and the rest later — over the store's run record
//! ([`talon_store::RunRecord`]): started within the limits, run here (waited for, or in the
//! background), watched for cancellation from any gateway, ended with the status that tells what
//! happened, and their results delivered to the parent session exactly once.
//!
//! How a run flows:
//! 1. [`Runner::start_child`] creates the row — one statement counting live rows under the
//!    tenant's lock, so limits hold across gateways — owned by this process with a lease.
//! 2. [`Runner::execute`] runs its turn in a session of its own with at most its parent's
//!    tools, watching the run's durable cancel flag, and ends the row with its result written to
//!    the outbox in the same transaction.
//! 3. A caller that waited (`subagents run`, `wait`) has the result and it is marked delivered;
//!    otherwise [`announce`] shows it in a turn of the parent session, marked delivered by the
//!    transaction that saves that turn.
//! 4. [`supervisor`] renews the leases of the runs this process really runs, takes over the
//!    runs of a gateway that died (resumed once from their turn's checkpoint, else ended `lost`
//!    with the parent told; a cancelled one is ended) and announces results whose announcer
//!    died.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use talon_agent::TurnStop;
use talon_core::events::{RunRef, ToolEvent};
use talon_core::{CallContext, ToolOutput};
use talon_store::{NewRun, RunLimits, RunRecord, RunRefused, RunStatus, RunUsage};
use tokio_util::sync::CancellationToken;

use crate::agent_runs::{ChildTurn, TurnEngine, TurnRequest};
use crate::runner::Runner;

pub mod announce;
pub mod authority;
pub mod budget;
mod checkpoint;
pub mod custom_agents;
pub mod delegate;
pub mod evaluate;
pub mod gates;
pub mod handoff;
mod life;
pub use life::RunsError;
pub mod supervisor;
pub mod task_tools;
pub mod tools;

pub use crate::agent_runs::engine::DEFAULT_LEASE;

/// Lines of a conversation passed on (a forked child, a handoff) at most.
const CONTEXT_MESSAGES: usize = 12;

/// How often a running child looks at its run's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(500);

/// What this process knows of the runs it runs now.
#[derive(Default)]
pub struct RunState {
    /// The cancellation of each run this process runs, by run id.
    local: Mutex<HashMap<String, CancellationToken>>,
    /// Parent sessions whose results this process is announcing now.
    pub(crate) announcing: Mutex<HashSet<String>>,
    /// Sessions a terminal shows: their announcements are handed to it to run and render.
    pub(crate) listeners:
        Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<announce::Announcement>>>,
    /// Woken whenever a run this process runs ends.
    pub(crate) ended: tokio::sync::Notify,
    /// Woken when another process announces run changes (PostgreSQL's LISTEN, started by the
    /// supervisor): a cancel or an end elsewhere is seen at once, not at the next poll.
    pub(crate) changed: std::sync::Arc<tokio::sync::Notify>,
    /// Woken when a scheduled job changes (here, or announced by another process): the job
    /// scheduler looks again at once instead of at its next due time (see [`crate::cron`]).
    pub(crate) cron_wake: std::sync::Arc<tokio::sync::Notify>,
}

/// A child run to start.
pub struct ChildSpec<'a> {
    /// The agent that runs it.
    pub agent: &'a str,
    pub task: &'a str,
    /// Its tools: never more than the caller's.
    pub tools: Vec<String>,
    /// `subagent`, `delegation`, …
    pub origin: &'static str,
    /// Runs in the background (its result is announced) instead of being waited for.
    pub background: bool,
    /// A delegation's agent link: live delegations over it at most, and whether it goes both
    /// ways.
    pub over_link: Option<(i64, bool)>,
    /// A delegation's target: live delegations to it at most (`max_delegation_load`).
    pub target_load: Option<i64>,
    /// `fresh` (its task only) or `fork` (the task carries the parent's conversation).
    pub context_mode: &'static str,
    /// What it runs with beyond its tools; stored with it.
    pub overrides: ChildOverrides,
}

/// What a run is narrowed to beyond its tools: a permission mode no looser than its caller's,
/// a custom agent definition's model and turns. Stored with the run (as JSON), so a run
/// steered, or resumed by another gateway, runs as it was started.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ChildOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<talon_core::permission::PermissionMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    /// The team a member's run works for (see [`crate::teams`]), and the task it was
    /// dispatched for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team_task: Option<i64>,
    /// The scheduled job a run is for (see [`crate::cron`]): a gateway that claims the job
    /// after its predecessor died finds the run by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron_job: Option<String>,
}

impl ChildOverrides {
    /// What `run` was started with. A row that cannot be read is an error, never the
    /// (possibly looser) defaults.
    pub fn of(run: &RunRecord) -> Result<Self, UnreadableOverrides> {
        match run.overrides.trim() {
            "" => Ok(Self::default()),
            stored => serde_json::from_str(stored).map_err(UnreadableOverrides),
        }
    }
}

/// A run whose stored [`ChildOverrides`] do not parse: it is not run (or steered) at all.
#[derive(Debug, thiserror::Error)]
#[error("its stored settings cannot be read ({0})")]
pub struct UnreadableOverrides(#[source] pub serde_json::Error);

/// How a run ended: its status, what the caller is told, its usage.
#[derive(Debug)]
pub struct Ending {
    pub status: RunStatus,
    pub text: String,
    pub usage: RunUsage,
}

impl Ending {
    /// Cancelled before it answered (nothing used is counted: its executor is gone or never
    /// reported).
    pub(crate) fn cancelled() -> Self {
        Self {
            status: RunStatus::Cancelled,
            text: "cancelled".into(),
            usage: RunUsage::default(),
        }
    }
}

impl Runner {
    /// When a lease taken now runs out (Unix ms).
    pub(crate) fn lease_until(&self) -> i64 {
        let now = talon_core::waiting::unix_ms(std::time::SystemTime::now());
        i64::try_from(now)
            .unwrap_or(i64::MAX)
            .saturating_add(i64::try_from(self.engine().lease().as_millis()).unwrap_or(i64::MAX))
    }

    fn run_limits(&self, spec: &ChildSpec<'_>) -> RunLimits {
        let policy = self.subagent_policy();
        // Scheduled jobs' runs have a pool of their own; everyone else shares the tenant's,
        // each user at most their share of it.
        let pool = if spec.origin == "cron" {
            policy.max_concurrent_scheduled
        } else {
            policy.max_concurrent
        };
        RunLimits {
            max_concurrent: i64::from(pool),
            max_per_user: i64::from(policy.max_concurrent_per_user),
            max_depth: i64::from(policy.max_spawn_depth),
            max_children: i64::from(policy.max_children_per_agent),
            max_over_link: spec.over_link,
            max_target_load: spec.target_load,
        }
    }

    /// The new run's row, for the caller `ctx`, with its narrowed `tools` and `overrides`.
    fn new_run<'a>(
        &'a self,
        spec: &'a ChildSpec<'a>,
        prefix: &'a str,
        narrowed: &'a authority::Narrowed,
        overrides: &'a str,
    ) -> NewRun<'a> {
        let who = &narrowed.identity;
        NewRun {
            parent: who.parent_run.as_deref(),
            parent_session: &who.parent_session,
            parent_agent: &who.parent_agent,
            session_prefix: prefix,
            agent: spec.agent,
            tenant: &who.tenant,
            user: &who.user,
            origin: spec.origin,
            context_mode: spec.context_mode,
            task: spec.task,
            tools: &narrowed.tools,
            overrides,
            owner: self.engine().instance(),
            lease_until: self.lease_until(),
        }
    }

    /// Creates the run for `spec` started by the caller `ctx`, narrowed to its authority and
    /// within the limits (refused in the seeds' words: [`RunRefused`] says which);
    /// `replacing`: the live run it takes the place of (steering).
    pub async fn start_child(
        &self,
        ctx: &CallContext,
        spec: &ChildSpec<'_>,
        replacing: Option<&str>,
    ) -> Result<RunRecord, RunRefused> {
        self.try_start_child(ctx, spec, replacing).await
    }

    /// [`Runner::start_child`], saying which limit refused it (a scheduled job waits and tries
    /// again rather than failing).
    pub(crate) async fn try_start_child(
        &self,
        ctx: &CallContext,
        spec: &ChildSpec<'_>,
        replacing: Option<&str>,
    ) -> Result<RunRecord, RunRefused> {
        // Whatever the call site asked for, the run is narrowed to its caller's authority here,
        // the one place every run kind starts through.
        let narrowed = authority::Authority::of_caller(self, ctx, spec.origin)
            .await
            .narrow(spec);
        // The child's session is its user's, under the agent that runs it.
        let user = (!narrowed.identity.user.is_empty()).then_some(narrowed.identity.user.as_str());
        let prefix = TurnEngine::session_key(spec.agent, spec.origin, user, "");
        let overrides = serde_json::to_string(&narrowed.overrides).map_err(|e| {
            RunRefused::Store(talon_store::StoreError::Invalid {
                what: "run settings",
                reason: format!("cannot be recorded: {e}"),
            })
        })?;
        let new = self.new_run(spec, &prefix, &narrowed, &overrides);
        let created = match replacing {
            Some(old) => {
                self.store()
                    .replace_run(old, &new, self.run_limits(spec))
                    .await
            }
            None => self.store().create_run(&new, self.run_limits(spec)).await,
        };
        let run = created?;
        self.pipeline_events()
            .run_event(ToolEvent::ChildRunStarted {
                session_key: ctx.session_key.as_str().into(),
                agent_key: run.agent_key.as_str().into(),
                user: ctx.user.as_deref().map(Into::into),
                origin: spec.origin.into(),
                task: one_line(spec.task, 200).into(),
                background: spec.background,
                run: run_ref(&run),
            });
        Ok(run)
    }

    /// Runs `run`'s turn here (see the module docs) and ends it; `waited`: the caller has the
    /// result now, so it is recorded delivered; otherwise it is announced to the parent.
    pub(crate) async fn execute(
        &self,
        run: &RunRecord,
        cancel: CancellationToken,
        waited: bool,
    ) -> Ending {
        self.runs
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run.id.clone(), cancel.clone());
        // A cancel requested anywhere (another gateway, `talon runs cancel`) is a durable flag
        // on the run: watched while the child runs.
        let watch = {
            let (store, id, cancel) = (self.store().clone(), run.id.clone(), cancel.clone());
            let changed = std::sync::Arc::clone(&self.runs.changed);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(CANCEL_POLL) => {}
                        () = changed.notified() => {}
                    }
                    match store.run(&id).await {
                        // Ended elsewhere too (steered, or ended lost): stop here.
                        Ok(Some(run)) if run.cancel_requested || !run.status.is_live() => {
                            cancel.cancel();
                            return;
                        }
                        _ => {}
                    }
                }
            })
        };
        let started = match ChildOverrides::of(run) {
            Ok(overrides) => self.remaining_budget(run).await.map(|b| (overrides, b)),
            Err(e) => Err(Ending {
                status: RunStatus::Failed,
                text: e.to_string(),
                usage: RunUsage::default(),
            }),
        };
        let (overrides, budget) = match started {
            Ok(started) => started,
            Err(ending) => {
                watch.abort();
                self.end_run(run, &ending, waited).await;
                return ending;
            }
        };
        let overrides = &overrides;
        // The time left of the root's budget: then the run is stopped and ends `timed_out`.
        let timer = budget.time.map(|left| {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                cancel.cancel();
            })
        });
        let approvals = self.watch_approvals(run);
        let resume_from = self.checkpoint_of(run).await;
        let mut ending = self
            .child_turn(
                run,
                (run.task.clone(), resume_from),
                &cancel,
                overrides,
                budget,
            )
            .await;
        if ending.status == RunStatus::Completed {
            ending = self
                .gate_child(run, ending, &cancel, overrides, budget)
                .await;
        }
        watch.abort();
        approvals.abort();
        let timed_out = timer.is_some_and(|timer| {
            let fired = timer.is_finished();
            timer.abort();
            fired
        });
        if timed_out && ending.status == RunStatus::Cancelled {
            ending.status = RunStatus::TimedOut;
            ending.text = "stopped: its root run's time budget ran out".into();
        }
        let ending = self.end_team_task(run, overrides, ending).await;
        self.end_run(run, &ending, waited).await;
        if let Some(team) = &overrides.team {
            // Tasks its end unblocked or gave back go to whoever is idle now.
            self.dispatch_team(team).await;
        }
        ending
    }

    /// One turn of `run`'s child in its session: its task first (or, for a run taken over,
    /// the messages it had: `start.1`), a revision prompt after a quality gate sent it back.
    pub(crate) async fn child_turn(
        &self,
        run: &RunRecord,
        start: (String, Vec<talon_agent::Message>),
        cancel: &CancellationToken,
        overrides: &ChildOverrides,
        budget: budget::Remaining,
    ) -> Ending {
        let (prompt, resume_from) = start;
        let user = (!run.user_id.is_empty()).then_some(run.user_id.as_str());
        let checkpoint = self.checkpoint_sink(run, &resume_from, cancel);
        let ran = self
            .run(
                TurnRequest {
                    agent: Some(&run.agent_key),
                    user,
                    session: Some(run.session_key.clone()),
                    history: Vec::new(),
                    prompt,
                    channel: "subagent",
                    client: None,
                    permission_mode: overrides.permission_mode,
                    cancel: cancel.clone(),
                    api: crate::agent_runs::ApiTurn {
                        options: talon_agent::TurnOptions {
                            checkpoint: Some(checkpoint),
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                    child: Some(ChildTurn {
                        // A team member's turn is not refused its team's board by the
                        // subagent deny list; the tools stored on its run (chosen one level
                        // down, see `teams`) narrow it as a delegation's. Its run is still one
                        // level down in the store, so it cannot start runs of its own.
                        spawn_depth: if overrides.team.is_some() {
                            0
                        } else {
                            u32::try_from(run.depth).unwrap_or(u32::MAX)
                        },
                        tool_allow: run.tools.clone(),
                        run: run_ref(run),
                        max_requests: match (budget.requests, overrides.max_requests) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        },
                        token_budget: budget.tokens,
                        model: overrides.model.clone(),
                        scheduled: run.origin == "cron",
                        resume_from,
                    }),
                    delivering: Vec::new(),
                    origin: None,
                },
                &|_| {},
            )
            .await;
        match &ran {
            Ok(ran) => {
                let (status, text) = ending(&ran.outcome.stop, &ran.outcome.text);
                let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                Ending {
                    status,
                    text,
                    usage: RunUsage {
                        input_tokens: to_i64(ran.outcome.usage.input_tokens),
                        output_tokens: to_i64(ran.outcome.usage.output_tokens),
                        model_requests: i64::from(ran.outcome.iterations),
                    },
                }
            }
            Err(e) => Ending {
                status: RunStatus::Failed,
                text: format!("the run could not start: {e}"),
                usage: RunUsage::default(),
            },
        }
    }

    /// Shows `run` as `waiting_approval` while one of its calls waits for a person (on the
    /// approvals queue every entry point serves: `/v1/approvals`, events, the terminal), and
    /// `running` again once answered. An unanswered request times out as a denial there.
    fn watch_approvals(&self, run: &RunRecord) -> tokio::task::JoinHandle<()> {
        let mut events = self.pipeline_events().subscribe();
        let (store, id, session) = (
            self.store().clone(),
            run.id.clone(),
            run.session_key.clone(),
        );
        tokio::spawn(async move {
            loop {
                let waiting = match events.recv().await {
                    Ok(ToolEvent::ApprovalRequested { request }) if request.session == session => {
                        true
                    }
                    Ok(ToolEvent::ApprovalResolved { session_key, .. })
                        if *session_key == *session =>
                    {
                        false
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if let Err(e) = store.set_run_waiting(&id, waiting).await {
                    tracing::warn!(run = %id, error = %e, "cannot record a run's approval wait");
                }
            }
        })
    }

    /// The live runs `session` started, as a note for its system prompt (`None`: none): the
    /// model keeps knowing what runs for it, whatever compaction dropped.
    pub(crate) async fn live_children_note(&self, session: &str) -> Option<String> {
        let runs = self.store().live_child_runs(session).await.ok()?;
        let live: Vec<String> = runs
            .iter()
            .map(|r| {
                format!(
                    "- {} ({}, {}): {}",
                    r.id,
                    r.agent_key,
                    r.status.as_str(),
                    one_line(&r.task, 120)
                )
            })
            .collect();
        (!live.is_empty()).then(|| {
            format!(
                "# Runs you started that are still running\n\nTheir results will be announced to you when they end; `subagents` with action list, wait or cancel manages them.\n{}",
                live.join("\n")
            )
        })
    }

    /// The conversation of `session` so far — its stored turns' texts, then the prompt of the
    /// turn running now — as the last [`CONTEXT_MESSAGES`] lines, fenced as untrusted (people
    /// and models wrote it). The agent's lines are named `speaker`.
    pub(crate) async fn conversation_so_far(
        &self,
        ctx: &CallContext,
        session: &str,
        speaker: &str,
        source: &str,
    ) -> String {
        let messages = self.engine().history(session).await.unwrap_or_default();
        let mut lines: Vec<String> = messages
            .iter()
            .filter_map(|m| match m {
                talon_agent::Message::User { text, .. } => Some(format!("user: {text}")),
                talon_agent::Message::Assistant { text, .. } if !text.is_empty() => {
                    Some(format!("{speaker}: {text}"))
                }
                _ => None,
            })
            .collect();
        if let Some(prompt) = &ctx.turn_prompt {
            lines.push(format!("user: {prompt}"));
        }
        let recent = lines[lines.len().saturating_sub(CONTEXT_MESSAGES)..].join("\n");
        talon_core::untrusted::wrap(source, session, &recent)
    }

    pub(crate) fn pipeline_events(&self) -> &talon_core::events::EventBus {
        self.pipeline().events()
    }
}

/// The run and its parent run, as events name them.
pub fn run_ref(run: &RunRecord) -> RunRef {
    RunRef {
        run_id: Some(run.id.as_str().into()),
        parent_run_id: (!run.parent_id.is_empty()).then(|| run.parent_id.as_str().into()),
    }
}

/// `text` on one line, at most `max` characters (cut with "…").
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        line
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A run's result as the parent is told it: the head line in Talon's own words, and the text
/// fenced as untrusted (another model wrote it, or it quotes what a run said).
pub(crate) fn result_output(run: &RunRecord, status: RunStatus, text: &str) -> ToolOutput {
    let head = format!(
        "{} {} ({}) {}:",
        run.origin,
        run.id,
        run.agent_key,
        status.as_str()
    );
    let output = if status == RunStatus::Completed {
        ToolOutput::text(text)
    } else {
        ToolOutput::error(text)
    };
    output
        .with_own_words(head)
        .with_origin(format!("{} {}", run.origin, run.id))
}

/// The run's status and what the caller is told, from how its turn ended: only a real answer
/// is `completed`.
pub(crate) fn ending(stop: &TurnStop, text: &str) -> (RunStatus, String) {
    match stop {
        TurnStop::Final if text.trim().is_empty() => (
            RunStatus::Failed,
            "the run ended without an answer".to_string(),
        ),
        TurnStop::Final | TurnStop::MaxTokens => (RunStatus::Completed, text.to_string()),
        TurnStop::IterationCap | TurnStop::TokenBudget | TurnStop::LoopDetected(_) => (
            RunStatus::LimitReached,
            format!(
                "stopped by a limit before finishing ({}); what it had so far: {text}",
                crate::agent_runs::stop_label(stop)
            ),
        ),
        TurnStop::Cancelled => (RunStatus::Cancelled, "cancelled".to_string()),
        TurnStop::Refusal => (RunStatus::Failed, "the model declined the task".to_string()),
        TurnStop::PromptBlocked(why) | TurnStop::Failed(why) => (RunStatus::Failed, why.clone()),
        TurnStop::ClientTools => (
            RunStatus::Failed,
            "the run called a tool nobody runs".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_real_answer_is_completed() {
        assert_eq!(ending(&TurnStop::Final, "42").0, RunStatus::Completed);
        assert_eq!(ending(&TurnStop::Final, "  ").0, RunStatus::Failed);
        assert_eq!(
            ending(&TurnStop::IterationCap, "half").0,
            RunStatus::LimitReached
        );
        assert_eq!(ending(&TurnStop::Cancelled, "").0, RunStatus::Cancelled);
    }

    #[test]
    fn a_task_is_shown_on_one_short_line() {
        assert_eq!(one_line("a\n b\tc", 10), "a b c");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
    }
}

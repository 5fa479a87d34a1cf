//! Budgets per root run (`[subagents] budget_tokens`, `budget_requests`, `budget_seconds`):
//! what every run under one root may use together, counted from the store (so runs on other
//! gateways count too) when a run starts, and enforced on it by the runtime — the loop stops at
//! the requests and tokens left (`limit_reached`), a timer at the time left (`timed_out`).

use std::time::Duration;

use talon_store::{RunRecord, RunStatus, RunUsage};

use super::Ending;
use crate::runner::Runner;

/// What a starting run may still use of its root's budget (`None`: no budget of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remaining {
    pub requests: Option<u32>,
    pub tokens: Option<u64>,
    pub time: Option<Duration>,
}

impl Runner {
    /// What `run` may use of its root run's budget, or how it ends at once when nothing is left.
    pub(crate) async fn remaining_budget(&self, run: &RunRecord) -> Result<Remaining, Ending> {
        let policy = self.subagent_policy();
        if policy.budget_tokens.is_none()
            && policy.budget_requests.is_none()
            && policy.budget_seconds.is_none()
        {
            return Ok(Remaining::default());
        }
        let (used, started) = match self.store().root_usage(&run.root_id).await {
            Ok(found) => found,
            Err(e) => {
                return Err(spent(
                    RunStatus::Failed,
                    format!("its root run's budget cannot be read: {e}"),
                ));
            }
        };
        let now = i64::try_from(talon_core::waiting::unix_ms(std::time::SystemTime::now()))
            .unwrap_or(i64::MAX);
        remaining(policy, used, now.saturating_sub(started))
    }
}

/// The budget left after `used`, `elapsed_ms` after the root started.
fn remaining(
    policy: &talon_core::policy::SubagentPolicy,
    used: RunUsage,
    elapsed_ms: i64,
) -> Result<Remaining, Ending> {
    let left = |budget: Option<u64>, used: i64| {
        budget.map(|b| b.saturating_sub(u64::try_from(used.max(0)).unwrap_or(u64::MAX)))
    };
    let tokens = left(
        policy.budget_tokens,
        used.input_tokens.saturating_add(used.output_tokens),
    );
    let requests = left(policy.budget_requests, used.model_requests);
    let time = left(
        policy.budget_seconds.map(|s| s.saturating_mul(1000)),
        elapsed_ms,
    );
    if tokens == Some(0) || requests == Some(0) {
        return Err(spent(
            RunStatus::LimitReached,
            "its root run's budget is spent (tokens or model requests); nothing was run".into(),
        ));
    }
    if time == Some(0) {
        return Err(spent(
            RunStatus::TimedOut,
            "its root run's time budget is spent; nothing was run".into(),
        ));
    }
    Ok(Remaining {
        requests: requests.map(|r| u32::try_from(r).unwrap_or(u32::MAX)),
        tokens,
        time: time.map(Duration::from_millis),
    })
}

fn spent(status: RunStatus, text: String) -> Ending {
    Ending {
        status,
        text,
        usage: RunUsage::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(
        tokens: Option<u64>,
        requests: Option<u64>,
        seconds: Option<u64>,
    ) -> talon_core::policy::SubagentPolicy {
        talon_core::policy::SubagentPolicy {
            budget_tokens: tokens,
            budget_requests: requests,
            budget_seconds: seconds,
            ..Default::default()
        }
    }

    fn used(tokens: i64, requests: i64) -> RunUsage {
        RunUsage {
            input_tokens: tokens,
            output_tokens: 0,
            model_requests: requests,
        }
    }

    #[test]
    fn a_budget_left_caps_the_run_and_a_spent_one_ends_it() {
        let left = remaining(&policy(Some(100), Some(5), Some(60)), used(40, 2), 10_000).unwrap();
        assert_eq!(left.tokens, Some(60));
        assert_eq!(left.requests, Some(3));
        assert_eq!(left.time, Some(Duration::from_secs(50)));
        let spent = remaining(&policy(Some(100), None, None), used(100, 0), 0).unwrap_err();
        assert_eq!(spent.status, RunStatus::LimitReached);
        let late = remaining(&policy(None, None, Some(1)), used(0, 0), 5_000).unwrap_err();
        assert_eq!(late.status, RunStatus::TimedOut);
        assert_eq!(
            remaining(&policy(None, None, None), used(9, 9), 9).unwrap(),
            Remaining::default()
        );
    }
}

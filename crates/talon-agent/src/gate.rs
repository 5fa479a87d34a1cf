//! The read/write gate for one batch of tool calls. Parallel-safe calls may run together; any
//! other call runs alone, so a write never runs beside a read it could change. A batch runs
//! concurrently only when every call in it is parallel-safe; otherwise its calls run one at a
//! time in the model's order. Results always come back in the model's order.
//!
//! The gate belongs to the turn: a turn's batches run one after another, so ordering the calls
//! of each batch is all the exclusion a turn needs, and nothing is held across turns. A lock
//! shared by an agent's turns (as this once was) let one user's hour-long `exec` stall every
//! other session of that agent, and deadlocked a turn whose `sessions_send` started a nested
//! turn that called a tool: the nested turn waited on the lock its caller held.

use std::future::Future;

use futures::StreamExt;

/// Runs `calls` (each with whether it is parallel-safe), at most `max_parallel` at once when
/// all are parallel-safe, else one by one; the results in the calls' order.
pub async fn run_batch<F, T>(calls: Vec<(bool, F)>, max_parallel: usize) -> Vec<T>
where
    F: Future<Output = T>,
{
    let all_parallel = calls.len() > 1 && calls.iter().all(|(parallel, _)| *parallel);
    if all_parallel {
        futures::stream::iter(calls.into_iter().map(|(_, call)| call))
            .buffered(max_parallel.max(1))
            .collect()
            .await
    } else {
        let mut out = Vec::with_capacity(calls.len());
        for (_, call) in calls {
            out.push(call.await);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A call that records the most calls seen running at once.
    async fn probe(running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>, n: usize) -> usize {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        running.fetch_sub(1, Ordering::SeqCst);
        n
    }

    #[tokio::test]
    async fn parallel_batches_overlap_and_mixed_batches_do_not() {
        for (flags, want_overlap) in [
            (vec![true, true, true], true),
            (vec![true, false, true], false),
        ] {
            let running = Arc::new(AtomicUsize::new(0));
            let peak = Arc::new(AtomicUsize::new(0));
            let calls = flags
                .iter()
                .enumerate()
                .map(|(n, p)| (*p, probe(Arc::clone(&running), Arc::clone(&peak), n)))
                .collect();
            let results = run_batch(calls, 4).await;
            assert_eq!(results, [0, 1, 2], "results in the model's order");
            assert_eq!(peak.load(Ordering::SeqCst) > 1, want_overlap, "{flags:?}");
        }
    }

    #[tokio::test]
    async fn the_parallel_limit_holds() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let calls = (0..6)
            .map(|n| (true, probe(Arc::clone(&running), Arc::clone(&peak), n)))
            .collect();
        let results = run_batch(calls, 2).await;
        assert_eq!(results, [0, 1, 2, 3, 4, 5]);
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }
}

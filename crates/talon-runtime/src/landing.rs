//! Writes that must land: a run's end and a saved turn carry a result somebody waits for, so
//! an unreachable database delays them instead of dropping them. Everything else fails at once
//! with the store's error.

use std::future::Future;
use std::time::Duration;

use talon_store::StoreError;

/// The first pause before a write is tried again, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Runs `write` until it succeeds or fails for a reason other than an unreachable database
/// ([`StoreError::is_unavailable`]); `what` names it in the log while it waits.
pub(crate) async fn until_landed<T, F, Fut>(what: &str, mut write: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut pause = FIRST_PAUSE;
    loop {
        match write().await {
            Err(e) if e.is_unavailable() => {
                tracing::warn!(error = %e, "cannot write {what} yet; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
            done => return done,
        }
    }
}

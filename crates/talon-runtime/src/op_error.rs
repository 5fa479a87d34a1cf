//! The error of a service operation that only reads and writes the store (teams, agents): the
//! request to fix, what it names missing, or the store failing. Each caller translates it
//! once: HTTP into 400, 404, or 503 with `Retry-After` ([`crate::http_reply`]); the CLI into
//! exit 2 for the caller's fault, 1 otherwise.

use talon_store::StoreError;

/// Why an operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The request is wrong; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// What it names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The store failed (an unreachable database among others).
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { .. } => OpError::Invalid(e.to_string()),
            StoreError::NotFound { .. } => OpError::NotFound(e.to_string()),
            e => OpError::Store(e),
        }
    }
}

impl OpError {
    /// Whether the caller's request was at fault (a usage error), not the service.
    pub fn is_usage(&self) -> bool {
        !matches!(self, OpError::Store(_))
    }
}

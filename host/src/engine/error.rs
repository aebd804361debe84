//! The engine's errors: what a request or a task of the engine can fail
//! with, each kind answered by the API as its own status and code.
//!
//! It owns the kinds only; it must never carry a stored row's text but in
//! the damage it names.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Bad input; `field` names where.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    /// The request does not fit the current state (double ack, stale ack,
    /// cancel of a settled policy); `code` is machine-readable.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// The credential may not do this (a session of another owner).
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// The request could not be served now (a time bound); retrying may
    /// succeed. Nothing was changed.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// A stored row that does not decode (a damaged store, or one written
    /// by a newer gatehost): never read as `null`.
    #[error("policy {policy}: its stored {column} does not decode: {message}")]
    Corrupt {
        policy: String,
        column: String,
        message: String,
    },
    /// A session row that does not decode: that session cannot be
    /// reported on, and a policy that needs it is blocked.
    #[error("session {session}: its stored {column} does not decode: {message}")]
    SessionCorrupt {
        session: String,
        column: String,
        message: String,
    },
    /// The daemon failed inside, not the request: a blocking task it ran
    /// panicked or was cancelled. Answered as 500 `internal`.
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The blocking task `what` did not finish (it panicked or was
    /// cancelled): an internal error, never the caller's conflict.
    pub(crate) fn task_failed(what: &str, e: tokio::task::JoinError) -> Self {
        tracing::error!(task = what, error = %e, "a blocking task did not finish");
        EngineError::Internal(format!("{what} failed: {e}"))
    }
}

pub type EngineResult<T> = Result<T, EngineError>;

impl From<crate::model::Invalid> for EngineError {
    fn from(e: crate::model::Invalid) -> Self {
        EngineError::Invalid {
            field: e.field,
            message: e.message,
        }
    }
}

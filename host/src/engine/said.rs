//! What a verdict's events say beyond the policy's head, gathered while
//! the verdict is judged (the pass, a retry, a nudge, a review): typed
//! payloads the transition stores.
//!
//! It owns only that record. It must never judge, store or decide
//! anything: the lifecycle fills it, the transition's events read it.

use crate::model::event as ev;

/// What a verdict's events say beyond the policy's head, gathered while
/// it is judged.
#[derive(Debug, Default)]
pub(crate) struct Said {
    /// The commit plan stored (`policy:commit-ready`).
    pub(crate) plan: Option<crate::model::plan::CommitPlan>,
    /// A failed gate's nudge (`policy:nudge`).
    pub(crate) nudge: Option<ev::Nudge>,
    /// A gate that could not run and runs again (`policy:retry`).
    pub(crate) retry: Option<ev::Retry>,
    /// The review that starts (`review:started`).
    pub(crate) review: Option<ev::ReviewStarted>,
}

//! The typed model: what a policy, a routine, a standing policy, a review
//! chain and an event *are*, below both the store and the engine.
//!
//! The store decodes its rows into these types once, at its edge; the
//! engine, the API's wire types and the readers of events hold only them.
//! This layer must never hold SQL, a process, a clock or a network call: it
//! is data and the pure rules that keep that data well formed.
//!
//! - [`attach`]: the attach input (a policy's `spec`), its gates parsed and
//!   kept as given ([`as_given`]), and the checks that need only it;
//! - [`plan`]: a commit policy's plan and its prepared commit;
//! - [`chain`]: a review chain's record; [`report`]: the gate report (a
//!   policy's `verdict`); [`routine`]: a routine's spec, state and reason;
//! - [`event`]: every event, one typed enum, and its one codec;
//! - [`inputs`]: what a caller asks about a session or a review (register,
//!   start, report, line comments, a standing policy), one type each for
//!   the API's bodies and the engine's inputs.

pub mod as_given;
pub mod attach;
pub mod chain;
pub mod event;
pub mod inputs;
pub mod plan;
pub mod report;
pub mod routine;

/// A value that is refused: the field (`next.gate[0].command`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    /// The field's path in the input (`next.gate[0].command`).
    pub field: String,
    /// Why it is refused.
    pub message: String,
}

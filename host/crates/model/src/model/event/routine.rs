//! A routine's events (`routine:*`): one payload shape for every kind
//! (the run, its state, the step and what the kind says of it).

use serde::{Deserialize, Serialize};

/// A routine's event: its kind and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineEvent {
    /// Which `routine:*` event it is.
    pub kind: RoutineKind,
    /// The run, its state, the step and what this kind says of it.
    pub payload: RoutinePayload,
}

/// The kinds of a routine's events, each with its name: the enum, its
/// list and the names derived from this one table.
macro_rules! routine_kinds {
    ($($(#[$vm:meta])* $variant:ident = $kind:literal,)*) => {
        /// The kinds of a routine's events.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum RoutineKind {
            $($(#[$vm])* $variant,)*
        }

        impl RoutineKind {
            /// Every kind, in order.
            pub const ALL: &'static [RoutineKind] = &[$(RoutineKind::$variant),*];

            /// The names of [`RoutineKind::ALL`], in order.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];

            /// Its kind, as stored and published.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(RoutineKind::$variant => $kind,)*
                }
            }
        }
    };
}

routine_kinds! {
    /// The run is stored.
    Started = "routine:started",
    /// A step's agent was started (or its session prompted).
    StepStarted = "routine:step-started",
    /// A step's agent asks something.
    AwaitingInput = "routine:awaiting-input",
    /// The step's rule answered the agent.
    AutoAllowed = "routine:auto-allowed",
    /// The operator is asked to answer a step.
    Escalated = "routine:escalated",
    /// The operator answered a step.
    Resolved = "routine:resolved",
    /// A step finished.
    StepDone = "routine:step-done",
    /// A step's agent, which died with an earlier daemon, was started again.
    StepRestarted = "routine:step-restarted",
    /// Every step finished.
    Done = "routine:done",
    /// The run failed.
    Failed = "routine:failed",
    /// The run was cancelled.
    Cancelled = "routine:cancelled",
}

impl RoutineKind {
    /// The kind named `kind` (`routine:step-done`); none for another name.
    pub(crate) fn parse(kind: &str) -> Option<RoutineKind> {
        RoutineKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == kind)
    }
}

pub use crate::model::routine::{FailReason, InputSource};

/// The payload of every `routine:*` event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutinePayload {
    /// The run's id (`rt_…`).
    pub routine_id: String,
    /// The run's state after the event.
    pub state: String,
    /// The routine's label, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The step's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The step's session, when the event is about one (the event is then in
    /// that session's stream too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// What the agent's asking came as (`turn-end` or `permission`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<InputSource>,
    /// The session's last message (what it asked), or the operator's
    /// response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The ACP permission request's id (`perm-N`), when the asking was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Why the run failed (`routine:failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_reason: Option<FailReason>,
    /// Why, for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How long the escalation waits for the operator (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When the escalation fails the run, unanswered (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    /// How many times the step's agent has been started again
    /// (`routine:step-restarted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// A run whose stored row was damaged, cancelled in place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub damaged: bool,
}

//! A routine's events (`routine:*`): one payload shape for every kind
//! (the run, its state, the step and what the kind says of it).

use serde::{Deserialize, Serialize};

/// A routine's event: its kind and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineEvent {
    pub kind: RoutineKind,
    pub payload: RoutinePayload,
}

/// The kinds of a routine's events, each with its name: the enum, its
/// list and the names derived from this one table.
macro_rules! routine_kinds {
    ($($variant:ident = $kind:literal,)*) => {
        /// The kinds of a routine's events.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum RoutineKind {
            $($variant,)*
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
    Started = "routine:started",
    StepStarted = "routine:step-started",
    AwaitingInput = "routine:awaiting-input",
    AutoAllowed = "routine:auto-allowed",
    Escalated = "routine:escalated",
    Resolved = "routine:resolved",
    StepDone = "routine:step-done",
    StepRestarted = "routine:step-restarted",
    Done = "routine:done",
    Failed = "routine:failed",
    Cancelled = "routine:cancelled",
}

impl RoutineKind {
    pub fn parse(kind: &str) -> Option<RoutineKind> {
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
    pub routine_id: String,
    /// The run's state after the event.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The step's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<InputSource>,
    /// The session's last message (what it asked), or the operator's
    /// response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_reason: Option<FailReason>,
    /// Why, for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// A run whose stored row was damaged, cancelled in place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub damaged: bool,
}

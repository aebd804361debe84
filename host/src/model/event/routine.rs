//! A routine's events (`routine:*`): one payload shape for every kind
//! (the run, its state, the step and what the kind says of it).

use serde::{Deserialize, Serialize};

/// A routine's event: its kind and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineEvent {
    pub kind: RoutineKind,
    pub payload: RoutinePayload,
}

/// The kinds of a routine's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutineKind {
    Started,
    StepStarted,
    AwaitingInput,
    AutoAllowed,
    Escalated,
    Resolved,
    StepDone,
    StepRestarted,
    Done,
    Failed,
    Cancelled,
}

impl RoutineKind {
    pub const ALL: [RoutineKind; 11] = [
        RoutineKind::Started,
        RoutineKind::StepStarted,
        RoutineKind::AwaitingInput,
        RoutineKind::AutoAllowed,
        RoutineKind::Escalated,
        RoutineKind::Resolved,
        RoutineKind::StepDone,
        RoutineKind::StepRestarted,
        RoutineKind::Done,
        RoutineKind::Failed,
        RoutineKind::Cancelled,
    ];

    /// The names of [`RoutineKind::ALL`], in order (checked by a test).
    pub const KINDS: &'static [&'static str] = &[
        "routine:started",
        "routine:step-started",
        "routine:awaiting-input",
        "routine:auto-allowed",
        "routine:escalated",
        "routine:resolved",
        "routine:step-done",
        "routine:step-restarted",
        "routine:done",
        "routine:failed",
        "routine:cancelled",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RoutineKind::Started => "routine:started",
            RoutineKind::StepStarted => "routine:step-started",
            RoutineKind::AwaitingInput => "routine:awaiting-input",
            RoutineKind::AutoAllowed => "routine:auto-allowed",
            RoutineKind::Escalated => "routine:escalated",
            RoutineKind::Resolved => "routine:resolved",
            RoutineKind::StepDone => "routine:step-done",
            RoutineKind::StepRestarted => "routine:step-restarted",
            RoutineKind::Done => "routine:done",
            RoutineKind::Failed => "routine:failed",
            RoutineKind::Cancelled => "routine:cancelled",
        }
    }

    pub fn parse(kind: &str) -> Option<RoutineKind> {
        RoutineKind::ALL.into_iter().find(|k| k.as_str() == kind)
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

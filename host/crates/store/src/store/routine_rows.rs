//! The routine runs' records: a run (its spec and its
//! `engine::routine::RunState`, typed, with the fields the daemon looks
//! runs up by) and its steps (what each did). It owns their shape and
//! JSON; it must never decide a run's next state (that is
//! `engine::routine::decide`) nor hold SQL (a backend does).

use crate::model::routine::{RoutineSpec, RunReason, RunState};
use serde::{Deserialize, Serialize};

/// What a step did, as its row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    /// Not started yet (an earlier step is still going).
    Pending,
    /// Its session is running.
    Running,
    /// Its agent asked and the operator is asked in turn (`onInput`
    /// `escalate`).
    Escalated,
    /// It completed: the run goes on to its next step (or ends).
    Done,
    /// It failed the run.
    Failed,
    /// The run was cancelled while it was pending or going.
    Cancelled,
}

impl StepStatus {
    /// Its name as stored and shown (`escalated`).
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Escalated => "escalated",
            StepStatus::Done => "done",
            StepStatus::Failed => "failed",
            StepStatus::Cancelled => "cancelled",
        }
    }

    /// The status named `s` (as [`StepStatus::as_str`] gives it).
    pub fn parse(s: &str) -> Option<StepStatus> {
        [
            StepStatus::Pending,
            StepStatus::Running,
            StepStatus::Escalated,
            StepStatus::Done,
            StepStatus::Failed,
            StepStatus::Cancelled,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineStepRow {
    /// Its place in the routine's steps, from 0.
    pub index: usize,
    /// Its label from the spec.
    pub label: String,
    /// What it did, so far.
    pub status: StepStatus,
    /// The session it runs in (for an ACP step, the one of its latest
    /// start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Times its session was started again (the `r<restarts>` of its
    /// policy's idempotency key).
    pub restarts: u32,
    /// The operator's last answer to its escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// When it started (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When it ended (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineRow {
    /// `rt_…`, made when the run started.
    pub id: String,
    /// The label it was started with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `None` (`null`) only when its stored JSON does not decode
    /// (`damage` says why).
    pub spec: Option<RoutineSpec>,
    /// `None` (`null`) only when its stored JSON does not decode.
    pub state: Option<RunState>,
    /// The state's name (`waiting`, `running`, `escalated`, `done`,
    /// `failed`, `cancelled`).
    pub phase: String,
    /// The current step's session, while it runs or is escalated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_session: Option<String>,
    /// Escalated: when nobody answering fails the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    /// Escalated on a permission request: its id (`perm-N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_request: Option<String>,
    /// Failed: why (the engine's `FailReason`), or a person's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RunReason>,
    /// When the run started (ms since the epoch).
    pub created_at: i64,
    /// When the row last changed (ms since the epoch).
    pub updated_at: i64,
    /// Its steps, in order, one row each.
    pub steps: Vec<RoutineStepRow>,
    /// Set when its stored spec or state does not decode: which and why
    /// (that one is then `null`, and the engine leaves the run as it is,
    /// saying so). Never written back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

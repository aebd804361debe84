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
    Pending,
    Running,
    Escalated,
    Done,
    Failed,
    Cancelled,
}

impl StepStatus {
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
    pub index: usize,
    pub label: String,
    pub status: StepStatus,
    /// The session it runs in (for an ACP step, the one of its latest
    /// start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub restarts: u32,
    /// The operator's last answer to its escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineRow {
    pub id: String,
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
    pub created_at: i64,
    pub updated_at: i64,
    pub steps: Vec<RoutineStepRow>,
    /// Set when its stored spec or state does not decode: which and why
    /// (that one is then `null`, and the engine leaves the run as it is,
    /// saying so). Never written back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

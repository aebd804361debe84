//! A policy's events (`policy:*`) and its review chain's (`review:*`):
//! each payload is the policy's head (id, status, members) and the kind's
//! own fields, in one JSON object.

use crate::verdict::{Finding, Outcome, RunReport};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The fields every policy and review event carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyHead {
    pub policy_id: String,
    /// The policy's status after the event (`watching`, `blocked` …);
    /// typed by the model layer (`PolicyStatus`).
    pub status: String,
    pub session_ids: Vec<String>,
}

/// A policy's event: its head and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyEvent {
    pub head: PolicyHead,
    pub change: PolicyChange,
}

/// A review chain's event: its policy's head and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewEvent {
    pub head: PolicyHead,
    pub change: ReviewChange,
}

/// What one step of a policy's lifecycle says, before its head is known:
/// a `policy:*` or a `review:*` change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Policy(PolicyChange),
    Review(ReviewChange),
}

impl Change {
    pub fn kind(&self) -> &'static str {
        match self {
            Change::Policy(c) => c.kind(),
            Change::Review(c) => c.kind(),
        }
    }

    /// The event, with the policy's head.
    pub fn with(self, head: PolicyHead) -> super::Event {
        match self {
            Change::Policy(change) => super::Event::Policy(PolicyEvent { head, change }),
            Change::Review(change) => super::Event::Review(ReviewEvent { head, change }),
        }
    }
}

impl From<PolicyChange> for Change {
    fn from(c: PolicyChange) -> Change {
        Change::Policy(c)
    }
}

impl From<ReviewChange> for Change {
    fn from(c: ReviewChange) -> Change {
        Change::Review(c)
    }
}

family! {
    /// What happened to a policy, one variant per `policy:*` kind.
    PolicyChange {
        Attached(Attached) = "policy:attached",
        Queued(Queued) = "policy:queued",
        Gating(Gating) = "policy:gating",
        Passed(GateSummary) = "policy:passed",
        Failed(GateSummary) = "policy:failed",
        Nudge(Nudge) = "policy:nudge",
        Watching(Watching) = "policy:watching",
        Blocked(Blocked) = "policy:blocked",
        CommitReady(CommitReady) = "policy:commit-ready",
        Approved(Approved) = "policy:approved",
        Rejected(Rejected) = "policy:rejected",
        Stale(StaleAck) = "policy:stale",
        Committed(Committed) = "policy:committed",
        CommitFailed(Reasoned) = "policy:commit-failed",
        Cancelled(Cancelled) = "policy:cancelled",
        Done(Empty) = "policy:done",
        NextRefused(Reasoned) = "policy:next-refused",
        Paused(Reasoned) = "policy:paused",
        Expired(Expired) = "policy:expired",
        Retry(Retry) = "policy:retry",
    }
}

family! {
    /// What happened in a policy's review chain, one variant per
    /// `review:*` kind.
    ReviewChange {
        Started(ReviewStarted) = "review:started",
        Verdict(ReviewVerdict) = "review:verdict",
        Repair(ReviewRepair) = "review:repair",
        Shipped(ReviewEnded) = "review:shipped",
        Escalated(ReviewEnded) = "review:escalated",
    }
}

impl PolicyChange {
    /// `policy:queued` with `reason`.
    pub fn queued(reason: impl Into<String>) -> PolicyChange {
        PolicyChange::Queued(Queued {
            reason: reason.into(),
            gate_crashes: None,
        })
    }

    /// `policy:blocked` with its outcome and reason.
    pub fn blocked(outcome: BlockOutcome, reason: Option<String>) -> PolicyChange {
        PolicyChange::Blocked(Blocked {
            outcome,
            reason,
            stale_sessions: None,
            gate_crashes: None,
            damage: None,
        })
    }

    /// `policy:approved` by the policy itself (`requireHumanAck: false`).
    pub fn approved_by_policy() -> PolicyChange {
        PolicyChange::Approved(Approved {
            by: "policy (requireHumanAck: false)".into(),
            changed_after_snapshot: None,
        })
    }

    /// `policy:cancelled` from the status `from`.
    pub fn cancelled(from: &str, reason: Option<String>) -> PolicyChange {
        PolicyChange::Cancelled(Cancelled {
            from: Some(from.to_string()),
            reason,
            stale_sessions: None,
        })
    }

    /// `policy:nudge` of the operator's (`by`) to the members.
    pub fn nudge_by(message: String, by: &str) -> Nudge {
        Nudge {
            message,
            by: Some(by.to_string()),
            comments: None,
            retry: None,
            max_retries: None,
            sessions: None,
        }
    }

    /// `policy:stale`: acked by `by` (none: found at commit time).
    pub fn stale(by: Option<&str>, reason: impl Into<String>) -> PolicyChange {
        PolicyChange::Stale(StaleAck {
            by: by.map(str::to_string),
            reason: reason.into(),
        })
    }

    /// `policy:commit-failed`.
    pub fn commit_failed(reason: impl Into<String>) -> PolicyChange {
        PolicyChange::CommitFailed(Reasoned {
            reason: reason.into(),
        })
    }

    /// `policy:done`.
    pub fn done() -> PolicyChange {
        PolicyChange::Done(Empty {})
    }
}

impl GateSummary {
    /// The summary of `report`: its outcome and reason, gate by gate.
    pub fn of(report: &RunReport) -> GateSummary {
        GateSummary {
            outcome: report.outcome,
            reason: report.reason.clone(),
            gates: report
                .gates
                .iter()
                .map(|g| GateSummaryItem {
                    gate: g.gate.clone(),
                    outcome: g.outcome,
                    reason: g.reason.clone(),
                    exit_code: g.exit_code,
                    findings: g.findings.clone(),
                })
                .collect(),
        }
    }
}

/// No fields of its own (`policy:done`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// Only a reason (`policy:commit-failed`, `policy:next-refused`,
/// `policy:paused`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoned {
    pub reason: String,
}

/// `policy:attached`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attached {
    /// `emit` or `commit`; typed by the model layer (`Then`).
    pub then: String,
    pub label: Option<String>,
    /// The cursor it watches after.
    pub watch_after: i64,
    pub pending: Vec<String>,
    /// The policy whose `next` it is.
    pub parent_id: Option<String>,
}

/// `policy:queued`: why it gates (again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    pub reason: String,
    /// A gate found running at a restart: the deaths counted so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_crashes: Option<i64>,
}

/// `policy:gating`: its gate's run number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gating {
    pub run: i64,
}

/// `policy:passed` and `policy:failed`: the verdict, gate by gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateSummary {
    pub outcome: Outcome,
    pub reason: String,
    pub gates: Vec<GateSummaryItem>,
}

/// One gate of a [`GateSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateSummaryItem {
    pub gate: String,
    pub outcome: Outcome,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub findings: Vec<Finding>,
}

/// `policy:nudge`: what the members are told. A failed gate's nudge
/// carries `retry`, `maxRetries` and `sessions`; a request for changes
/// `by`, `comments` and `sessions`; a reject's comment `by`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nudge {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The operator's line comments; typed by the model layer
    /// (`LineComment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// The members the nudge goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
}

/// `policy:watching`: the members whose turn-end it waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watching {
    pub pending: Vec<String>,
}

/// Why a policy was blocked, in short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockOutcome {
    /// Its gate failed with no retry left (or no member to act).
    Fail,
    /// Its gate could not run, its commit failed, its row did not decode.
    Error,
    /// A member went silent past the heartbeat timeout.
    Stale,
    /// Its deadline passed.
    Expired,
    /// Its review chain escalated.
    Review,
}

/// `policy:blocked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    pub outcome: BlockOutcome,
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_sessions: Option<Vec<String>>,
    /// A gate input that killed the daemon: the deaths counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_crashes: Option<i64>,
    /// A stored row that does not decode (`null`: an error that names no
    /// row).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::codec::present"
    )]
    pub damage: Option<Option<DamageRef>>,
}

/// The row a damaged policy was blocked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, rename_all = "camelCase")]
pub enum DamageRef {
    #[serde(rename_all = "camelCase")]
    Policy {
        policy_id: String,
        column: String,
        message: String,
    },
    #[serde(rename_all = "camelCase")]
    Session {
        session_id: String,
        column: String,
        message: String,
    },
}

/// `policy:commit-ready`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitReady {
    /// The commit plan stored (null: none).
    pub plan: Option<Box<crate::model::plan::CommitPlan>>,
}

pub use crate::model::plan::ChangedAfter;

/// `policy:approved`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approved {
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_after_snapshot: Option<ChangedAfter>,
}

/// `policy:rejected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    pub by: String,
    /// The operator's comment, sent to the agent as a nudge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `policy:stale`: what passed is not what would be committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleAck {
    /// Who acked (a stale ack; none for a commit found stale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub reason: String,
}

/// `policy:committed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Committed {
    pub sha: Option<String>,
    pub nothing_to_commit: bool,
    pub paths: Option<Vec<String>>,
    /// Published in the instant the policy was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `policy:cancelled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled {
    /// The status it was cancelled from (none: the watchdog's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_sessions: Option<Vec<String>>,
}

/// `policy:expired`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expired {
    pub deadline_at: i64,
    /// The status it expired in.
    pub was: String,
    pub reason: String,
}

/// `policy:retry`: its gate could not run and runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    pub cause: String,
    pub attempt: i64,
    pub of: u32,
    pub wait_ms: u64,
}

/// `review:started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStarted {
    pub cycle: u32,
    pub max_cycles: u32,
    pub reviewer: String,
    /// A session reviewer's prompt (the rubric and the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub diff_bytes: usize,
}

/// `review:verdict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewVerdict {
    pub cycle: u32,
    pub max_cycles: u32,
    /// `SHIP` or `BLOCK`.
    pub verdict: String,
    pub findings: String,
}

/// `review:repair`: the nudge the repairer gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRepair {
    pub cycle: u32,
    pub max_cycles: u32,
    pub session: String,
    pub message: String,
}

/// `review:shipped` and `review:escalated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewEnded {
    pub cycle: u32,
    pub max_cycles: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

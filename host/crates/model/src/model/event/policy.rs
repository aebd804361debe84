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
    /// The policy's id (`pol_…`).
    pub policy_id: String,
    /// The policy's status after the event (`watching`, `blocked` …);
    /// typed by the model layer (`PolicyStatus`).
    pub status: String,
    /// Its member sessions' ids (the first is also the event's `sessionId`).
    pub session_ids: Vec<String>,
}

/// A policy's event: its head and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyEvent {
    /// The policy's id, status and members.
    pub head: PolicyHead,
    /// What happened: the `policy:*` kind and its payload.
    pub change: PolicyChange,
}

/// A review chain's event: its policy's head and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewEvent {
    /// The policy's id, status and members.
    pub head: PolicyHead,
    /// What happened: the `review:*` kind and its payload.
    pub change: ReviewChange,
}

/// What one step of a policy's lifecycle says, before its head is known:
/// a `policy:*` or a `review:*` change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A `policy:*` change.
    Policy(PolicyChange),
    /// A `review:*` change of the policy's review chain.
    Review(ReviewChange),
}

impl Change {
    /// Its kind (`policy:queued`, `review:verdict`).
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
        /// Attached to its members; it watches for their turn-ends.
        Attached(Attached) = "policy:attached",
        /// Every member was heard from (or a retry is due): it waits to gate.
        Queued(Queued) = "policy:queued",
        /// Its gates started running.
        Gating(Gating) = "policy:gating",
        /// Its gates passed.
        Passed(GateSummary) = "policy:passed",
        /// A gate failed (or could not run).
        Failed(GateSummary) = "policy:failed",
        /// The members are sent a message: a failed gate's, a request for
        /// changes, a reject's comment.
        Nudge(Nudge) = "policy:nudge",
        /// It watches for its members' turn-ends again (after a nudge or a
        /// repair).
        Watching(Watching) = "policy:watching",
        /// It stopped short and waits for a person (only a cancel leaves it).
        Blocked(Blocked) = "policy:blocked",
        /// Its gates passed and its commit plan is stored; the commit waits
        /// for an ack.
        CommitReady(CommitReady) = "policy:commit-ready",
        /// Its commit was approved (by the operator, or by the policy itself).
        Approved(Approved) = "policy:approved",
        /// The operator rejected its commit (`policy:cancelled` follows).
        Rejected(Rejected) = "policy:rejected",
        /// What passed is no longer what would be committed (a stale ack, or
    /// content changed at commit time).
        Stale(StaleAck) = "policy:stale",
        /// Its commit was made (or there was nothing to commit).
        Committed(Committed) = "policy:committed",
        /// Its commit could not be made or recorded (`policy:blocked` follows).
        CommitFailed(Reasoned) = "policy:commit-failed",
        /// It was cancelled (a cancel, a reject, or a stale member).
        Cancelled(Cancelled) = "policy:cancelled",
        /// It finished: its gates passed and its commit, if any, is made.
        Done(Empty) = "policy:done",
        /// Its `next` policy could not be attached.
        NextRefused(Reasoned) = "policy:next-refused",
        /// Not a change of state: it waits in `queued` because supervision is
        /// paused.
        Paused(Reasoned) = "policy:paused",
        /// Its deadline passed (`policy:blocked` follows).
        Expired(Expired) = "policy:expired",
        /// Its gate could not run and runs again after a backoff.
        Retry(Retry) = "policy:retry",
    }
}

family! {
    /// What happened in a policy's review chain, one variant per
    /// `review:*` kind.
    ReviewChange {
        /// A review cycle began: the reviewer is given the change.
        Started(ReviewStarted) = "review:started",
        /// The reviewer answered `SHIP` or `BLOCK`.
        Verdict(ReviewVerdict) = "review:verdict",
        /// A `BLOCK` with cycles left: the repairer is sent the findings.
        Repair(ReviewRepair) = "review:repair",
        /// The reviewer shipped the change: the policy goes on to its commit
        /// or `done`.
        Shipped(ReviewEnded) = "review:shipped",
        /// Out of cycles: the policy is blocked for a person.
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
    /// Why, for people.
    pub reason: String,
}

/// `policy:attached`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attached {
    /// `emit` or `commit`; typed by the model layer (`Then`).
    pub then: String,
    /// The attach input's `label`, if it has one.
    pub label: Option<String>,
    /// The cursor it watches after.
    pub watch_after: i64,
    /// The members whose turn-end (or exit) it waits for.
    pub pending: Vec<String>,
    /// The policy whose `next` it is.
    pub parent_id: Option<String>,
}

/// `policy:queued`: why it gates (again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    /// Why it gates (again): its members were heard from, a retry, content
    /// gone stale, a restart.
    pub reason: String,
    /// A gate found running at a restart: the deaths counted so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_crashes: Option<i64>,
}

/// `policy:gating`: its gate's run number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gating {
    /// The run's number among the policy's gate runs, from 1 (its `gateRuns`).
    pub run: i64,
}

/// `policy:passed` and `policy:failed`: the verdict, gate by gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateSummary {
    /// The whole verdict: pass, fail or error.
    pub outcome: Outcome,
    /// The report's reason (the first gate that did not pass gives it).
    pub reason: String,
    /// Each gate's verdict, in the order they ran.
    pub gates: Vec<GateSummaryItem>,
}

/// One gate of a [`GateSummary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateSummaryItem {
    /// The gate's name, or its kind's label (`shell: cargo test`); `[/path] `
    /// first with several workspaces.
    pub gate: String,
    /// Its verdict.
    pub outcome: Outcome,
    /// Why it did not pass, or what passed.
    pub reason: String,
    /// A shell gate's exit code (none: killed, timed out, or not a process).
    pub exit_code: Option<i32>,
    /// What the gate found (a judge's or a plugin's findings).
    pub findings: Vec<Finding>,
}

/// `policy:nudge`: what the members are told. A failed gate's nudge
/// carries `retry`, `maxRetries` and `sessions`; a request for changes
/// `by`, `comments` and `sessions`; a reject's comment `by`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nudge {
    /// The text the members are sent (the nudge template rendered, or the
    /// operator's words).
    pub message: String,
    /// Who sent it, for a person's nudge (`the operator`); none for a failed
    /// gate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The operator's line comments; typed by the model layer
    /// (`LineComment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comments: Option<Value>,
    /// Which retry this is (1 for the first), for a failed gate's nudge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<i64>,
    /// The attach input's `maxRetries`, for a failed gate's nudge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// The members the nudge goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
}

/// `policy:watching`: the members whose turn-end it waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watching {
    /// The members whose turn-end (or exit) it waits for.
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
    /// Why, in short.
    pub outcome: BlockOutcome,
    /// Why, for people.
    pub reason: Option<String>,
    /// The members found silent, when a stale member blocked it.
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
    /// A policy's row does not decode.
    #[serde(rename_all = "camelCase")]
    Policy {
        /// The policy's id.
        policy_id: String,
        /// The column that does not decode.
        column: String,
        /// Why it does not decode.
        message: String,
    },
    /// A member session's row does not decode.
    #[serde(rename_all = "camelCase")]
    Session {
        /// The session's id.
        session_id: String,
        /// The column that does not decode.
        column: String,
        /// Why it does not decode.
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
    /// Who approved (`the operator`, or the policy itself with
    /// `requireHumanAck: false`).
    pub by: String,
    /// The commit paths changed in the workspace since the snapshot, when any
    /// did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_after_snapshot: Option<ChangedAfter>,
}

/// `policy:rejected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// Who rejected (`the operator`).
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
    /// Why the snapshot is not what would be committed.
    pub reason: String,
}

/// `policy:committed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Committed {
    /// The commit made (hex); none when there was nothing to commit.
    pub sha: Option<String>,
    /// The paths held no change: no commit was made.
    pub nothing_to_commit: bool,
    /// The commit plan's paths.
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
    /// Why (`cancelled by the operator`, a stale member).
    pub reason: Option<String>,
    /// The members found silent, when the watchdog cancelled it (`on_stale =
    /// "cancel"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_sessions: Option<Vec<String>>,
}

/// `policy:expired`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expired {
    /// The deadline that passed (ms since the Unix epoch).
    pub deadline_at: i64,
    /// The status it expired in.
    pub was: String,
    /// Why, for people.
    pub reason: String,
}

/// `policy:retry`: its gate could not run and runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Why the gate could not run (its report's reason).
    pub cause: String,
    /// Which retry this is, from 1.
    pub attempt: i64,
    /// How many retries are allowed (`[daemon] infra_retries`).
    pub of: u32,
    /// How long it waits before the retry (ms; `infra_retry_backoff`,
    /// doubling).
    pub wait_ms: u64,
}

/// `review:started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStarted {
    /// The review's cycle, from 1.
    pub cycle: u32,
    /// The most cycles the chain runs (its `maxCycles`).
    pub max_cycles: u32,
    /// Who reviews: a judge gate's label or `session ID`.
    pub reviewer: String,
    /// A session reviewer's prompt (the rubric and the change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The size of the diff under review (bytes).
    pub diff_bytes: usize,
}

/// `review:verdict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewVerdict {
    /// The review's cycle, from 1.
    pub cycle: u32,
    /// The most cycles the chain runs (its `maxCycles`).
    pub max_cycles: u32,
    /// `SHIP` or `BLOCK`.
    pub verdict: String,
    /// The reviewer's findings, as it wrote them.
    pub findings: String,
}

/// `review:repair`: the nudge the repairer gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRepair {
    /// The review's cycle, from 1.
    pub cycle: u32,
    /// The most cycles the chain runs (its `maxCycles`).
    pub max_cycles: u32,
    /// The repairer's session id.
    pub session: String,
    /// The nudge it is sent (the findings to fix).
    pub message: String,
}

/// `review:shipped` and `review:escalated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewEnded {
    /// The cycle the chain ended in.
    pub cycle: u32,
    /// The most cycles the chain runs (its `maxCycles`).
    pub max_cycles: u32,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

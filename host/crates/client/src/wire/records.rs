//! The API's answers about stored records: a session, a policy, an event,
//! a routine's run and its steps, a standing policy, and the states they
//! are in. Each is the record as the API shows it (camelCase names, the
//! same fields absent or null as the stored record serialised); the `api`
//! module converts the store's rows into them.
//!
//! It owns these shapes only; it must never read the store or decide a
//! state (the names of the states are the API's; the store's enums map to
//! them one to one).

use crate::config::Trust;
use crate::model::as_given::AsGiven;
use crate::model::attach::AttachInput;
use crate::model::chain::ChainRecord;
use crate::model::event::Event as TypedEvent;
use crate::model::plan::{CommitPlan, Prepared};
use crate::model::report::RunReport;
use crate::model::routine::{RoutineSpec, RunReason, RunState};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a stored record does not decode: the column and the error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Damage {
    pub column: String,
    pub message: String,
}

/// What a session is doing, as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    Running,
    Idle,
    AwaitingInput,
    Exited,
}

impl SessionState {
    pub const ALL: [SessionState; 4] = [
        SessionState::Running,
        SessionState::Idle,
        SessionState::AwaitingInput,
        SessionState::Exited,
    ];

    /// Its name on the wire (`awaiting-input`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Idle => "idle",
            SessionState::AwaitingInput => "awaiting-input",
            SessionState::Exited => "exited",
        }
    }
}

/// A session as the API shows it (never its key's digest nor its
/// workspace's identity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    pub label: Option<String>,
    pub cwd: String,
    pub workspace: String,
    pub state: SessionState,
    pub turns: i64,
    /// Cursor of its latest `session:turn-end` event.
    pub last_turn_cursor: Option<i64>,
    pub last_message: Option<String>,
    pub heartbeat_at: Option<i64>,
    pub notify_url: Option<String>,
    /// For sessions gatehost started: the argv it runs.
    pub command: Option<Vec<String>>,
    pub pid: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The credential that registered (or started) it.
    pub owner: Trust,
    /// When the watchdog found it silent (`session:stale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<i64>,
    /// Set when the stored record does not decode (the other fields are
    /// then placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<Damage>,
}

/// A registered (or started) session, with its key when this request was
/// given one (answered once, never again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    #[serde(flatten)]
    pub session: Session,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// A policy's place in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyStatus {
    Watching,
    Queued,
    Gating,
    Nudging,
    AwaitingAck,
    Committing,
    /// Its gate passed; its `review` chain's reviewer reviews the change.
    Reviewing,
    Done,
    Blocked,
    Cancelled,
}

impl PolicyStatus {
    pub const ALL: [PolicyStatus; 10] = [
        PolicyStatus::Watching,
        PolicyStatus::Queued,
        PolicyStatus::Gating,
        PolicyStatus::Nudging,
        PolicyStatus::AwaitingAck,
        PolicyStatus::Committing,
        PolicyStatus::Reviewing,
        PolicyStatus::Done,
        PolicyStatus::Blocked,
        PolicyStatus::Cancelled,
    ];

    /// Its name on the wire (`awaiting-ack`).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyStatus::Watching => "watching",
            PolicyStatus::Queued => "queued",
            PolicyStatus::Gating => "gating",
            PolicyStatus::Nudging => "nudging",
            PolicyStatus::AwaitingAck => "awaiting-ack",
            PolicyStatus::Committing => "committing",
            PolicyStatus::Reviewing => "reviewing",
            PolicyStatus::Done => "done",
            PolicyStatus::Blocked => "blocked",
            PolicyStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        PolicyStatus::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// No transition leaves these (blocked only by cancel).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            PolicyStatus::Done | PolicyStatus::Blocked | PolicyStatus::Cancelled
        )
    }
}

/// A policy as the API shows it: the stored record, then its id again as
/// `policyId` (agentproto's name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub id: String,
    pub seq: i64,
    /// The attach input as validated (agentproto `policy_attach` JSON).
    pub spec: AttachInput,
    pub status: PolicyStatus,
    pub sessions: Vec<String>,
    /// Members whose turn-end (or exit) is still awaited.
    pub pending: Vec<String>,
    /// Only session events with a cursor above this one count.
    pub watch_after: i64,
    pub retries_used: i64,
    pub gate_runs: i64,
    /// The last gate report (outcome, reason, gates).
    pub verdict: Option<RunReport>,
    /// The commit plan recorded on green.
    pub plan: Option<CommitPlan>,
    /// The commit object written but maybe not yet published.
    pub prepared: Option<Prepared>,
    pub commit_sha: Option<String>,
    pub reason: Option<String>,
    pub parent_id: Option<String>,
    pub next_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Daemon deaths by a fault of its own in a row that found its gate
    /// running.
    pub gate_crashes: i64,
    /// When publishes of the prepared commit began that never recorded
    /// their end (ms).
    pub publish_open: Vec<i64>,
    /// When its `deadline` (from attach) runs out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    /// Runs of its current gate that could not run and were tried again.
    #[serde(default)]
    pub infra_retries_used: i64,
    /// Its review chain's state, once its first review began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ChainRecord>,
    /// Set when the stored record does not decode: the first such column
    /// and why (the other fields are then placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<Damage>,
    pub policy_id: String,
}

/// A stored event: `{cursor, at, type, sessionId, policyId, payload,
/// damage?}`, its payload typed (a kind this build does not know, or a
/// damaged row's, is `Unknown`, kept as sent).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub cursor: i64,
    pub at: i64,
    pub session_id: Option<String>,
    pub policy_id: Option<String>,
    pub event: TypedEvent,
    /// Set when the stored payload does not decode (the event is then
    /// `Unknown` with a `null` payload).
    pub damage: Option<Damage>,
}

impl Event {
    /// Its kind (`policy:nudge`).
    pub fn kind(&self) -> &str {
        self.event.kind()
    }
}

/// An [`Event`] as sent.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventJson<K, P> {
    cursor: i64,
    at: i64,
    #[serde(rename = "type")]
    kind: K,
    session_id: Option<String>,
    policy_id: Option<String>,
    payload: P,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    damage: Option<Damage>,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let payload = self.event.payload().map_err(serde::ser::Error::custom)?;
        EventJson {
            cursor: self.cursor,
            at: self.at,
            kind: self.kind(),
            session_id: self.session_id.clone(),
            policy_id: self.policy_id.clone(),
            payload,
            damage: self.damage.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = EventJson::<String, Value>::deserialize(d)?;
        Ok(Event {
            cursor: w.cursor,
            at: w.at,
            // A damaged row's payload is `null`: kept, not decoded.
            event: if w.damage.is_some() {
                TypedEvent::Unknown {
                    kind: w.kind,
                    payload: w.payload,
                }
            } else {
                TypedEvent::decode(&w.kind, w.payload)
            },
            session_id: w.session_id,
            policy_id: w.policy_id,
            damage: w.damage,
        })
    }
}

/// What a routine's step did.
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
    pub const ALL: [StepStatus; 6] = [
        StepStatus::Pending,
        StepStatus::Running,
        StepStatus::Escalated,
        StepStatus::Done,
        StepStatus::Failed,
        StepStatus::Cancelled,
    ];

    /// Its name on the wire.
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
}

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineStep {
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

/// A routine's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routine {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `null` only when its stored JSON does not decode (`damage` says why).
    pub spec: Option<RoutineSpec>,
    /// `null` only when its stored JSON does not decode.
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
    /// Failed: why, or a person's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RunReason>,
    pub created_at: i64,
    pub updated_at: i64,
    pub steps: Vec<RoutineStep>,
    /// Set when its stored spec or state does not decode: which and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// A standing policy: a template attached to each new session it matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandingPolicy {
    pub id: String,
    /// Agents (a session id's part before `:`); empty: every agent.
    pub agents: Vec<String>,
    /// Directories a session's workspace must lie under; empty: anywhere.
    pub under: Vec<String>,
    /// The label a session must carry; none: any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The policy as the operator gave it; `null` when its stored JSON
    /// does not decode (then `damage` says why).
    pub policy: Option<AsGiven<AttachInput>>,
    pub created_at: i64,
    /// Set when a stored column does not decode: which and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

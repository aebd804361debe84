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
    /// The column (or field) that does not decode.
    pub column: String,
    /// Why it does not decode.
    pub message: String,
}

/// What a session is doing, as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// In a turn (or just registered or started).
    Running,
    /// Its turn ended; it waits for its next prompt.
    Idle,
    /// It asked a person something (a permission, a question) and waits for
    /// the answer.
    AwaitingInput,
    /// It exited; nothing it reports counts again.
    Exited,
}

impl SessionState {
    /// Every state, in the order above.
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
    /// The session's id (`claude:…`, or `ses_…` when none was given); its
    /// part before `:` names the agent.
    pub id: String,
    /// The label it was registered or started with.
    pub label: Option<String>,
    /// The agent's working directory, as registered.
    pub cwd: String,
    /// The folder gates run in and commits are made to: the nearest one at or
    /// above `cwd` holding `.git`, else `cwd`, or as given.
    pub workspace: String,
    /// What it is doing, as last reported.
    pub state: SessionState,
    /// How many turns it has ended.
    pub turns: i64,
    /// Cursor of its latest `session:turn-end` event.
    pub last_turn_cursor: Option<i64>,
    /// The agent's words with its last report that kept them (with the agent
    /// token, only when its key is presented).
    pub last_message: Option<String>,
    /// When it was last heard from (ms since the Unix epoch).
    pub heartbeat_at: Option<i64>,
    /// The URL told of its attention events, as registered (with the agent
    /// token, only when its key is presented).
    pub notify_url: Option<String>,
    /// For sessions gatehost started: the argv it runs.
    pub command: Option<Vec<String>>,
    /// For sessions gatehost started: the process id of the agent.
    pub pid: Option<i64>,
    /// When it was first registered (ms since the Unix epoch).
    pub created_at: i64,
    /// When its record last changed (ms since the Unix epoch).
    pub updated_at: i64,
    /// The credential that registered (or started) it.
    pub owner: Trust,
    /// When the watchdog found it silent (`session:stale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<i64>,
    /// The host that owns it, where its agent runs (a daemon on a
    /// PostgreSQL store shared by hosts); absent on a daemon of one host
    /// (SQLite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
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
    /// The session, as [`Session`] shows it.
    #[serde(flatten)]
    pub session: Session,
    /// Its session key (`gsk_…`), answered only to the request that
    /// registered or started it: kept by the client, never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// A policy's place in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyStatus {
    /// Attached; waits for its members' turn-ends (or exits).
    Watching,
    /// Every member is heard from; waits for a place to run its gates.
    Queued,
    /// Its gates run.
    Gating,
    /// A gate failed with retries left: the agent is being sent its nudge,
    /// then the policy watches again.
    Nudging,
    /// Its gates passed; its commit waits for a person's approval.
    AwaitingAck,
    /// Its commit is being made.
    Committing,
    /// Its gate passed; its `review` chain's reviewer reviews the change.
    Reviewing,
    /// Finished: its gates passed (and its commit, if it makes one, is made).
    Done,
    /// Stopped short: out of retries, no member alive, its gate unable to
    /// run, its deadline passed or a member stale (`reason` says which); only
    /// a cancel leaves it.
    Blocked,
    /// Ended by a cancel or a reject (the operator's), or by a member gone
    /// stale (`on_stale = "cancel"`).
    Cancelled,
}

impl PolicyStatus {
    /// Every status, in the order above.
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

    /// The status named `s` on the wire (`awaiting-ack`); none for another
    /// name.
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
    /// The policy's id (`pol_` and 32 hex digits).
    pub id: String,
    /// Its place in attach order (the cursor of policy pages).
    pub seq: i64,
    /// The attach input as validated (agentproto `policy_attach` JSON).
    pub spec: AttachInput,
    /// Where it is in its lifecycle.
    pub status: PolicyStatus,
    /// The ids of its member sessions.
    pub sessions: Vec<String>,
    /// Members whose turn-end (or exit) is still awaited.
    pub pending: Vec<String>,
    /// Only session events with a cursor above this one count.
    pub watch_after: i64,
    /// How many nudges a failed gate sent it (counted against its
    /// `maxRetries`).
    pub retries_used: i64,
    /// How many times its gates ran.
    pub gate_runs: i64,
    /// The last gate report (outcome, reason, gates).
    pub verdict: Option<RunReport>,
    /// The commit plan recorded on green.
    pub plan: Option<CommitPlan>,
    /// The commit object written but maybe not yet published.
    pub prepared: Option<Prepared>,
    /// The commit made (hex), once it is.
    pub commit_sha: Option<String>,
    /// Why it is as it is: the last failure's reason, or why it was blocked
    /// or cancelled.
    pub reason: Option<String>,
    /// The policy whose `next` attached this one.
    pub parent_id: Option<String>,
    /// The policy its own `next` attached, once it is done.
    pub next_id: Option<String>,
    /// When it was attached (ms since the Unix epoch).
    pub created_at: i64,
    /// When its record last changed (ms since the Unix epoch).
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
    /// The host that owns it (its sessions' host, which gates and commits
    /// it), on a daemon of a PostgreSQL store shared by hosts; absent on a
    /// daemon of one host (SQLite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Set when the stored record does not decode: the first such column
    /// and why (the other fields are then placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<Damage>,
    /// Its `id` again, under the name agentproto gives it.
    pub policy_id: String,
}

/// A stored event: `{cursor, at, type, sessionId, policyId, payload,
/// host?, damage?}`, its payload typed (a kind this build does not know, or a
/// damaged row's, is `Unknown`, kept as sent).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its place on the bus: later events have higher cursors.
    pub cursor: i64,
    /// When it was published (ms since the Unix epoch).
    pub at: i64,
    /// The session it is about, if any.
    pub session_id: Option<String>,
    /// The policy it is about, if any.
    pub policy_id: Option<String>,
    /// Its kind and typed payload.
    pub event: TypedEvent,
    /// The host that wrote it (a daemon of a PostgreSQL store shared by
    /// hosts); absent on a daemon of one host (SQLite).
    pub host: Option<String>,
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
    host: Option<String>,
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
            host: self.host.clone(),
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
            host: w.host,
            damage: w.damage,
        })
    }
}

/// What a routine's step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    /// Not begun yet: it waits for the steps before it.
    Pending,
    /// Its session works on it.
    Running,
    /// It waits for the operator's answer (`routine resolve`).
    Escalated,
    /// It finished.
    Done,
    /// It failed (and with it the run).
    Failed,
    /// The run was cancelled before it finished.
    Cancelled,
}

impl StepStatus {
    /// Every status, in the order above.
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
    /// Its place in the routine's steps, from 0.
    pub index: usize,
    /// Its label (unique in the routine; `resolve` names it).
    pub label: String,
    /// What it did, so far.
    pub status: StepStatus,
    /// The session it runs in (for an ACP step, the one of its latest
    /// start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// How many times its agent was started again (it died with an earlier
    /// daemon); past two the run fails.
    pub restarts: u32,
    /// The operator's last answer to its escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// When it began (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When it finished, failed or was cancelled (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// A routine's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routine {
    /// The run's id (`rt_` and 32 hex digits).
    pub id: String,
    /// The routine's label, if it has one.
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
    /// When the run was started (ms since the Unix epoch).
    pub created_at: i64,
    /// When its record last changed (ms since the Unix epoch).
    pub updated_at: i64,
    /// Its steps, in order.
    pub steps: Vec<RoutineStep>,
    /// Set when its stored spec or state does not decode: which and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// A standing policy: a template attached to each new session it matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandingPolicy {
    /// Its id (`sp_` and 32 hex digits).
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
    /// When the operator added it (ms since the Unix epoch).
    pub created_at: i64,
    /// Set when a stored column does not decode: which and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

//! The row types of the store: what a session, a policy, an event, a
//! pending delivery, a standing policy and a passkey are once read (a
//! routine run's are `routine_rows`). It must never hold SQL or decoding
//! (an event row's JSON is `codec`'s).

use crate::model::as_given::AsGiven;
use crate::model::attach::AttachInput;
use crate::model::chain::ChainRecord;
use crate::model::event::Event;
use crate::model::plan::{CommitPlan, Prepared};
use crate::model::report::RunReport;
use serde::{Deserialize, Serialize};
use webauthn_rs::prelude::Passkey;

/// Why a stored row does not decode: the column and the error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowDamage {
    /// The first column that does not decode (`spec`, `plan`, …).
    pub column: String,
    /// The decoder's (or the check's) message.
    pub message: String,
}

impl std::fmt::Display for RowDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its stored {} does not decode: {}",
            self.column, self.message
        )
    }
}

/// What a session is doing, as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// Working on a turn (`turn-start`).
    Running,
    /// Its last turn ended (`turn-end`, what gates run on).
    Idle,
    /// The agent asks something (`awaiting-input`); does not gate.
    AwaitingInput,
    /// It reported `exited` (or its process, for one gatehost started,
    /// ended): a member's end for fan-in.
    Exited,
}

impl SessionState {
    /// Its name as stored and shown (`awaiting-input`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Idle => "idle",
            SessionState::AwaitingInput => "awaiting-input",
            SessionState::Exited => "exited",
        }
    }

    /// The state named `s` (as [`SessionState::as_str`] gives it).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => SessionState::Running,
            "idle" => SessionState::Idle,
            "awaiting-input" => SessionState::AwaitingInput,
            "exited" => SessionState::Exited,
            _ => return None,
        })
    }
}

/// A policy's place in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyStatus {
    /// Waiting for its members' turns to end (or their exit).
    Watching,
    /// Its turns ended: waiting for its gate to run.
    Queued,
    /// Its gate is running.
    Gating,
    /// Its gate failed with retries left: the nudge is being delivered,
    /// then it watches again.
    Nudging,
    /// Its gate passed; a commit policy waits for the operator's ack (or
    /// reject) before committing.
    AwaitingAck,
    /// Acked: its prepared commit is being written and published.
    Committing,
    /// Its gate passed; its `review` chain's reviewer reviews the change.
    Reviewing,
    /// Settled: passed (and committed, for a commit policy).
    Done,
    /// Out of retries, no member alive, its gate could not run, its
    /// deadline passed or its review escalated; only a cancel leaves it.
    Blocked,
    /// Settled: cancelled or rejected by the operator, or a member went
    /// stale under `on_stale = cancel`.
    Cancelled,
}

impl PolicyStatus {
    /// Every status, in lifecycle order.
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

    /// Its name as stored and shown (`awaiting-ack`).
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

    /// The status named `s` (as [`PolicyStatus::as_str`] gives it).
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

/// A registered agent session as stored (and, but for the fields it
/// skips, as the API shows it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// `AGENT:ID` (`claude:<the CLI's session id>`).
    pub id: String,
    /// The label it was registered with, which standing policies match.
    pub label: Option<String>,
    /// The directory it was registered from, as given.
    pub cwd: String,
    /// Its workspace, canonical: where its gates run and what its
    /// policies commit in.
    pub workspace: String,
    /// What it is doing, as last reported.
    pub state: SessionState,
    /// Turns it has ended.
    pub turns: i64,
    /// Cursor of its latest `session:turn-end` event.
    pub last_turn_cursor: Option<i64>,
    /// The agent's last message of its last turn, when its CLI sent it.
    pub last_message: Option<String>,
    /// When it last reported anything (ms since the epoch): what the
    /// watchdog's heartbeat timeout is measured from.
    pub heartbeat_at: Option<i64>,
    /// Where to notify about it, as registered.
    pub notify_url: Option<String>,
    /// For sessions gatehost started: the argv it runs.
    pub command: Option<Vec<String>>,
    /// For sessions gatehost started: its process's pid, once running.
    pub pid: Option<i64>,
    /// When it was first registered (ms since the epoch).
    pub created_at: i64,
    /// When the row last changed (ms since the epoch).
    pub updated_at: i64,
    /// The credential that registered (or started) it: only that one may
    /// register it again.
    pub owner: crate::config::Trust,
    /// The SHA-256 digest (hex) of its key (`engine::keys`); `None` for a
    /// session stored before keys existed. Never sent to a client.
    #[serde(skip)]
    pub key_digest: Option<String>,
    /// When the watchdog found it silent past `[daemon] heartbeat_timeout`
    /// (`session:stale`); cleared when it speaks again (`session:live`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<i64>,
    /// The host that owns it (PostgreSQL's `host` column: where its agent
    /// runs); `None` on SQLite (one host) and for a row of no host. Read
    /// only: the store stamps it at insert, never from this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Set when the stored row does not decode: the column and why. The
    /// other fields are then placeholders, never to be acted on or written
    /// back (the store refuses to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<RowDamage>,
    /// The workspace directory's identity when it was registered (opened
    /// without following a symlink): a gate, plugin, judge or started
    /// agent is given that directory or nothing. `None` for a session
    /// stored before identities were kept. Not sent to a client.
    #[serde(skip)]
    pub workspace_pin: Option<crate::anchor::DirIdentity>,
}

/// A policy as stored: its spec, where it is in its lifecycle, and what
/// its gate runs and commit left.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    /// `pol_…`, made at attach.
    pub id: String,
    /// Its order of attach (the store's, increasing): what lists and
    /// pages are ordered by.
    pub seq: i64,
    /// The attach input as validated (agentproto `policy_attach` JSON).
    pub spec: AttachInput,
    /// Where it is in its lifecycle.
    pub status: PolicyStatus,
    /// Its member sessions' ids, in the order given.
    pub sessions: Vec<String>,
    /// Members whose turn-end (or exit) is still awaited.
    pub pending: Vec<String>,
    /// Only session events with a cursor above this one count.
    pub watch_after: i64,
    /// Failed gates it has nudged for, counted against `onFail.retries`.
    pub retries_used: i64,
    /// Times its gate has run.
    pub gate_runs: i64,
    /// The last gate report (outcome, reason, gates).
    pub verdict: Option<RunReport>,
    /// The commit plan recorded on green (paths, message, fingerprint).
    pub plan: Option<CommitPlan>,
    /// The commit object written but maybe not yet published.
    pub prepared: Option<Prepared>,
    /// The commit published (hex object id), once done.
    pub commit_sha: Option<String>,
    /// The last reason given of it: its failed gate's, a rejection's, or
    /// why it is blocked or cancelled.
    pub reason: Option<String>,
    /// The policy whose `next` attached it, if any.
    pub parent_id: Option<String>,
    /// The policy its own `next` attached, once it passed.
    pub next_id: Option<String>,
    /// When it was attached (ms since the epoch).
    pub created_at: i64,
    /// When the row last changed (ms since the epoch).
    pub updated_at: i64,
    /// Daemon deaths by a fault of its own (an abort, recorded by the
    /// fault marker; never a kill from outside) in a row that found its
    /// gate running: a poison input is settled at two instead of
    /// crash-looping the daemon.
    pub gate_crashes: i64,
    /// When publishes of the prepared commit began that never recorded
    /// their end (ms), each stored before any git lock was taken: a lock
    /// made just after one of them, by a life of the daemon that died in
    /// it, is that life's; any other lock is not.
    pub publish_open: Vec<i64>,
    /// When its `deadline` (from attach) runs out: past it the policy is
    /// `expired` and `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    /// Runs of its current gate that could not run and were tried again
    /// (`[daemon] infra_retries`); back to 0 once a gate gives a verdict.
    #[serde(default)]
    pub infra_retries_used: i64,
    /// Its review chain's state, once its first review began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ChainRecord>,
    /// The nudge its last failed gate sends (rendered when the verdict was
    /// judged, the text its `policy:nudge` carries): the nudge task
    /// delivers exactly this, whatever the template is by then. `None`
    /// before a retry, and in rows stored before it was kept. Not sent to
    /// a client (the event carries it).
    #[serde(skip)]
    pub nudge: Option<String>,
    /// The host that owns it (PostgreSQL's `host` column: its sessions'
    /// host); `None` on SQLite (one host). Read only: the store stamps it
    /// at insert, never from this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Set when the stored row does not decode (invalid JSON, or JSON of
    /// the wrong shape, or a spec an attach would refuse, or a plan or
    /// chain missing that its status needs): the first such column and
    /// why. The other fields are then placeholders: the engine only blocks or cancels such a
    /// policy, and the store writes nothing of it but its status, reason
    /// and time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<RowDamage>,
}

#[cfg(any(test, feature = "test-support"))]
impl SessionRow {
    /// A session row for unit tests: `id`, running in `/w`, the agent's,
    /// nothing else set.
    pub fn sample(id: &str) -> SessionRow {
        SessionRow {
            host: None,
            id: id.into(),
            label: None,
            cwd: "/w".into(),
            workspace: "/w".into(),
            state: SessionState::Running,
            turns: 0,
            last_turn_cursor: None,
            last_message: None,
            heartbeat_at: None,
            notify_url: None,
            command: None,
            pid: None,
            created_at: 0,
            updated_at: 0,
            owner: crate::config::Trust::Agent,
            key_digest: None,
            stale_at: None,
            workspace_pin: None,
            damage: None,
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl PolicyRow {
    /// A policy row for unit tests: `id` in `status` over `members`,
    /// nothing else set.
    pub fn sample(id: &str, status: PolicyStatus, members: &[&str]) -> PolicyRow {
        PolicyRow {
            id: id.into(),
            seq: 0,
            spec: AttachInput {
                session_id: members.first().map(|m| m.to_string()),
                session_ids: Some(members.iter().map(|m| m.to_string()).collect()),
                ..AttachInput::default()
            },
            status,
            sessions: members.iter().map(|s| s.to_string()).collect(),
            pending: vec![],
            watch_after: 0,
            retries_used: 0,
            gate_runs: 0,
            verdict: None,
            plan: None,
            prepared: None,
            commit_sha: None,
            reason: None,
            parent_id: None,
            next_id: None,
            created_at: 0,
            updated_at: 0,
            gate_crashes: 0,
            publish_open: Vec::new(),
            deadline_at: None,
            infra_retries_used: 0,
            nudge: None,
            review: None,
            host: None,
            damage: None,
        }
    }
}

/// A stored event, its payload decoded once, into its type, when read.
/// Published (`/v1/events`, SSE, webhooks) as
/// `{cursor, at, type, sessionId, policyId, payload, host?, damage?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Its place in the log: increasing, never reused.
    pub cursor: i64,
    /// When it was stored (ms since the epoch).
    pub at: i64,
    /// The session it is about, if any.
    pub session_id: Option<String>,
    /// The policy it is about, if any.
    pub policy_id: Option<String>,
    /// The event, typed.
    pub event: Event,
    /// The host that wrote it (PostgreSQL's `events.host`, stamped at
    /// insert); `None` on SQLite (one host).
    pub host: Option<String>,
    /// Set when the stored payload does not decode (the event is then
    /// `Unknown` with a `null` payload).
    pub damage: Option<RowDamage>,
}

impl EventRow {
    /// Its kind (`policy:nudge`).
    pub fn kind(&self) -> &str {
        self.event.kind()
    }
}

/// Which events a read of the log returns ([`super::Records::events`]).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Only events with a cursor above this one.
    pub since: i64,
    /// Full names (`session:turn-end`); empty = all.
    pub types: Vec<String>,
    /// Only these sessions' events and those of the policies they are
    /// members of; empty = all.
    pub session_ids: Vec<String>,
    /// Only these policies' events; empty = all.
    pub policy_ids: Vec<String>,
    /// Only the events written by this host (PostgreSQL; a store of one
    /// host has none, and answers nothing for one).
    pub host: Option<String>,
    /// At most this many, oldest first (at least 1).
    pub limit: usize,
}

/// A pending webhook delivery: one event to one URL.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The delivery's own id in the store.
    pub id: i64,
    /// The webhook URL it is sent to.
    pub url: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// The event it delivers.
    pub event: EventRow,
}

/// A standing policy as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandingRow {
    /// Its id, made when it was added.
    pub id: String,
    /// Agents (a session id's part before `:`); empty: every agent.
    pub agents: Vec<String>,
    /// Directories a session's workspace must lie under (canonical where
    /// they existed when added); empty: anywhere.
    pub under: Vec<String>,
    /// The label a session must carry; none: any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The policy (the body of `POST /v1/policies` without its sessions),
    /// kept and shown as the operator gave it; `None` (`null`) when its
    /// stored JSON does not decode (then `damage` says why).
    pub policy: Option<AsGiven<AttachInput>>,
    /// When it was added (ms since the epoch).
    pub created_at: i64,
    /// Set when a stored column does not decode: which and why. Such a
    /// template attaches nothing (the engine says so) and is never written
    /// back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// A registered passkey as stored.
#[derive(Debug, Clone)]
pub struct PasskeyRow {
    /// The credential id, base64url (no padding).
    pub id: String,
    /// The name the operator gave it on the page.
    pub name: String,
    /// The credential (public key, counter, flags), as webauthn-rs keeps
    /// it; `Err` with why when the stored column does not decode (such a
    /// passkey can prove nothing, and is said so).
    pub passkey: Result<Passkey, String>,
    /// When it was registered (ms since the epoch).
    pub created_at: i64,
    /// When it last proved a sign-in (ms since the epoch), if ever.
    pub last_used_at: Option<i64>,
}

/// An operator's action on a policy sent to the host that owns it (the
/// host that received it owns no such policy): the action as its sender
/// encoded it, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRequestRow {
    /// Its number (the order they are carried out in).
    pub id: i64,
    /// The host that owns the policy and carries the action out.
    pub host: String,
    /// The policy it acts on.
    pub policy_id: String,
    /// The action, as its sender encoded it (the engine's type).
    pub request: String,
    /// The host that received it.
    pub from_host: Option<String>,
    /// When it was sent (ms).
    pub created_at: i64,
    /// Where it stands.
    pub state: HostRequestState,
    /// What came of it, as the owner encoded it (once `done`).
    pub outcome: Option<String>,
}

/// Where a [`HostRequestRow`] stands: `open` (sent), `taken` (its owner
/// is carrying it out: its sender can no longer withdraw it), `done` (its
/// outcome recorded) or `withdrawn` (its sender gave up waiting before the
/// owner took it: it never happens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRequestState {
    /// Sent, not taken yet.
    Open,
    /// Being carried out by its owner.
    Taken,
    /// Carried out: its outcome is recorded.
    Done,
    /// Withdrawn by its sender before its owner took it.
    Withdrawn,
}

impl HostRequestState {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            HostRequestState::Open => "open",
            HostRequestState::Taken => "taken",
            HostRequestState::Done => "done",
            HostRequestState::Withdrawn => "withdrawn",
        }
    }

    /// The state stored as `s`, if it is one.
    pub fn parse(s: &str) -> Option<HostRequestState> {
        Some(match s {
            "open" => HostRequestState::Open,
            "taken" => HostRequestState::Taken,
            "done" => HostRequestState::Done,
            "withdrawn" => HostRequestState::Withdrawn,
            _ => return None,
        })
    }
}

/// A host sharing the store, as `gatehost store check` and `GET
/// /v1/hosts` show it (a PostgreSQL store's `hosts` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostStatus {
    /// The host id.
    pub id: String,
    /// Its current claim's fencing number.
    pub fence: i64,
    /// `live` (claimed), `stopped` (released by a clean stop), `stale`
    /// (its lease and grace ran out: the leader found it dead) or `taken`
    /// (stale, and its work moved to another host).
    pub state: String,
    /// Whether its lease runs now, by the database's clock.
    pub live: bool,
    /// When its lease ends (ms since the epoch, the database's clock).
    pub lease_until: i64,
    /// Its last renewal (ms, the database's clock).
    pub heartbeat_at: i64,
    /// The machine and process that claimed it, and its version.
    pub machine: String,
    /// The claiming process.
    pub pid: i64,
    /// The gatehost version that claimed it.
    pub version: String,
    /// Whether it leads the cluster now (its leader's lease runs).
    pub leads: bool,
    /// The host that took its work over (state `taken`).
    pub taken_by: Option<String>,
}

/// A host the leader found dead (`RecordsTx::mark_stale_hosts`): its
/// claim as it was, and its policies not settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleHost {
    /// The host id.
    pub id: String,
    /// Its claim's fencing number.
    pub fence: i64,
    /// The machine and process that held it.
    pub machine: String,
    /// The claiming process.
    pub pid: i64,
    /// Its last renewal (ms, the database's clock).
    pub heartbeat_at: i64,
    /// When its lease ended (ms, the database's clock).
    pub lease_until: i64,
    /// Its policies not settled, by id.
    pub policies: Vec<String>,
}

/// What a takeover moved from a stale host to the one taking it
/// (`RecordsTx::take_over`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOver {
    /// The taking host's fencing number.
    pub fence: i64,
    /// The policies moved that were not settled, by id.
    pub policies: Vec<String>,
    /// The sessions moved, by id.
    pub sessions: Vec<String>,
    /// The routines moved, by id.
    pub routines: Vec<String>,
    /// How many webhook deliveries (still to send) moved.
    pub deliveries: u64,
    /// How many operators' requests (not carried out) moved.
    pub requests: u64,
}

/// The cluster's leadership as one host's attempt found it
/// (`RecordsTx::lead`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This host leads, in this term, its lease renewed.
    Leads {
        /// The term: grows at every change of leader.
        term: i64,
        /// The ms until the first live host's lease plus `grace` ends
        /// (when the leader should look again), if any host is live.
        next_due_ms: Option<i64>,
    },
    /// Another host leads; its lease ends in this many ms.
    Follows {
        /// The leader's host id.
        leader: String,
        /// Ms until the leader's lease ends (by the database's clock).
        left_ms: i64,
    },
}

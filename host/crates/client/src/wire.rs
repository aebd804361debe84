//! The daemon API's bodies, defined once: the server (the `api` module)
//! answers with these types and the client (the `client` module) decodes
//! them, so the two cannot disagree on a field's name or presence.
//!
//! It owns the JSON shape of every route's request and answer (camelCase
//! names, what may be absent or null): the records the API answers with
//! are types of its own (a session, a policy, an event, a routine, a
//! standing policy), which the `api` module converts the store's rows
//! into; where a record's field is already a
//! documented shape of the `model` layer (an attach input, a run report,
//! a typed event) it is that type. It must never hold behaviour
//! (validation belongs to the engine, transport to the client and the
//! API) nor import the store, the engine or the API: the client and the
//! command line build on it alone (its crate, gatehost-client, depends on
//! none of them).

use serde::{Deserialize, Serialize};
use std::time::Duration;

mod diff;
mod records;

pub use diff::{DiffFile, DiffHunk, DiffLine, DiffLineKind, PolicyDiff};

/// `POST /v1/policies` takes an attach input, parsed as the daemon parses
/// it.
pub use crate::model::attach::{AttachInput, Reviewer, parse_input as parse_attach};
/// The payload of the `standing:*` events.
pub use crate::model::event::Standing as StandingEvent;
/// The payloads of the `config:reloaded` and `config:rejected` events.
pub use crate::model::event::{ConfigRejected, ConfigReloaded, Trigger as ReloadTrigger};
/// The request bodies that name a session or a review are the model's
/// inputs, taken by the engine as they are.
pub use crate::model::inputs::{
    DiffSide, LineComment, RegisterInput as RegisterRequest, ReportKind, StandingRequest,
    StartInput as StartRequest,
};
/// `POST /v1/routines` takes a routine; runs are answered as [`Routine`].
pub use crate::model::routine::RoutineSpec as RoutineRequest;
pub use records::{
    Damage, Event, Policy, PolicyStatus, Registered, Routine, RoutineStep, Session, SessionState,
    StandingPolicy, StepStatus,
};

/// The file in the daemon's data directory holding its agent token, which
/// a client on the same machine reads when given none.
pub const AGENT_TOKEN_FILE: &str = "agent.token";
/// The file in the daemon's data directory holding the operator token, read
/// as [`AGENT_TOKEN_FILE`] is.
pub const OPERATOR_TOKEN_FILE: &str = "operator.token";

/// A duration as the API's queries (`wait`, `timeout`) and the command
/// line take it: `1500` (milliseconds), `25s`, `2m`, `1h 5m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("'{text}' is not a duration ({e}); try 1500, 30s, 5m"))
}

/// `GET /v1/standing-policies`: oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandingList {
    /// Every standing policy, oldest added first.
    pub standing_policies: Vec<StandingPolicy>,
}

/// `GET /v1/routines`: the newest runs first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineList {
    /// The newest 200 runs, newest first.
    pub routines: Vec<Routine>,
}

/// `POST /v1/routines/{id}/steps/{label}/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    /// Sent as the step session's next prompt (a permission request the
    /// step escalated is allowed).
    pub response: String,
}

/// `GET /v1/health` when the store answers (HTTP 200); while it does not,
/// the answer is a [`HealthDegraded`] (HTTP 503).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// `true`: the daemon is up and its store answers (the route needs no
    /// token).
    pub ok: bool,
    /// `ok` here (an answer of an older daemon, without it, reads so).
    #[serde(default)]
    pub status: HealthStatus,
    /// The daemon's version (`0.1.0`).
    pub version: String,
    /// The bus's head cursor.
    pub cursor: i64,
    /// The store as this answer found it (reachable).
    #[serde(default)]
    pub store: StoreHealth,
}

/// Whether the daemon can do its work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthStatus {
    /// Up, and its store answers.
    #[default]
    Ok,
    /// Up, but its store does not answer (a database restarting or cut
    /// off): requests that need it answer 503 with `Retry-After`, and the
    /// daemon's work waits, resumed when the store answers again.
    Degraded,
}

/// The store in a health answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    /// Whether the store answered this request's read.
    pub reachable: bool,
    /// Why it did not (the store's error; never a password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Since when (ms since the Unix epoch) the daemon finds its store
    /// unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_since: Option<i64>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            reachable: true,
            error: None,
            unavailable_since: None,
        }
    }
}

/// `GET /v1/health` while the store does not answer: HTTP 503 with
/// `Retry-After`. It is also an API error (its `error`, code
/// `store-unavailable`), so that a client reading errors finds one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthDegraded {
    /// `false`.
    pub ok: bool,
    /// `degraded`.
    pub status: HealthStatus,
    /// The daemon's version.
    pub version: String,
    /// `null`: the bus's head cannot be read without the store.
    pub cursor: Option<i64>,
    /// The store: not reachable, and why.
    pub store: StoreHealth,
    /// The same as an API error: `{code: "store-unavailable", message}`.
    pub error: ErrorDetail,
}

/// `POST /v1/sessions/{id}/report`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    /// What the session reports: a turn's start or end, awaiting input, its
    /// exit, or a heartbeat.
    pub kind: ReportKind,
    /// The agent's words with the report (at a turn-end, its last message),
    /// kept as the session's `lastMessage`; a heartbeat's is not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The answer to a report: the event's cursor (none when the report
/// published nothing, as a heartbeat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reported {
    /// The session reported on (its id as the path named it).
    pub session_id: String,
    /// The cursor of the event the report published (`session:turn-end`,
    /// ...); none for a heartbeat.
    pub cursor: Option<i64>,
    /// For a turn-end, the policies whose verdict on the session's work is
    /// to come: those it counted, and those already judging the session
    /// (empty for other reports, and when no policy watches).
    #[serde(default)]
    pub policies: Vec<String>,
    /// For a turn-end: no live policy has the session as a member, so
    /// nothing gated this stop (the first such stop of a session is also a
    /// `session:ungated` event).
    #[serde(default)]
    pub ungated: bool,
}

/// `POST /v1/sessions/{id}/permissions/{request}`: the operator's answer
/// to an ACP session's escalated permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionAnswer {
    /// `true` allows the requested action, `false` denies it.
    pub allow: bool,
}

/// The answer to [`PermissionAnswer`]: what was answered, to which request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAnswered {
    /// The ACP session whose request was answered.
    pub session_id: String,
    /// The request's id (`perm-N`).
    pub request: String,
    /// Whether the answer allowed it.
    pub allowed: bool,
}

/// `POST /ui/login`: the CSRF token the page sends with its writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiLogin {
    /// The token the page sends in its `x-csrf-token` header with each of
    /// its writes, bound to the login's cookie.
    pub csrf: String,
}

/// `POST /v1/ui/link` (operator; the body may be empty or `null`): where
/// the link lands once spent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiLinkRequest {
    /// A policy whose page the link opens (it must exist); none: the
    /// inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// `POST /v1/ui/link`'s answer: a one-time login link for the web page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiLink {
    /// The link on the address the request was made to.
    pub url: String,
    /// The same link's path (`/ui/login?code=…`).
    pub path: String,
    /// How long the code can be spent (once).
    pub expires_in_seconds: u64,
}

/// `POST /v1/policies/{id}/request-changes`: comments on lines of the
/// diff reviewed as `tree` (the snapshot's), sent to the agent as its nudge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestChanges {
    /// The snapshot's tree id (hex) the comments are on: refused (409
    /// `tree-changed`) when the policy's snapshot is another tree.
    pub tree: String,
    /// The comments, each on one line of one file; they reach the agent as
    /// its nudge.
    pub comments: Vec<LineComment>,
}

/// `POST /v1/tokens/rotate` (operator): which tokens to replace (at least
/// one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateTokens {
    /// Replace the agent token.
    #[serde(default)]
    pub agent: bool,
    /// Replace the operator token.
    #[serde(default)]
    pub operator: bool,
}

/// Its answer, which never holds a token: what was replaced and the files
/// of the daemon that answered where the new tokens are (the cluster's
/// generations on PostgreSQL, where every host takes them up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokensRotated {
    /// `agent`, `operator`: the tokens replaced.
    pub rotated: Vec<String>,
    /// Where the answering daemon keeps the agent token.
    pub agent_token_file: String,
    /// Where it keeps the operator token.
    pub operator_token_file: String,
    /// Whether the tokens are the cluster's (PostgreSQL).
    pub cluster: bool,
    /// The cluster's agent token's generation (PostgreSQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_generation: Option<i64>,
    /// The cluster's operator token's generation (PostgreSQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_generation: Option<i64>,
}

/// `POST /v1/policies/{id}/ack`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// `true` approves the commit; `false` rejects it (the policy is then
    /// `cancelled`).
    pub approve: bool,
    /// The snapshot's tree the approval was given for (hex): refused
    /// (409 `tree-changed`) when the policy's snapshot is another tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// With a reject: the operator's comment, delivered to the agent as
    /// its nudge (`policy:nudge`, and the prompt of a session gatehost
    /// started). Refused (400 `comment`) with an approval, or past
    /// `MAX_REJECT_COMMENT` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// With `[daemon] ack_requires = "passkey"`, an approval's proof: the
    /// answer to a challenge made for approving this policy at this tree
    /// (`POST /v1/passkeys/challenge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passkey: Option<PasskeyAssertion>,
}

/// The answer to a passkey challenge: the ceremony it answers and what
/// `navigator.credentials.get` returned (its `toJSON()`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyAssertion {
    /// The ceremony id of the challenge this answers
    /// ([`PasskeyChallenge::ceremony`]).
    pub ceremony: String,
    /// The browser's assertion, as `navigator.credentials.get` returned it.
    pub credential: webauthn_rs::prelude::PublicKeyCredential,
}

/// What a passkey challenge is for (`POST /v1/passkeys/challenge`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "for", deny_unknown_fields)]
pub enum ChallengeFor {
    /// Approving `policy` as reviewed at `tree` (its snapshot's tree id).
    Approve {
        /// The policy's id.
        policy: String,
        /// Its snapshot's tree id (hex), as the operator reviewed it.
        tree: String,
    },
    /// Registering one more passkey.
    AddPasskey,
    /// Removing passkey `passkey`.
    RemovePasskey {
        /// The passkey's credential id ([`PasskeyInfo::id`]).
        passkey: String,
    },
}

/// A challenge: its ceremony id and the options for the browser
/// (`publicKey`, as `navigator.credentials.get/create` take them, in JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PasskeyChallenge<O> {
    /// The id the answer must name, spent once.
    pub ceremony: String,
    /// The options the browser is given (`publicKey` for
    /// `navigator.credentials.get` or `create`), in JSON.
    pub options: O,
}

/// `POST /v1/passkeys/register`: a new passkey's name, and (once one is
/// registered) an assertion of a registered one for adding a passkey.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyRegister {
    /// The name the operator gives the new passkey (shown in the list).
    pub name: String,
    /// A registered passkey's assertion for adding one (every passkey but
    /// the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertion: Option<PasskeyAssertion>,
    /// The enrolment code `gatehost passkey enrol-code` printed (the first
    /// passkey only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// `POST /v1/passkeys/register/finish`: the answer to a registration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyRegisterFinish {
    /// The ceremony id of the registration challenge this answers.
    pub ceremony: String,
    /// The new credential, as `navigator.credentials.create` returned it.
    pub credential: webauthn_rs::prelude::RegisterPublicKeyCredential,
}

/// `POST /v1/passkeys/{id}/remove`: an assertion for removing it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyRemove {
    /// A registered passkey's answer to a challenge made for removing this one.
    pub assertion: PasskeyAssertion,
}

/// `POST /v1/passkeys/{id}/rename`: its new name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyRename {
    /// 1 to 64 bytes, no control characters.
    pub name: String,
}

/// A registered passkey as the API shows it (never its key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PasskeyInfo {
    /// The credential id, base64url (no padding).
    pub id: String,
    /// The name the operator gave it when it was registered.
    pub name: String,
    /// When it was registered (ms since the Unix epoch).
    pub created_at: i64,
    /// When an assertion of it was last accepted (ms since the Unix epoch);
    /// none: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<i64>,
    /// Why it cannot be used, when its stored credential is damaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

/// `GET /v1/passkeys`: what approving takes, where passkeys work, and the
/// registered ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Passkeys {
    /// `token` or `passkey` (`[daemon] ack_requires`).
    pub ack_requires: String,
    /// The page's origin, where passkeys are registered and used.
    pub origin: String,
    /// The relying party's id (the origin's domain).
    pub rp_id: String,
    /// Why no passkey can be used here, if none can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// The registered passkeys.
    pub passkeys: Vec<PasskeyInfo>,
}

impl Policy {
    /// The policy's commit plan, as far as a person reading it needs
    /// (none before a green gate).
    pub fn plan_view(&self) -> Option<PlanView> {
        self.plan.as_ref().map(|p| PlanView {
            paths: p.paths.clone(),
            require_human_ack: p.require_human_ack,
            diff_summary: p.diff_summary.clone(),
            snapshot: p.snapshot.clone(),
            changed_after_snapshot: p.changed_after_snapshot.clone(),
        })
    }
}

/// A policy's `plan` as the API shows it: what a green gate recorded for
/// the commit, as far as the person who acks needs it (the engine's
/// `CommitPlan` writes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The paths the commit would take, relative to the workspace.
    pub paths: Vec<String>,
    /// The commit waits for a person's approval (`policy ack`) before it is
    /// made.
    #[serde(default)]
    pub require_human_ack: bool,
    /// What the paths change against HEAD (none on plans that lack it).
    #[serde(default)]
    pub diff_summary: Option<DiffSummary>,
    /// The snapshot the gates ran on (commit policies gated on one).
    #[serde(default)]
    pub snapshot: Option<crate::commit::TreeSnapshot>,
    /// The commit paths changed in the workspace since the snapshot.
    #[serde(default)]
    pub changed_after_snapshot: Option<ChangedAfter>,
}

pub use crate::model::plan::{ChangedAfter, DiffSummary, FileCount};

/// `GET /v1/policies/{id}/wait`: the policy, and whether it settled (or
/// awaits an ack) before the wait's timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyWait {
    /// The policy as it is now.
    #[serde(flatten)]
    pub policy: Policy,
    /// `true` when it settled (or awaits an ack) before the timeout; `false`
    /// when the wait timed out.
    pub settled: bool,
}

/// A page of sessions; `nextCursor` is null on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionPage {
    /// This page's sessions, in registration order.
    pub sessions: Vec<Session>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<i64>,
}

/// A page of policies; `nextCursor` is null on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPage {
    /// This page's policies, in the order asked for (attach order, oldest or
    /// newest first).
    pub policies: Vec<Policy>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<i64>,
    /// With `counts=true` (operator): how many policies of each status
    /// the store holds, all of them, whatever the page's filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<std::collections::BTreeMap<String, u64>>,
}

/// `GET /v1/events`: the events, the cursor to continue from, and the
/// oldest cursor retention kept (null when the bus is empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    /// The events after `since`, oldest first.
    pub events: Vec<Event>,
    /// The cursor to read on from: the last event's, or `since` when there is
    /// none.
    pub next_cursor: i64,
    /// The oldest cursor retention kept: a `since` below it missed events.
    pub oldest_cursor: Option<i64>,
}

/// `GET /v1/sessions/{id}/next-event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextEvent {
    /// The session's first event after `since`; none when the wait timed out.
    pub event: Option<Event>,
    /// The cursor to wait on from: the event's, or `since` on a timeout.
    pub next_cursor: i64,
    /// `true` when no event came before the timeout.
    pub timed_out: bool,
}

/// Every error answer: `{"error": {"code", "message", "field"?}}`. The
/// command line prints its own errors with `--json` in this shape too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// An error's content: its code, message and the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A stable, kebab-case name (`invalid`, `unauthorized`, ...).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
    /// The request field (or, on the command line, the option, file or
    /// configuration key) at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What to do about it, when gatehost can tell (command line only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The query of `GET /v1/policies` and `GET /v1/sessions` (`status` and
/// `order` for policies only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageQuery {
    /// The most records on a page (1 to 1000; 50 when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where the page starts: the previous page's `nextCursor` (absent: the
    /// first page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<i64>,
    /// Comma-separated statuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `oldest` (default) or `newest`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
}

/// The query of `GET /v1/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventQuery {
    /// Only events with a cursor above this one (absent: from the start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// Comma-separated event types (`turn-end` or `session:turn-end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<String>,
    /// Comma-separated session ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Comma-separated policy ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// One host id: the events that host wrote (a daemon of a PostgreSQL
    /// store; one of SQLite refuses it, 400 `no-hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The most events on the page (1 to 1000; 50 when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Long-poll this long for the first event (`25s`, `1500`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
}

/// `GET /v1/hosts`: the hosts sharing the daemon's store (a fleet on
/// PostgreSQL, docs/fleet.md), by id; none for a daemon on SQLite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hosts {
    /// The answering daemon's host id (`None`: a daemon of one host).
    pub this: Option<String>,
    /// Every host that ever claimed an id.
    pub hosts: Vec<HostInfo>,
}

/// One host of [`Hosts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostInfo {
    /// Its id.
    pub id: String,
    /// Whether its lease runs now, by the database's clock.
    pub live: bool,
    /// `live` (claimed), `stopped` (released by a clean stop), `stale`
    /// (its lease and grace ran out) or `taken` (stale, its work moved to
    /// `taken_by`).
    pub state: String,
    /// Its claim's fencing number.
    pub fence: i64,
    /// Whether it leads the cluster now.
    #[serde(default)]
    pub leads: bool,
    /// The host that took its work over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_by: Option<String>,
    /// When its lease ends or ended (ms since the epoch).
    pub lease_until: i64,
    /// Its last renewal (ms since the epoch).
    pub heartbeat_at: i64,
    /// The machine it runs on.
    pub machine: String,
    /// Its process id there.
    pub pid: i64,
    /// Its gatehost version.
    pub version: String,
}

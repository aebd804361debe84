//! The `policy attach` input (the agentproto `policy_attach` JSON) and its
//! validation. Everything is checked here, before anything is stored: a
//! refused attach leaves no trace but its error, which names the field.

use super::machine::Input;
use super::{Engine, EngineError, EngineResult};
use crate::anchor::WorkspaceAnchor;
use crate::commit::validate_commit_path;
use crate::config::Trust;
use crate::gate::GateRunner;
use crate::gate::spec::{GateSpec, parse_gate};
use crate::model::event as ev;
use crate::store::SessionRow;
use crate::store::{PolicyRow, PolicyStatus, Tx, now_ms};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod idempotency;
mod review;
mod shape;
pub(super) use idempotency::scoped_key;
pub use review::{DEFAULT_MAX_CYCLES, ReviewInput, Reviewer};
use shape::check_shape;
pub use shape::{check_stored, check_template, not_an_object};

pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const MAX_RETRIES_LIMIT: u32 = 10;
/// How deep `next` chains may nest in one attach.
const MAX_CHAIN: usize = 16;
/// The most bytes of a label (policy or session); it is copied into events.
pub const MAX_LABEL: usize = 256;
/// The longest `deadline`.
pub const MAX_DEADLINE: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);
/// The most bytes of a nudge template (`onFail.nudge`).
pub const MAX_NUDGE: usize = 8 * 1024;
/// The most bytes of a commit message.
pub const MAX_COMMIT_MESSAGE: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Then {
    #[default]
    Emit,
    Commit,
}

/// What a commit policy's gates run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateOn {
    /// A snapshot of the commit paths taken before the gates run, checked
    /// out in a host-owned worktree; the commit is exactly that snapshot.
    Snapshot,
    /// The live workspace, fingerprinted before and after the run (the
    /// operator's opt-out, for gates that need the whole workspace).
    Workspace,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommitInput {
    /// Workspace-relative paths (files or directories) the commit holds.
    pub paths: Vec<String>,
    pub message: String,
    /// Wait for the operator's ack before committing (the agent token
    /// cannot turn it off).
    #[serde(default = "yes")]
    pub require_human_ack: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OnFail {
    /// The nudge template: `{code}`, `{reason}`, `{findings}`, `{output}`
    /// and `{gate}` are filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudge: Option<String>,
    /// Nudges before the policy is blocked (0 to 10, default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_RETRIES_LIMIT))]
    pub max_retries: Option<u32>,
}

/// From which point a policy watches its sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum WatchFrom {
    /// `"latest"` (default): a member that has already ended its turn (idle
    /// after a turn-end, or exited) counts as ended, so a policy attached
    /// just after the agent finished still gates that turn. `"now"`: only
    /// turn-ends after the attach count.
    Named(#[schemars(with = "WatchFromName")] String),
    /// Only session events after this cursor count.
    Cursor(i64),
}

/// `latest` or `now`.
// The names `watchFrom` accepts, for its schema: `validate_at` checks them.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum WatchFromName {
    Latest,
    Now,
}

/// The attach input. Field names and defaults are agentproto's. Its JSON
/// schema (`schemars`) is what `gatehost mcp` shows agents as
/// `policy_attach`'s input: `gate` is described by
/// [`crate::gate::spec::GateSchema`], `attachedBy` is left out (the host
/// sets it from the credential).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachInput {
    /// The session to watch (or `sessionIds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The sessions to watch (fan-in: the gate runs once all ended their
    /// turn); wins over `sessionId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_ids: Option<Vec<String>>,
    /// A name for people (at most 256 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The gate run at turn-end: a shell, judge or wasm gate object, or a
    /// list of them (run cheapest first); none passes at turn-end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::gate::spec::GateSchema>")]
    pub gate: Option<Value>,
    /// What a green gate does: `emit` an event (default) or `commit`.
    #[serde(default)]
    pub then: Then,
    /// With `then: "commit"`: the paths to commit and the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitInput>,
    /// The nudge sent to the agent when the gate fails, and how many times.
    #[serde(default)]
    pub on_fail: OnFail,
    /// A policy attached once this one is done (its sessions default to
    /// this one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Box<AttachInput>>,
    /// Which turn-ends count: `latest` (default: a turn that already ended
    /// counts), `now` (only later ones), or an event cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_from: Option<WatchFrom>,
    /// What the gates of a commit policy judge (default: a snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_on: Option<GateOn>,
    /// How long the policy may take from its attach ("30m", "2h"; at
    /// least 1s, at most 365 days): past it, it is `expired` and
    /// `blocked`, whatever it waits on. None: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// A review chain: once the gate passes, `reviewer` reviews the change
    /// (SHIP goes on to `then`; BLOCK nudges `repairer` with the findings,
    /// and its next turn is gated and reviewed again), at most
    /// `maxCycles` times before the policy is blocked and a person told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewInput>,
    /// Who attached the policy: set by the host from the credential (a
    /// value in the body is overwritten). The gates of an agent's policy
    /// are held to the allowlist's argument rules, at attach and at every
    /// run.
    #[serde(default)]
    #[schemars(skip)]
    pub attached_by: Trust,
}

impl AttachInput {
    /// What the gates judge: a snapshot for a commit policy unless the
    /// operator said otherwise; the workspace for any other.
    pub fn gate_on(&self) -> GateOn {
        match (self.then, self.gate_on) {
            (Then::Commit, Some(g)) => g,
            (Then::Commit, None) => GateOn::Snapshot,
            (Then::Emit, _) => GateOn::Workspace,
        }
    }

    /// Records who attached this policy and its whole `next` chain.
    pub fn set_attached_by(&mut self, trust: Trust) {
        self.attached_by = trust;
        if let Some(next) = self.next.as_deref_mut() {
            next.set_attached_by(trust);
        }
    }

    /// The members, in order, the list winning over the single id.
    pub fn members(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let given: Vec<&String> = match &self.session_ids {
            Some(list) => list.iter().collect(),
            None => self.session_id.iter().collect(),
        };
        for id in given {
            if !out.contains(id) {
                out.push(id.clone());
            }
        }
        out
    }

    /// The `deadline` as a duration; an error is the message.
    pub fn deadline_duration(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(text) = &self.deadline else {
            return Ok(None);
        };
        let d = humantime::parse_duration(text.trim())
            .map_err(|e| format!("'{text}' is not a duration ({e}); try \"30m\", \"2h\""))?;
        if d < std::time::Duration::from_secs(1) || d > MAX_DEADLINE {
            return Err(format!("'{text}' must be between 1s and 365days"));
        }
        Ok(Some(d))
    }

    pub fn max_retries(&self) -> u32 {
        self.on_fail.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    /// The gates to run, parsed (validated at attach, so errors here mean
    /// a store written by something else).
    pub fn gates(&self) -> Result<Vec<GateSpec>, EngineError> {
        parse_gates(self.gate.as_ref(), "gate")
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> EngineError {
    EngineError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

fn parse_gates(gate: Option<&Value>, at: &str) -> Result<Vec<GateSpec>, EngineError> {
    let to_err = |e: crate::gate::SpecError| invalid(e.field, e.message);
    match gate {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(invalid(
                    at,
                    "an empty list holds no gate (omit `gate` to pass at turn-end)",
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, v)| parse_gate(v.clone(), &format!("{at}[{i}]")).map_err(to_err))
                .collect()
        }
        Some(v) => parse_gate(v.clone(), at).map(|g| vec![g]).map_err(to_err),
    }
}

/// Parses the JSON body of an attach.
pub fn parse_input(value: Value) -> Result<AttachInput, EngineError> {
    if let Some(at) = not_an_object(&value) {
        return Err(invalid(at, "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        invalid(
            if path == "." {
                "policy".to_string()
            } else {
                path
            },
            e.into_inner().to_string(),
        )
    })
}

/// Validates `input` (and its `next` chain), filling the members of
/// chained policies from their parent. `lookup` finds a session.
pub fn validate(
    input: &mut AttachInput,
    runner: &GateRunner,
    lookup: &dyn Fn(&str) -> Result<Option<SessionRow>, EngineError>,
) -> Result<(), EngineError> {
    review::check_depth(input, runner.config().daemon.max_chain_depth)?;
    validate_at(input, runner, lookup, "", None, 0)
}

fn validate_at(
    input: &mut AttachInput,
    runner: &GateRunner,
    lookup: &dyn Fn(&str) -> Result<Option<SessionRow>, EngineError>,
    at: &str,
    parent_members: Option<&[String]>,
    depth: usize,
) -> Result<(), EngineError> {
    let gates = check_shape(input, at, parent_members.is_some(), depth)?;
    let f = |name: &str| format!("{at}{name}");
    let mut members = input.members();
    if members.is_empty()
        && let Some(p) = parent_members
    {
        members = p.to_vec();
    }
    let field = if input.session_ids.is_some() {
        "sessionIds"
    } else {
        "sessionId"
    };
    let mut sessions = Vec::new();
    for id in &members {
        match lookup(id)? {
            Some(s) if s.damage.is_some() => {
                let why = s.damage.as_ref().map(ToString::to_string);
                return Err(invalid(
                    f(field),
                    format!(
                        "session '{id}': {} (register it again under another id)",
                        why.unwrap_or_default()
                    ),
                ));
            }
            Some(s) => sessions.push(s),
            None => {
                return Err(invalid(
                    f(field),
                    format!("unknown session '{id}' (register it first)"),
                ));
            }
        }
    }
    let Some(first) = sessions.first() else {
        return Err(invalid(
            f("sessionId"),
            "name the session (sessionId) or sessions (sessionIds) to watch",
        ));
    };
    // Normalise: the list of members, deduplicated, always stored.
    input.session_ids = Some(members.clone());
    input.session_id = members.first().cloned();
    let workspace = &first.workspace;
    // Members in several workspaces (fan-in across worktrees): the gates
    // run in each, so each must admit them; one commit is of one
    // repository.
    let mut workspaces: Vec<&str> = Vec::new();
    for s in &sessions {
        if !workspaces.contains(&s.workspace.as_str()) {
            workspaces.push(&s.workspace);
        }
    }
    if input.then == Then::Commit && workspaces.len() > 1 {
        return Err(invalid(
            f("sessionIds"),
            format!(
                "a commit policy's members must work in one workspace (one commit is of one repository); these work in {}",
                workspaces.join(", ")
            ),
        ));
    }
    if !gates.is_empty() {
        for ws in &workspaces {
            let anchor = WorkspaceAnchor::open(std::path::Path::new(ws))
                .map_err(|e| invalid(f("sessionId"), format!("workspace {ws}: {e}")))?;
            for (i, g) in gates.iter().enumerate() {
                let name = if gates.len() == 1 && !input.gate.as_ref().is_some_and(Value::is_array)
                {
                    f("gate")
                } else {
                    f(&format!("gate[{i}]"))
                };
                runner
                    .preflight(g, &anchor, input.attached_by)
                    .map_err(|m| invalid(name, m))?;
            }
        }
    }
    if let (Then::Commit, Some(c)) = (input.then, &mut input.commit) {
        let mut normalised = Vec::new();
        for (i, p) in c.paths.iter().enumerate() {
            let n = validate_commit_path(p)
                .map_err(|e| invalid(f(&format!("commit.paths[{i}]")), e.to_string()))?;
            if !normalised.contains(&n) {
                normalised.push(n);
            }
        }
        c.paths = normalised;
        // A `.git` directory, or a linked worktree's `.git` file whose
        // directories are proven the repository's own.
        if let Err(e) = crate::commit::GitDirs::of(std::path::Path::new(workspace)) {
            return Err(invalid(
                f("commit"),
                format!(
                    "the workspace {workspace} is not a git repository gatehost commits to: {e}"
                ),
            ));
        }
    }
    if let Some(r) = &input.review {
        match r.reviewer(at)? {
            Reviewer::Session { id, .. } => match lookup(&id)? {
                Some(s) if s.damage.is_none() => {}
                _ => {
                    return Err(invalid(
                        f("review.reviewer.session"),
                        format!("unknown session '{id}' (register it first)"),
                    ));
                }
            },
            Reviewer::Judge(g) => {
                let anchor = WorkspaceAnchor::open(std::path::Path::new(workspace))
                    .map_err(|e| invalid(f("sessionId"), format!("workspace {workspace}: {e}")))?;
                runner
                    .preflight(&g, &anchor, input.attached_by)
                    .map_err(|m| invalid(f("review.reviewer"), m))?;
            }
        }
        if let Some(rep) = &r.repairer
            && !members.contains(rep)
        {
            return Err(invalid(
                f("review.repairer"),
                format!(
                    "'{rep}' is not one of the policy's sessions (the repairer's turn-end is gated: it must be a member)"
                ),
            ));
        }
    }
    if let Some(next) = input.next.as_deref_mut() {
        validate_at(next, runner, lookup, &f("next."), Some(&members), depth + 1)?;
    }
    Ok(())
}

impl Engine {
    /// Attaches a policy: validates everything, stores it with its
    /// `policy:attached` event, and queues its gate at once when its
    /// members have already ended their turn (`watchFrom: "latest"`).
    /// Attaches a policy written by `trust` (the credential that sent it).
    ///
    /// The checks (a plugin read, hashed and compiled; an adapter found)
    /// run on the blocking pool, never on a thread that serves requests,
    /// and are bounded by `[daemon] attach_timeout_ms`: past it the answer
    /// is `Unavailable` and nothing is stored, even when the checks finish
    /// later.
    ///
    /// With the agent token, every session it watches needs its key among
    /// the caller's (`engine::keys`).
    ///
    /// With an idempotency key (the client's, scoped to its credential):
    /// the first attach with it stores the policy and the key in one
    /// transaction; a retry with the same key and the same request answers
    /// that policy and attaches nothing; the same key with another request
    /// is a conflict.
    pub async fn attach(
        &self,
        mut body: Value,
        caller: super::keys::Caller,
        key: Option<String>,
    ) -> EngineResult<PolicyRow> {
        let trust = caller.trust;
        let key = idempotency::client_key(key, &mut body, trust)?;
        if let Some((k, digest)) = &key
            && let Some(p) = self.replayed(k, digest)?
        {
            return Ok(p);
        }
        let limit = self.runner().config().daemon.attach_timeout;
        let engine = self.clone();
        let checks = tokio::task::spawn_blocking(move || {
            let mut input = parse_input(body)?;
            input.set_attached_by(trust);
            let store = &engine.inner.store;
            // Every session the policy (or its chain) watches, and so may
            // nudge, must be the caller's: its key, or the operator token.
            validate(&mut input, &engine.runner(), &|id| {
                let s = store.session(id)?;
                if let Some(s) = &s {
                    caller.check(s)?;
                }
                Ok(s)
            })?;
            Ok::<_, EngineError>(input)
        });
        let input = match tokio::time::timeout(limit, checks).await {
            Ok(Ok(checked)) => checked?,
            Ok(Err(e)) => {
                return Err(EngineError::Unavailable {
                    code: "attach-failed",
                    message: format!("the attach checks stopped: {e}"),
                });
            }
            Err(_) => {
                tracing::warn!(
                    limit = %crate::gate::human_duration(limit),
                    "an attach was refused: its checks (a plugin loading?) outlasted [daemon] attach_timeout_ms"
                );
                return Err(EngineError::Unavailable {
                    code: "attach-timeout",
                    message: format!(
                        "the gate could not be checked within {} ([daemon] attach_timeout_ms; a plugin still loading?): nothing was attached, try again",
                        crate::gate::human_duration(limit)
                    ),
                });
            }
        };
        let (policy, fresh) = self.write(|tx| {
            if let Some((k, _)) = &key {
                // Another attach with this key won the race meanwhile.
                if let Some((id, _)) = tx.idempotent(k)? {
                    let p = tx.policy(&id)?.ok_or_else(|| {
                        EngineError::NotFound(format!("no policy '{id}' (idempotency key)"))
                    })?;
                    return Ok((p, false));
                }
            }
            let p = self.insert_policy(tx, &input, None)?;
            if let Some((k, digest)) = &key {
                tx.put_idempotent(k, digest, &p.id)?;
            }
            Ok((p, true))
        })?;
        if fresh && policy.status == PolicyStatus::Queued {
            self.schedule_gate(&policy.id);
        }
        Ok(policy)
    }

    /// The policy an earlier attach with this key made, when the request
    /// is the same; a conflict when it is not.
    fn replayed(&self, key: &str, digest: &str) -> EngineResult<Option<PolicyRow>> {
        let found = self.write(|tx| Ok(tx.idempotent(key)?))?;
        let Some((id, earlier)) = found else {
            return Ok(None);
        };
        if earlier != digest {
            return Err(EngineError::Conflict {
                code: "idempotency-key-reused",
                message: format!(
                    "this idempotency key already attached {id} with another request; use a new key for a new policy"
                ),
            });
        }
        tracing::info!(policy = %id, "attach replayed for its idempotency key");
        Ok(Some(self.policy(&id)?))
    }

    /// Inserts a validated policy in `tx`, publishing `policy:attached`
    /// (and `policy:queued` when nothing is left to wait for).
    pub(super) fn insert_policy(
        &self,
        tx: &mut Tx<'_>,
        input: &AttachInput,
        parent: Option<&str>,
    ) -> EngineResult<PolicyRow> {
        let members = input.members();
        let head = tx.head_cursor()?;
        let (watch_after, count_ended) = match &input.watch_from {
            None => (head, true),
            Some(WatchFrom::Named(n)) if n == "latest" => (head, true),
            Some(WatchFrom::Named(_)) => (head, false),
            Some(WatchFrom::Cursor(c)) => (*c, false),
        };
        if watch_after > head {
            return Err(EngineError::Invalid {
                field: "watchFrom".into(),
                message: format!(
                    "cursor {watch_after} is beyond the newest event ({head}): nothing would ever be watched"
                ),
            });
        }
        let mut pending = Vec::new();
        let (mut ended_any, mut exited) = (false, Vec::new());
        for id in &members {
            let s = tx.session(id)?.ok_or_else(|| EngineError::Invalid {
                field: "sessionId".into(),
                message: format!("unknown session '{id}'"),
            })?;
            let ended = match s.last_turn_cursor {
                Some(c) if c > watch_after => true,
                Some(_) if count_ended => matches!(
                    s.state,
                    crate::store::SessionState::Idle | crate::store::SessionState::Exited
                ),
                _ => false,
            };
            if ended {
                ended_any = true;
            } else if s.state == crate::store::SessionState::Exited {
                // No turn-end can come from it: never waited for.
                exited.push(id.clone());
            } else {
                pending.push(id.clone());
            }
        }
        if parent.is_none() && !ended_any && pending.is_empty() && !exited.is_empty() {
            return Err(EngineError::Conflict {
                code: "exited",
                message: format!(
                    "every member has exited ({}) and none ended a turn after watchFrom: the policy could never gate",
                    exited.join(", ")
                ),
            });
        }
        let now = now_ms();
        let spec = serde_json::to_value(input).unwrap_or(Value::Null);
        let mut p = PolicyRow {
            id: format!("pol_{}", uuid::Uuid::new_v4().simple()),
            seq: 0,
            spec,
            status: PolicyStatus::Watching,
            sessions: members,
            pending,
            watch_after,
            retries_used: 0,
            gate_runs: 0,
            verdict: None,
            plan: None,
            prepared: None,
            commit_sha: None,
            reason: None,
            parent_id: parent.map(str::to_string),
            next_id: None,
            created_at: now,
            updated_at: now,
            gate_crashes: 0,
            publish_open: Vec::new(),
            deadline_at: input
                .deadline_duration()
                .ok()
                .flatten()
                .map(|d| now.saturating_add(d.as_millis() as i64)),
            infra_retries_used: 0,
            review: None,
            damage: None,
        };
        tx.insert_policy(&mut p)?;
        let attached = ev::Attached {
            then: match input.then {
                Then::Emit => "emit",
                Then::Commit => "commit",
            }
            .to_string(),
            label: input.label.clone(),
            watch_after,
            pending: p.pending.clone(),
            parent_id: parent.map(str::to_string),
        };
        self.policy_event(tx, ev::PolicyChange::Attached(attached), &p)?;
        if p.pending.is_empty() {
            self.transition(
                tx,
                &mut p,
                Input::TurnEnd {
                    more_pending: false,
                },
                |_| {
                    Some(ev::PolicyChange::queued("every member had already ended its turn").into())
                },
            )?;
            if p.status == PolicyStatus::Queued && !self.supervising() {
                self.wait_paused(tx, &p)?;
            }
        }
        Ok(p)
    }
}

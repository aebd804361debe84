//! The `policy attach`: the input (typed in `model::attach`) validated
//! against the sessions, the runner and the workspace, and stored.
//! Everything is checked here, before anything is stored: a refused attach
//! leaves no trace but its error, which names the field.
//!
//! It owns the checks and the new policy's first row and events
//! (`Policies::attach`, `insert_policy`). It must never store a policy it
//! refused, nor let a caller watch (and so nudge) a session not its own.

use super::Policies;
use super::machine::{Input, Task, drives};
use super::{EngineError, EngineResult};
use crate::anchor::WorkspaceAnchor;
use crate::commit::validate_commit_path;
use crate::config::Trust;
use crate::gate::GateRunner;
use crate::model::attach::{SessionReviewer, check_depth, check_shape};
use crate::model::event as ev;
use crate::store::SessionRow;
use crate::store::{PolicyRow, PolicyStatus, Tx, now_ms};

pub use crate::model::attach::{
    AttachInput, ClientKey, CommitInput, DEFAULT_MAX_CYCLES, DEFAULT_MAX_RETRIES, GateOn,
    MAX_LABEL, MAX_RETRIES_LIMIT, OnFail, ReviewInput, Reviewer, Then, WatchFrom, WatchName,
    check_stored, check_template, not_an_object, parse_input,
};

/// An idempotency key as stored: scoped to the credential that sent it
/// (two credentials never share a key).
pub(in crate::engine) fn scoped_key(trust: Trust, key: &str) -> String {
    format!("{trust:?}:{key}")
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> EngineError {
    EngineError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Validates `input` (and its `next` chain), filling the members of
/// chained policies from their parent. `lookup` finds a session.
pub fn validate(
    input: &mut AttachInput,
    runner: &GateRunner,
    lookup: &dyn Fn(&str) -> Result<Option<SessionRow>, EngineError>,
) -> Result<(), EngineError> {
    check_depth(input, runner.config().daemon.max_chain_depth)?;
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
    check_shape(input, at, parent_members.is_some(), depth)?;
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
    let gates = input.gates();
    if !gates.is_empty() {
        for ws in &workspaces {
            let anchor = WorkspaceAnchor::open(std::path::Path::new(ws))
                .map_err(|e| invalid(f("sessionId"), format!("workspace {ws}: {e}")))?;
            for (i, g) in gates.iter().enumerate() {
                let name = f(&input.gate_field(i));
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
        match &r.reviewer {
            Reviewer::Session(SessionReviewer { session: id, .. }) => match lookup(id)? {
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
                    .preflight(g, &anchor, input.attached_by)
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

impl Policies {
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
    /// With an idempotency key (the client's, scoped to its credential,
    /// and the digest of its request, `model::attach::client_key`): the
    /// first attach with it stores the policy and the key in one
    /// transaction; a retry with the same key and the same request answers
    /// that policy and attaches nothing; the same key with another request
    /// is a conflict.
    pub(crate) async fn attach(
        &self,
        mut input: AttachInput,
        caller: super::keys::Caller,
        key: Option<ClientKey>,
    ) -> EngineResult<PolicyRow> {
        let trust = caller.trust;
        let key = key.map(|k| (scoped_key(trust, &k.key), k.digest));
        if let Some((k, digest)) = &key
            && let Some(p) = self.replayed(k, digest)?
        {
            return Ok(p);
        }
        let limit = self.engine().runner().config().daemon.attach_timeout;
        let engine = self.engine();
        let checks = tokio::task::spawn_blocking(move || {
            input.set_attached_by(trust);
            let store = engine.store();
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
        let (policy, fresh) = self.engine().write(|tx| {
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
        if fresh && drives(Task::Slot, policy.status) {
            self.schedule_gate(&policy.id);
        }
        Ok(policy)
    }

    /// The policy an earlier attach by `trust` with this key made, when
    /// the request is the same; a conflict when it is not; `None` when the
    /// key is new. (The API asks it of a body that does not parse, so a
    /// reused key answers as it did before the body was checked.)
    pub(crate) fn attach_replayed(
        &self,
        trust: Trust,
        key: &ClientKey,
    ) -> EngineResult<Option<PolicyRow>> {
        self.replayed(&scoped_key(trust, &key.key), &key.digest)
    }

    /// The policy an earlier attach with this (scoped) key made, when the
    /// request is the same; a conflict when it is not.
    fn replayed(&self, key: &str, digest: &str) -> EngineResult<Option<PolicyRow>> {
        let engine = self.engine();
        let found = engine.write(|tx| Ok(tx.idempotent(key)?))?;
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
        Ok(Some(engine.policy(&id)?))
    }

    /// Inserts a validated policy in `tx`, publishing `policy:attached`
    /// (and `policy:queued` when nothing is left to wait for).
    pub(super) fn insert_policy(
        &self,
        tx: &mut Tx<'_>,
        input: &AttachInput,
        parent: Option<&str>,
    ) -> EngineResult<PolicyRow> {
        let engine = self.engine();
        let members = input.members();
        let head = tx.head_cursor()?;
        let (watch_after, count_ended) = match &input.watch_from {
            None => (head, true),
            Some(WatchFrom::Named(WatchName::Latest)) => (head, true),
            Some(WatchFrom::Named(WatchName::Now)) => (head, false),
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
        let mut p = PolicyRow {
            // What the store stamps the row with (none on SQLite).
            host: engine.store().host().map(|(h, _)| h),
            id: format!("pol_{}", uuid::Uuid::new_v4().simple()),
            seq: 0,
            spec: input.clone(),
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
            nudge: None,
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
            if drives(Task::Slot, p.status) && !engine.supervising() {
                engine.settings().wait_paused(tx, &p)?;
            }
        }
        Ok(p)
    }
}

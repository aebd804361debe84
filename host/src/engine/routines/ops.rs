//! The routines' operations: start a run, read runs, the operator's
//! cancel and resolve (the tick and the recovery at start are `tick`'s).
//! Each is one transaction through the loop's `feed`, its actions run
//! after the commit. It must never change a run's state but through
//! `feed`.

use super::super::routine::{
    self, RoutineSpec, RoutineSpecExt as _, RunInput, RunState, SessionSpec,
};
use super::super::sessions::invalid;
use super::super::{EngineError, EngineResult, services::Routines};
use super::{Context, RoutineEvent, RoutineView, Run};
use crate::model::event::{Event, RoutineEvent as RoutineEventOf, RoutineKind};
use crate::store::{RoutineRow, RoutineStepRow, StepStatus, now_ms};

impl Routines {
    /// Starts a run of `spec` (operator only; the API checks). Refused:
    /// a spec that does not validate, a step whose `policy` is not a
    /// policy body (its gates are checked when it is attached, at the
    /// step's start: a policy refused then fails the step, said), an ACP
    /// step whose `cwd` is not an absolute directory.
    pub(crate) fn start_routine(&self, spec: RoutineSpec) -> EngineResult<RoutineView> {
        self.start_routine_keyed(spec, None)
    }

    /// [`Routines::start_routine`] with an idempotency key (a client's
    /// `Idempotency-Key`): a key seen before answers the run it started,
    /// whatever became of it, and starts nothing (a retry whose first
    /// answer was lost); the same key with another spec is a conflict.
    /// The key is recorded in the transaction that stores the run.
    pub(crate) fn start_routine_keyed(
        &self,
        spec: RoutineSpec,
        key: Option<String>,
    ) -> EngineResult<RoutineView> {
        if let Some(k) = &key
            && (k.is_empty() || k.len() > MAX_KEY || k.chars().any(char::is_control))
        {
            return Err(invalid(
                "Idempotency-Key",
                format!("1 to {MAX_KEY} bytes with no control character"),
            ));
        }
        let digest = match &key {
            Some(_) => Some(spec_digest(&spec)?),
            None => None,
        };
        if let (Some(k), Some(d)) = (&key, &digest)
            && let Some(run) = self.routine_of_key(k, d)?
        {
            return Ok(run);
        }
        spec.validate()
            .map_err(|e| invalid("steps", e.to_string()))?;
        for s in &spec.steps {
            if let Some(policy) = &s.policy {
                policy.for_session("the-steps-session").map_err(|e| {
                    invalid("policy", format!("step {:?}: its policy: {e}", s.label))
                })?;
            }
            if let SessionSpec::Acp { cwd, .. } = &s.session {
                super::super::sessions::locate(cwd, None)
                    .map(drop)
                    .map_err(|e| invalid("cwd", format!("step {:?}: {e}", s.label)))?;
            }
        }
        let now = now_ms();
        let id = format!("rt_{}", uuid::Uuid::new_v4().simple());
        let row = RoutineRow {
            id: id.clone(),
            label: spec.label.clone(),
            spec: Some(spec.clone()),
            state: Some(routine::initial()),
            phase: routine::initial().name().to_string(),
            step_session: None,
            deadline_at: None,
            pending_request: None,
            reason: None,
            created_at: now,
            updated_at: now,
            damage: None,
            steps: spec
                .steps
                .iter()
                .enumerate()
                .map(|(index, s)| RoutineStepRow {
                    index,
                    label: s.label.clone(),
                    status: StepStatus::Pending,
                    session_id: None,
                    restarts: 0,
                    response: None,
                    started_at: None,
                    ended_at: None,
                })
                .collect(),
        };
        let (actions, view) = self.engine().write(|tx| {
            if let (Some(k), Some(d)) = (&key, &digest) {
                // Another start with this key won the race: its run.
                if let Some((existing, _)) = tx.routine_by_key(k)? {
                    let row = tx
                        .routine(&existing)?
                        .ok_or_else(|| EngineError::NotFound(format!("no routine '{existing}'")))?;
                    return Ok((Vec::new(), row));
                }
                tx.insert_routine_key(k, &id, d)?;
            }
            tx.insert_routine(&row)?;
            let mut run = Run {
                row: row.clone(),
                spec: spec.clone(),
                state: routine::initial(),
            };
            self.routine_event(
                tx,
                RoutineKind::Started,
                &run,
                RoutineEvent {
                    message: Some(format!("{} steps", spec.steps.len())),
                    ..RoutineEvent::default()
                },
            )?;
            let actions = self.feed_check(tx, &mut run, 0)?;
            Ok((actions, run.row))
        })?;
        tracing::info!(routine = %id, steps = spec.steps.len(), "a routine started");
        self.perform_routine(actions);
        Ok(self.routine(&view.id).unwrap_or(view))
    }

    /// The run `key` started, if it did: the same spec (by `digest`), or a
    /// conflict naming the run.
    fn routine_of_key(&self, key: &str, digest: &str) -> EngineResult<Option<RoutineView>> {
        let found = self.engine().write(|tx| Ok(tx.routine_by_key(key)?))?;
        let Some((id, stored)) = found else {
            return Ok(None);
        };
        if stored != digest {
            return Err(EngineError::Conflict {
                code: "idempotency-key-reused",
                message: format!(
                    "the Idempotency-Key {key:?} started routine {id} with another spec; use a new key for a new run"
                ),
            });
        }
        tracing::info!(routine = %id, key, "a routine start repeated with its key: the run it started");
        self.routine(&id).map(Some)
    }

    /// Starts a run of `spec` for `caller`: the operator may start any;
    /// the agent token only a run whose every step runs in an existing
    /// session it holds the key of (starting an agent is the operator's)
    /// and carries no step policy (a policy the daemon attaches for a run
    /// is the operator's; an agent attaches its own with `policy_attach`).
    pub(crate) fn start_routine_as(
        &self,
        spec: RoutineSpec,
        key: Option<String>,
        caller: &super::super::keys::Caller,
    ) -> EngineResult<RoutineView> {
        if caller.trust != crate::config::Trust::Operator {
            for s in &spec.steps {
                if s.policy.is_some() {
                    return Err(EngineError::Forbidden {
                        code: "operator-only",
                        message: format!(
                            "step {:?}: a step's policy is attached for the operator; with the agent token, leave it out and attach your own policy to the session (policy_attach)",
                            s.label
                        ),
                    });
                }
                self.own_step_session(&s.label, &s.session, caller)?;
            }
        }
        self.start_routine_keyed(spec, key)
    }

    /// The agent token may act on a step only when it runs in an existing
    /// session whose key it holds.
    fn own_step_session(
        &self,
        label: &str,
        session: &SessionSpec,
        caller: &super::super::keys::Caller,
    ) -> EngineResult<()> {
        let SessionSpec::Existing(id) = session else {
            return Err(EngineError::Forbidden {
                code: "operator-only",
                message: format!(
                    "step {label:?} starts an agent: starting agents is the operator's (with the agent token, every step runs in an existing session of yours)"
                ),
            });
        };
        let s = self
            .engine()
            .store()
            .session(id)?
            .ok_or_else(|| invalid("session", format!("step {label:?}: no session {id:?}")))?;
        caller.check(&s)?;
        // A routine answers its step's session's permission requests
        // (`auto-allow`): for a session the operator started or
        // registered, only the operator's routines may.
        if s.owner == crate::config::Trust::Operator {
            return Err(EngineError::Forbidden {
                code: "session-owned-by-operator",
                message: format!(
                    "step {label:?} runs in session {id:?}, which the operator started or registered: only the operator's routines run in (and answer for) it"
                ),
            });
        }
        Ok(())
    }

    /// Cancels run `id` for `caller`: the operator any run, the agent
    /// token a run whose every step runs in an existing session it holds
    /// the key of.
    pub(crate) fn cancel_routine_as(
        &self,
        id: &str,
        caller: &super::super::keys::Caller,
    ) -> EngineResult<RoutineView> {
        if caller.trust == crate::config::Trust::Operator {
            return self.cancel_routine(id, "the operator");
        }
        let run = Run::decode(self.routine(id)?)?;
        for s in &run.spec.steps {
            self.own_step_session(&s.label, &s.session, caller)?;
        }
        self.cancel_routine(id, "the agent whose sessions it runs in")
    }

    pub(crate) fn routine(&self, id: &str) -> EngineResult<RoutineView> {
        self.engine()
            .store()
            .routine(id)?
            .map(flag_damage)
            .ok_or_else(|| EngineError::NotFound(format!("no routine '{id}'")))
    }

    /// The newest runs, at most `limit`.
    pub(crate) fn routines(&self, limit: usize) -> EngineResult<Vec<RoutineView>> {
        Ok(self
            .engine()
            .store()
            .routines(limit)?
            .into_iter()
            .map(flag_damage)
            .collect())
    }

    /// A run whose stored row does not decode (not JSON, or JSON of the
    /// wrong shape) cannot be fed a `Cancel`: it is ended as cancelled in
    /// place (its state and phase replaced, its spec left as it was), with
    /// `routine:cancelled` saying so, and the agents its running steps
    /// started are stopped. `None`: the run decodes (cancelled the usual
    /// way).
    fn cancel_damaged_routine(&self, id: &str, by: &str) -> EngineResult<Option<RoutineView>> {
        let engine = self.engine();
        let mut stop = Vec::new();
        let view = engine.write(|tx| {
            stop.clear();
            let row = tx
                .routine(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no routine '{id}'")))?;
            let damage = match Run::decode(row.clone()) {
                Ok(_) => return Ok(None),
                Err(e) => row.damage.clone().unwrap_or_else(|| e.to_string()),
            };
            if row.phase == RunState::Cancelled.name() {
                return Err(EngineError::Conflict {
                    code: "routine-finished",
                    message: format!("routine {id} is already cancelled"),
                });
            }
            for s in &row.steps {
                if let Some(sid) = &s.session_id
                    && s.status == StepStatus::Running
                    && tx.session(sid)?.is_some_and(|s| s.command.is_some())
                {
                    stop.push(sid.clone());
                }
            }
            let reason = format!("cancelled by {by}; its stored row was damaged ({damage})");
            tx.end_damaged_routine(
                id,
                RunState::Cancelled,
                RunState::Cancelled.name(),
                &reason,
                now_ms(),
            )?;
            tracing::warn!(routine = id, %damage, "a damaged routine was cancelled in place");
            let cancelled = RoutineEvent {
                routine_id: id.to_string(),
                state: RunState::Cancelled.name().to_string(),
                reason: Some(reason),
                damaged: true,
                ..RoutineEvent::default()
            };
            let event = Event::Routine(RoutineEventOf {
                kind: RoutineKind::Cancelled,
                payload: cancelled,
            });
            engine.append(tx, &event, None, None)?;
            Ok(tx.routine(id)?)
        })?;
        for session in stop {
            engine.agents().stop_acp(&session);
        }
        Ok(view.map(flag_damage))
    }

    /// The operator cancels a run; its step's agent, if the run started
    /// it, is stopped. A finished run is a conflict.
    pub(crate) fn cancel_routine(&self, id: &str, by: &str) -> EngineResult<RoutineView> {
        if let Some(view) = self.cancel_damaged_routine(id, by)? {
            return Ok(view);
        }
        self.operator_input(
            id,
            None,
            RunInput::Cancel,
            Some(format!("cancelled by {by}")),
        )
    }

    /// The operator answers step `step`'s escalation with `response` (sent
    /// as the step session's next prompt; for a permission request, it is
    /// allowed). A run not escalated on that step is a conflict.
    pub(crate) fn resolve_routine(
        &self,
        id: &str,
        step: &str,
        response: String,
    ) -> EngineResult<RoutineView> {
        self.operator_input(id, Some((step, response)), RunInput::Resolved, None)
    }

    fn operator_input(
        &self,
        id: &str,
        resolve: Option<(&str, String)>,
        input: RunInput,
        why: Option<String>,
    ) -> EngineResult<RoutineView> {
        let (actions, view) = self.engine().write(|tx| {
            let row = tx
                .routine(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no routine '{id}'")))?;
            let mut run = Run::decode(row)?;
            if run.state.is_terminal() {
                return Err(EngineError::Conflict {
                    code: "routine-finished",
                    message: format!("routine {id} is already {}", run.state.name()),
                });
            }
            let mut cx = Context {
                why: why.clone(),
                ..Context::default()
            };
            if let Some((step, response)) = &resolve {
                let escalated_on = match run.state {
                    RunState::Escalated { step, .. } => {
                        run.spec.steps.get(step).map(|s| s.label.as_str())
                    }
                    _ => None,
                };
                if escalated_on != Some(*step) {
                    return Err(EngineError::Conflict {
                        code: "not-escalated",
                        message: format!(
                            "routine {id} is {}: step {step:?} waits for no answer",
                            run.state.name()
                        ),
                    });
                }
                cx.message = Some(response.clone());
            }
            let actions = self.feed(tx, &mut run, input, cx)?;
            Ok((actions, run.row))
        })?;
        self.perform_routine(actions);
        Ok(view)
    }
}

/// A run whose stored spec or state is JSON of the wrong shape is damaged
/// too: said in its `damage`, as a row that is not JSON is.
fn flag_damage(mut row: RoutineView) -> RoutineView {
    if row.damage.is_none()
        && let Err(e) = Run::decode(row.clone())
    {
        row.damage = Some(e.to_string());
    }
    row
}

/// The longest idempotency key taken.
const MAX_KEY: usize = 200;

/// The digest (SHA-256, hex) of a spec as stored: what a repeated key's
/// spec is compared by.
fn spec_digest(spec: &RoutineSpec) -> EngineResult<String> {
    use sha2::Digest;
    let text = serde_json::to_vec(spec).map_err(|e| invalid("spec", e.to_string()))?;
    Ok(hex::encode(sha2::Sha256::digest(&text)))
}

//! The routines' loop: the I/O around [`routine::decide`]. Every input of
//! a run (its step's session ended a turn, asked for a permission the
//! session's rule escalated, exited; the operator resolved or cancelled;
//! an escalation's deadline passed; the daemon restarted) is fed to the
//! pure decision inside ONE store transaction that also writes the run's
//! new state, its steps' rows and the `routine:*` events of the decision;
//! what happens outside the store (starting a step's ACP agent, sending a
//! prompt, allowing a permission, stopping an agent) runs only once that
//! transaction committed. A terminal state, once stored, ignores every
//! input: `routine:done`, `routine:failed` and `routine:cancelled` are
//! each written once, across any number of restarts.
//!
//! It must never change a run's state but through `decide`, never run an
//! effect before the state naming it is stored, and never answer for the
//! operator (a resolve comes from the operator's credential only, which
//! the API checks).

use super::routine::{
    self, Effect, Finish, InputSource, OnInput, RoutineSpec, RunInput, RunReason, RunState,
    SessionSpec, StepRules,
};
use super::sessions::ReportKind;
use super::{EngineError, EngineResult, services::Routines};
use crate::model::event::{Event, RoutineEvent as RoutineEventOf, RoutineKind};
use crate::model::routine::StepPolicy;
use crate::store::{RoutineRow, StepStatus, StoreError, Tx, now_ms};
use std::time::Duration;

/// How often the loop looks at waiting runs and escalations' deadlines.
const TICK: Duration = Duration::from_secs(1);

/// A run as the engine reads it: its row, spec and state decoded.
struct Run {
    row: RoutineRow,
    spec: RoutineSpec,
    state: RunState,
}

fn damaged(id: &str, what: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Store(StoreError::Decode {
        what: "routine",
        message: format!("routine {id}: its stored {what} does not decode: {e}"),
    })
}

impl Run {
    /// The run, or `None` (said in the log) when its row does not decode:
    /// a damaged run is left as it is, never a reason for another run, a
    /// session's report or the daemon's start to fail.
    fn usable(row: RoutineRow) -> Option<Run> {
        let id = row.id.clone();
        match Run::decode(row) {
            Ok(run) => Some(run),
            Err(e) => {
                tracing::error!(routine = %id, error = %e, "a routine's stored row does not decode; it is left as it is");
                None
            }
        }
    }

    fn decode(row: RoutineRow) -> EngineResult<Run> {
        if let Some(d) = &row.damage {
            return Err(EngineError::Store(StoreError::Decode {
                what: "routine",
                message: format!("routine {}: {d}", row.id),
            }));
        }
        let spec = row
            .spec
            .clone()
            .ok_or_else(|| damaged(&row.id, "spec", "missing"))?;
        let state = row
            .state
            .ok_or_else(|| damaged(&row.id, "state", "missing"))?;
        Ok(Run { row, spec, state })
    }

    fn rules(&self, step: Option<usize>, now: i64) -> StepRules {
        let spec = step.and_then(|i| self.spec.steps.get(i));
        let on_input = spec.map(|s| s.on_input.clone()).unwrap_or(OnInput::Fail);
        let timeout_secs = match on_input {
            OnInput::Escalate { timeout_secs } => timeout_secs,
            _ => 0,
        };
        StepRules {
            on_input: on_input.rule(),
            finish: spec.map_or(Finish::TurnEnd, |s| s.wait_for.finish()),
            auto_allow_max: match on_input {
                OnInput::AutoAllow { max, .. } => max,
                _ => 0,
            },
            last: self.spec.steps.len().saturating_sub(1),
            escalation_deadline_ms: now.saturating_add(
                i64::try_from(timeout_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
            ),
        }
    }
}

/// The payload of every `routine:*` event (the run's id, state and label
/// are filled in by `routine_event`).
pub use crate::model::event::RoutinePayload as RoutineEvent;

/// What an input carries beyond its kind.
#[derive(Debug, Default, Clone)]
struct Context {
    /// The session's last message (a turn-end), or the operator's
    /// response (a resolve).
    message: Option<String>,
    /// A permission request's id.
    request: Option<String>,
    /// Why (a restart, a session that could not start).
    why: Option<String>,
}

/// What runs once the transaction committed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Start the step's ACP agent as session `session`.
    StartAcp {
        run: String,
        session: String,
        command: Vec<String>,
        cwd: String,
        prompt: Option<String>,
        permission: Option<crate::permission::PermissionRule>,
    },
    /// Send `text` as the session's next prompt.
    Prompt { session: String, text: String },
    /// Attach the step's policy to `session` (idempotent by `key`), then
    /// send `text` as its prompt (`policy` module).
    AttachThenPrompt {
        session: String,
        policy: StepPolicy,
        key: String,
        text: String,
    },
    /// Allow the escalated permission request: by the run's own rule
    /// (`routine`: its id) or the operator's answer (none).
    Allow {
        session: String,
        request: String,
        routine: Option<String>,
    },
    /// Stop the ACP agent the run started.
    Stop { session: String },
}

impl Routines {
    fn routine_event(
        &self,
        tx: &mut Tx<'_>,
        kind: RoutineKind,
        run: &Run,
        payload: RoutineEvent,
    ) -> EngineResult<()> {
        let payload = RoutineEvent {
            routine_id: run.row.id.clone(),
            state: run.state.name().to_string(),
            label: run.spec.label.clone(),
            ..payload
        };
        let session = payload.session_id.clone();
        tracing::info!(routine = %run.row.id, event = kind.as_str(), step = ?payload.step, "routine event");
        let event = Event::Routine(RoutineEventOf { kind, payload });
        self.engine().append(tx, &event, session.as_deref(), None)?;
        Ok(())
    }

    /// Applies `input` to `run` (and, when the run comes to wait for a
    /// step, the check of that step's `waitFor`, again and again), writing
    /// the rows and events; returns the actions to run after the commit.
    fn feed(
        &self,
        tx: &mut Tx<'_>,
        run: &mut Run,
        input: RunInput,
        cx: Context,
    ) -> EngineResult<Vec<Action>> {
        let mut actions = Vec::new();
        let mut input = Some((input, cx));
        while let Some((i, cx)) = input.take() {
            let now = now_ms();
            let prev = run.state;
            let d = routine::decide(prev, i, run.rules(prev.step(), now));
            run.state = d.next;
            for e in &d.effects {
                self.apply(tx, run, prev, *e, &cx, now, &mut actions)?;
            }
            if let RunState::Waiting { step } = run.state {
                let (ready, blocked, why) = check_waits(run, step, |id| tx.session(id))?;
                if ready || blocked {
                    input = Some((
                        RunInput::Check { ready, blocked },
                        Context {
                            why,
                            ..Context::default()
                        },
                    ));
                }
            }
            if d.next != prev || !d.effects.is_empty() {
                tracing::debug!(routine = %run.row.id, from = prev.name(), to = d.next.name(), ?i, "routine transition");
            }
        }
        run.row.state = Some(run.state);
        run.row.phase = run.state.name().to_string();
        run.row.updated_at = now_ms();
        if !matches!(
            run.state,
            RunState::Running { .. } | RunState::Escalated { .. }
        ) {
            run.row.step_session = None;
        }
        if !matches!(run.state, RunState::Escalated { .. }) {
            run.row.deadline_at = None;
            run.row.pending_request = None;
        }
        tx.put_routine(&run.row)?;
        Ok(actions)
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        tx: &mut Tx<'_>,
        run: &mut Run,
        prev: RunState,
        effect: Effect,
        cx: &Context,
        now: i64,
        actions: &mut Vec<Action>,
    ) -> EngineResult<()> {
        let current = prev.step().or(run.state.step());
        let step_label = current
            .and_then(|i| run.spec.steps.get(i))
            .map(|s| s.label.clone());
        let session = run.row.step_session.clone();
        let owned = current
            .and_then(|i| run.spec.steps.get(i))
            .is_some_and(|s| matches!(s.session, SessionSpec::Acp { .. }));
        let base = RoutineEvent {
            step: step_label.clone(),
            session_id: session.clone(),
            ..RoutineEvent::default()
        };
        match effect {
            Effect::StartStep { step } | Effect::RestartStep { step } => {
                let restarts = match run.state {
                    RunState::Running { restarts, .. } => restarts,
                    _ => 0,
                };
                let Some(spec) = run.spec.steps.get(step).cloned() else {
                    return Ok(());
                };
                let sid = match &spec.session {
                    SessionSpec::Acp { .. } => format!("{}.s{step}.r{restarts}", run.row.id),
                    SessionSpec::Existing(id) => id.clone(),
                };
                let step_actions = policy::start_actions(&run.row.id, step, restarts, &spec, &sid);
                if let (Effect::RestartStep { .. }, Some(old), true) = (effect, &session, owned) {
                    // The old agent died with its daemon; what is left of
                    // it is the started sessions' recovery's.
                    tracing::warn!(routine = %run.row.id, session = %old, "a routine step's agent died with the daemon; the step starts again");
                }
                run.row.step_session = Some(sid.clone());
                if let Some(s) = run.row.steps.get_mut(step) {
                    s.status = StepStatus::Running;
                    s.session_id = Some(sid.clone());
                    s.restarts = restarts;
                    s.started_at = Some(now);
                    s.ended_at = None;
                }
                let restarted = matches!(effect, Effect::RestartStep { .. });
                self.routine_event(
                    tx,
                    if restarted {
                        RoutineKind::StepRestarted
                    } else {
                        RoutineKind::StepStarted
                    },
                    run,
                    RoutineEvent {
                        step: Some(spec.label.clone()),
                        session_id: Some(sid),
                        restarts: restarted.then_some(restarts),
                        message: Some(routine::step_prompt(&spec)),
                        reason: restarted.then(|| {
                            cx.why.clone().unwrap_or_else(|| {
                                "the daemon restarted; the step's agent died with it".into()
                            })
                        }),
                        ..RoutineEvent::default()
                    },
                )?;
                actions.extend(step_actions);
            }
            Effect::AutoAllow(src) => {
                self.awaiting(tx, run, &base, src, cx)?;
                let prompt = match current
                    .and_then(|i| run.spec.steps.get(i))
                    .map(|s| &s.on_input)
                {
                    Some(OnInput::AutoAllow { prompt, .. }) => prompt.clone(),
                    _ => String::new(),
                };
                self.routine_event(
                    tx,
                    RoutineKind::AutoAllowed,
                    run,
                    RoutineEvent {
                        source: Some(src),
                        message: (src == InputSource::TurnEnd).then(|| prompt.clone()),
                        request: cx.request.clone(),
                        ..base
                    },
                )?;
                if let Some(session) = session {
                    actions.push(match (src, &cx.request) {
                        (InputSource::Permission, Some(request)) => Action::Allow {
                            session,
                            request: request.clone(),
                            routine: Some(run.row.id.clone()),
                        },
                        _ => Action::Prompt {
                            session,
                            text: prompt,
                        },
                    });
                }
            }
            Effect::Escalate(src) => {
                self.awaiting(tx, run, &base, src, cx)?;
                let deadline = match run.state {
                    RunState::Escalated { deadline_ms, .. } => deadline_ms,
                    _ => now,
                };
                run.row.deadline_at = Some(deadline);
                run.row.pending_request = cx.request.clone();
                if let Some(s) = current.and_then(|i| run.row.steps.get_mut(i)) {
                    s.status = StepStatus::Escalated;
                }
                self.routine_event(
                    tx,
                    RoutineKind::Escalated,
                    run,
                    RoutineEvent {
                        source: Some(src),
                        message: cx.message.clone(),
                        request: cx.request.clone(),
                        deadline_at: Some(deadline),
                        timeout_ms: u64::try_from(deadline - now).ok(),
                        reason: Some(format!(
                            "step {:?} asks for input: answer with gatehost routine resolve {} {} --response TEXT",
                            step_label.clone().unwrap_or_default(),
                            run.row.id,
                            step_label.clone().unwrap_or_default()
                        )),
                        ..base
                    },
                )?;
            }
            Effect::SendResponse => {
                let response = cx.message.clone().unwrap_or_default();
                let request = run.row.pending_request.take();
                run.row.deadline_at = None;
                if let Some(s) = current.and_then(|i| run.row.steps.get_mut(i)) {
                    s.status = StepStatus::Running;
                    s.response = Some(response.clone());
                }
                self.routine_event(
                    tx,
                    RoutineKind::Resolved,
                    run,
                    RoutineEvent {
                        message: Some(response.clone()),
                        request: request.clone(),
                        ..base
                    },
                )?;
                if let Some(session) = session {
                    actions.push(match request {
                        Some(request) => Action::Allow {
                            session,
                            request,
                            routine: None,
                        },
                        None => Action::Prompt {
                            session,
                            text: response,
                        },
                    });
                }
            }
            Effect::StepDone { step } => {
                if let Some(s) = run.row.steps.get_mut(step) {
                    s.status = StepStatus::Done;
                    s.ended_at = Some(now);
                }
                // A policy step says which policy finished it.
                let reason = cx.why.clone();
                self.routine_event(
                    tx,
                    RoutineKind::StepDone,
                    run,
                    RoutineEvent { reason, ..base },
                )?;
                if let (Some(session), true) = (session, owned) {
                    actions.push(Action::Stop { session });
                }
                run.row.step_session = None;
            }
            Effect::Done => {
                self.routine_event(tx, RoutineKind::Done, run, RoutineEvent::default())?;
            }
            Effect::Fail(reason) => {
                if let Some(s) = current.and_then(|i| run.row.steps.get_mut(i)) {
                    s.status = StepStatus::Failed;
                    s.ended_at = Some(now);
                }
                run.row.reason = Some(RunReason::Failed(reason));
                let why = match &cx.why {
                    Some(w) => format!("{}: {w}", reason.describe()),
                    None => reason.describe().to_string(),
                };
                tracing::warn!(routine = %run.row.id, ?reason, %why, "a routine failed");
                self.routine_event(
                    tx,
                    RoutineKind::Failed,
                    run,
                    RoutineEvent {
                        fail_reason: Some(reason),
                        reason: Some(why),
                        ..base
                    },
                )?;
                if let (Some(session), true) = (session, owned) {
                    actions.push(Action::Stop { session });
                }
            }
            Effect::Cancelled => {
                if let Some(s) = current.and_then(|i| run.row.steps.get_mut(i)) {
                    s.status = StepStatus::Cancelled;
                    s.ended_at = Some(now);
                }
                self.routine_event(
                    tx,
                    RoutineKind::Cancelled,
                    run,
                    RoutineEvent {
                        reason: cx.why.clone(),
                        ..base
                    },
                )?;
                if let (Some(session), true) = (session, owned) {
                    actions.push(Action::Stop { session });
                }
            }
            // The tick finds the deadline in the store.
            Effect::RearmTimer => {}
        }
        Ok(())
    }

    fn awaiting(
        &self,
        tx: &mut Tx<'_>,
        run: &Run,
        base: &RoutineEvent,
        src: InputSource,
        cx: &Context,
    ) -> EngineResult<()> {
        self.routine_event(
            tx,
            RoutineKind::AwaitingInput,
            run,
            RoutineEvent {
                step: base.step.clone(),
                session_id: base.session_id.clone(),
                source: Some(src),
                message: cx.message.clone(),
                request: cx.request.clone(),
                ..RoutineEvent::default()
            },
        )
    }

    /// Runs what committed decisions said.
    fn perform_routine(&self, actions: Vec<Action>) {
        let engine = self.engine();
        for a in actions {
            match a {
                Action::StartAcp {
                    run,
                    session,
                    command,
                    cwd,
                    prompt,
                    permission,
                } => {
                    // None: the step's policy is attached first, then
                    // the prompt goes (`AttachThenPrompt`).
                    let input = super::StartInput {
                        id: Some(session.clone()),
                        label: Some(format!("routine {run}")),
                        cwd,
                        command,
                        acp: true,
                        prompt,
                        permission,
                        ..super::StartInput::default()
                    };
                    if let Err(e) = engine.agents().start_session(input) {
                        tracing::warn!(routine = %run, session = %session, error = %e, "a routine step's agent could not start");
                        self.routine_session_input(
                            &session,
                            RunInput::SessionDied,
                            Context {
                                why: Some(format!("its agent could not start: {e}")),
                                ..Context::default()
                            },
                        );
                    }
                }
                Action::Prompt { session, text } => {
                    let engine = engine.clone();
                    tokio::spawn(
                        async move { engine.agents().deliver_prompt(&session, &text).await },
                    );
                }
                Action::AttachThenPrompt {
                    session,
                    policy,
                    key,
                    text,
                } => {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        engine
                            .runs()
                            .attach_step_policy(session, policy, key, text)
                            .await;
                    });
                }
                Action::Allow {
                    session,
                    request,
                    routine,
                } => {
                    if let Err(e) = engine.agents().resolve_permission(
                        &session,
                        &request,
                        true,
                        routine.as_deref(),
                    ) {
                        tracing::warn!(session = %session, request = %request, error = %e, "a routine's allow found no permission request waiting");
                    }
                }
                Action::Stop { session } => {
                    engine.agents().stop_acp(&session);
                }
            }
        }
    }

    /// Feeds `input` to the run whose current step runs in `session`, if
    /// any, and runs what it decided.
    fn routine_session_input(&self, session: &str, input: RunInput, cx: Context) {
        let r = self.engine().write(|tx| {
            let Some(mut run) = tx.routine_on_session(session)?.and_then(Run::usable) else {
                return Ok(Vec::new());
            };
            self.feed(tx, &mut run, input, cx.clone())
        });
        match r {
            Ok(actions) => self.perform_routine(actions),
            Err(e) => {
                tracing::error!(session, error = %e, "cannot record a routine's input; the run waits for its session's next report, or a restart");
            }
        }
    }

    /// Inside a session report's transaction: the report's meaning for
    /// the run whose current step runs in that session. Returns what to
    /// run after the commit.
    pub(super) fn routine_report(
        &self,
        tx: &mut Tx<'_>,
        session: &str,
        kind: ReportKind,
        message: Option<&str>,
    ) -> EngineResult<Vec<RoutineActions>> {
        let input = match kind {
            ReportKind::TurnEnd if routine::finishes_step(message) => RunInput::StepFinished,
            ReportKind::TurnEnd | ReportKind::AwaitingInput => {
                RunInput::AwaitingInput(InputSource::TurnEnd)
            }
            ReportKind::Exited => RunInput::SessionDied,
            ReportKind::TurnStart | ReportKind::Heartbeat => return Ok(Vec::new()),
        };
        // A run waiting for this session may be ready: the tick looks.
        if matches!(kind, ReportKind::TurnEnd | ReportKind::Exited) {
            self.waits_dirty
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let Some(mut run) = tx.routine_on_session(session)?.and_then(Run::usable) else {
            return Ok(Vec::new());
        };
        let cx = Context {
            message: message.map(str::to_string),
            why: (kind == ReportKind::Exited).then(|| {
                message
                    .and_then(|m| m.lines().last())
                    .unwrap_or("it exited")
                    .to_string()
            }),
            ..Context::default()
        };
        Ok(vec![RoutineActions(self.feed(tx, &mut run, input, cx)?)])
    }

    /// After a report's commit: what its routine decisions said.
    pub(super) fn perform_routine_actions(&self, actions: Vec<RoutineActions>) {
        for a in actions {
            self.perform_routine(a.0);
        }
    }

    /// An ACP permission request the session's rule escalated: awaiting
    /// input for a run whose step runs in that session.
    pub(super) fn routine_permission(&self, session: &str, request: &str) {
        self.routine_session_input(
            session,
            RunInput::AwaitingInput(InputSource::Permission),
            Context {
                request: Some(request.to_string()),
                ..Context::default()
            },
        );
    }
}

/// Decisions' actions carried out of a report's transaction.
pub(super) struct RoutineActions(Vec<Action>);

/// A run's view on the wire: the stored row.
pub type RoutineView = RoutineRow;

mod ops;
mod policy;
mod waits;
use waits::check_waits;

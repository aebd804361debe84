//! The stored side of a run's decisions: `feed` applies an input to a
//! run through [`routine::decide`] (and the check of a waiting step's
//! `waitFor`, again and again) and writes, in the caller's transaction,
//! the run's row, its steps' rows and the `routine:*` event of each
//! effect; what must happen outside the store comes back as actions.
//!
//! It must never run an action itself (the caller does, once the
//! transaction committed), and never change a run's state but through
//! `decide`.

use super::super::routine::{
    self, Effect, InputSource, OnInput, RunInput, RunReason, RunState, SessionSpec,
};
use super::super::{EngineResult, services::Routines};
use super::{Action, Context, RoutineEvent, Run, check_waits, policy};
use crate::model::event::{Event, RoutineEvent as RoutineEventOf, RoutineKind};
use crate::store::{StepStatus, Tx, now_ms};

impl Routines {
    pub(super) fn routine_event(
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
    pub(super) fn feed(
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
}

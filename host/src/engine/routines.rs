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
//!
//! The [`Routines`] service: this module reads runs and carries out the
//! actions of committed decisions; `effects` writes a decision, `ops`
//! holds the API's operations, `tick` what time and a restart feed,
//! `policy` a step's policy, `waits` a step's `waitFor`.

use super::routine::OnInputExt as _;
use super::routine::{
    self, Finish, InputSource, OnInput, RoutineSpec, RunInput, RunState, StepRules,
};
use super::sessions::ReportKind;
use super::{EngineError, EngineResult, services::Routines};
use crate::model::routine::StepPolicy;
use crate::store::{RoutineRow, StoreError, Tx};
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
    pub(in crate::engine) fn perform_routine_actions(&self, actions: Vec<RoutineActions>) {
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

mod effects;
mod ops;
mod policy;
mod tick;
mod waits;
use waits::check_waits;

//! Durable routines: a run of sequential steps, each an ACP session (one
//! the daemon starts, or an existing one) given a prompt, that says what
//! finishes it and what happens when its session is *awaiting input*.
//! A step's `waitFor` is one of:
//! - `"turn-end"` (the default): it finishes at a turn-end whose last
//!   message carries the done marker;
//! - `"policy"`: its `policy` (a gate policy attached to its session
//!   before its prompt goes out) decides: the step finishes when the
//!   policy passed (`awaiting-ack` or `done`) and fails when it ended
//!   otherwise (`blocked`, `cancelled`); its turn-ends are the policy's
//!   (a failing gate nudges the session), never awaiting input;
//! - a list of earlier steps' labels and session ids (fan-in): it starts
//!   once ALL of them finished, then finishes as `"turn-end"` does.
//!
//! **Awaiting input**, precisely: the step's session (a) ended a turn
//! (its `session/prompt` answered) whose last message holds no line that
//! is only `STEP DONE` (the marker [`STEP_DONE`] the step's prompt asks
//! for), or (b) sent a `session/request_permission` that the session's
//! permission rule escalates to the operator. A turn-end with the marker
//! finishes the step; the session exiting before that fails it.
//!
//! On a daemon restart a step whose ACP agent the old daemon started is
//! gone with it (its stdin and stdout were the old daemon's): the step is
//! **restarted** (a new session, the step's prompt again) with a
//! `routine:step-restarted` event saying why, at most [`MAX_RESTARTS`]
//! times, then the run fails with that reason. A step on an existing
//! session (not the daemon's child) is watched again.
//!
//! It owns the model and the rules only. It must never touch the store,
//! the clock, a process or the network: [`decide`] is unit-tested for
//! every state × input; the I/O loop around it executes the effects, and
//! stores the new state with its events in one transaction, so that a
//! terminal emission (`routine:done`, `routine:failed`, `routine:cancelled`)
//! happens exactly once across restarts: once stored, a terminal state
//! ignores every input.

pub use crate::model::routine::{
    DEFAULT_AUTO_ALLOW_MAX, DEFAULT_ESCALATION_SECS, FailReason, Finish, MAX_RESTARTS, OnInput,
    RoutineSpec, RunReason, RunState, STEP_DONE, SessionSpec, StepSpec, WaitFor,
};

/// Why a spec is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("a routine needs at least one step")]
    NoSteps,
    #[error("step {0}: its label is empty")]
    EmptyLabel(usize),
    #[error("step label {0:?} is used twice")]
    DuplicateLabel(String),
    #[error("step {step:?} waits for {label:?}, a later step (it would never start)")]
    WaitsForLater { step: String, label: String },
    #[error("step {0:?}: its ACP command is empty")]
    EmptyCommand(String),
    #[error("step {0:?}: an escalation timeout of 0 seconds")]
    ZeroTimeout(String),
    #[error("step {0:?}: autoAllow with max 0 would never answer (use onInput \"fail\")")]
    ZeroAutoAllow(String),
    #[error("step {0:?}: waitFor \"policy\" needs the step's policy")]
    PolicyMissing(String),
    #[error("step {0:?}: a policy decides a step only with waitFor \"policy\"")]
    PolicyUnused(String),
    #[error(
        "step {0:?}: its policy must be a JSON object without sessionId or sessionIds (it watches the step's session)"
    )]
    PolicyNamesSession(String),
}

/// The engine's check of a routine (an extension trait: `RoutineSpec` is
/// gatehost-model's, the rules it is checked by the engine's).
pub trait RoutineSpecExt {
    /// Checks what the decision relies on: labels unique and non-empty, a
    /// `waitFor` label names an earlier step (anything else is a session
    /// id), commands non-empty.
    fn validate(&self) -> Result<(), SpecError>;
}

impl RoutineSpecExt for RoutineSpec {
    fn validate(&self) -> Result<(), SpecError> {
        if self.steps.is_empty() {
            return Err(SpecError::NoSteps);
        }
        let labels: Vec<&str> = self.steps.iter().map(|s| s.label.as_str()).collect();
        for (i, s) in self.steps.iter().enumerate() {
            if s.label.trim().is_empty() {
                return Err(SpecError::EmptyLabel(i));
            }
            if labels[..i].contains(&s.label.as_str()) {
                return Err(SpecError::DuplicateLabel(s.label.clone()));
            }
            for w in s.wait_for.prerequisites() {
                if labels[i..].contains(&w.as_str()) {
                    return Err(SpecError::WaitsForLater {
                        step: s.label.clone(),
                        label: w.clone(),
                    });
                }
            }
            if let SessionSpec::Acp { command, .. } = &s.session
                && command.first().is_none_or(|c| c.is_empty())
            {
                return Err(SpecError::EmptyCommand(s.label.clone()));
            }
            if let OnInput::Escalate { timeout_secs: 0 } = s.on_input {
                return Err(SpecError::ZeroTimeout(s.label.clone()));
            }
            if let OnInput::AutoAllow { max: 0, .. } = s.on_input {
                return Err(SpecError::ZeroAutoAllow(s.label.clone()));
            }
            match (s.wait_for.finish(), &s.policy) {
                (Finish::Policy, None) => return Err(SpecError::PolicyMissing(s.label.clone())),
                (Finish::TurnEnd, Some(_)) => {
                    return Err(SpecError::PolicyUnused(s.label.clone()));
                }
                (Finish::Policy, Some(p)) if !p.is_object() || p.named_session().is_some() => {
                    return Err(SpecError::PolicyNamesSession(s.label.clone()));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

pub use crate::model::routine::InputSource;

/// What happened to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunInput {
    /// The loop looked at the waiting step: `ready` when all its `waitFor`
    /// finished (a failed one counts as not finishing: `blocked`).
    Check { ready: bool, blocked: bool },
    /// The step's session is awaiting input.
    AwaitingInput(InputSource),
    /// The step's session ended a turn with the done marker.
    StepFinished,
    /// The step's policy ended: passed (`awaiting-ack`, `done`) or not.
    PolicySettled { passed: bool },
    /// The step's session exited (or could not start) before finishing.
    SessionDied,
    /// The operator answered the escalation.
    Resolved,
    /// The escalation's deadline passed (`now_ms` ≥ deadline).
    Timeout,
    /// The operator cancelled.
    Cancel,
    /// The daemon restarted; `owned_agent`: the step's agent was the old
    /// daemon's child (gone).
    Recover { owned_agent: bool },
}

/// What the step's rules are, as the decision needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRules {
    pub on_input: InputRule,
    /// What finishes the step.
    pub finish: Finish,
    /// How many asks `autoAllow` answers.
    pub auto_allow_max: u32,
    /// The index of the last step.
    pub last: usize,
    /// `now + timeout` for an escalation begun now.
    pub escalation_deadline_ms: i64,
}

/// [`OnInput`] without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRule {
    AutoAllow,
    Escalate,
    Fail,
}

/// The rule an [`OnInput`] stands for (an extension trait: `OnInput` is
/// gatehost-model's).
pub trait OnInputExt {
    /// The rule, without its data.
    fn rule(&self) -> InputRule;
}

impl OnInputExt for OnInput {
    fn rule(&self) -> InputRule {
        match self {
            OnInput::AutoAllow { .. } => InputRule::AutoAllow,
            OnInput::Escalate { .. } => InputRule::Escalate,
            OnInput::Fail => InputRule::Fail,
        }
    }
}

/// What the loop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Start step `step`'s session with its prompt (`routine:step-started`).
    StartStep { step: usize },
    /// Start it again after a daemon restart (`routine:step-restarted`).
    RestartStep { step: usize },
    /// Send the step's auto-allow prompt, or allow the permission
    /// (`routine:awaiting-input` then `routine:auto-allowed`).
    AutoAllow(InputSource),
    /// `routine:awaiting-input` then `routine:escalated` (a notification).
    Escalate(InputSource),
    /// Send the operator's response (`routine:resolved`).
    SendResponse,
    /// `routine:step-done`.
    StepDone { step: usize },
    /// `routine:done` (terminal).
    Done,
    /// `routine:failed` with the reason (terminal, a notification).
    Fail(FailReason),
    /// `routine:cancelled` (terminal); the step's session is stopped.
    Cancelled,
    /// Arm the escalation's timer again (after a restart).
    RearmTimer,
}

/// A decision: the state to store, and the effects in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub next: RunState,
    pub effects: Vec<Effect>,
}

fn stay(s: RunState) -> Decision {
    Decision {
        next: s,
        effects: vec![],
    }
}

fn to(next: RunState, effects: Vec<Effect>) -> Decision {
    Decision { next, effects }
}

/// The state a run starts in.
pub fn initial() -> RunState {
    RunState::Waiting { step: 0 }
}

/// The run: what `input` does in `state`, given the current step's rules.
pub fn decide(state: RunState, input: RunInput, rules: StepRules) -> Decision {
    use Effect as E;
    use RunInput as I;
    use RunState as S;
    match (state, input) {
        // Terminal: each emission happened once and never again.
        (S::Done | S::Failed | S::Cancelled, _) => stay(state),
        (_, I::Cancel) => to(S::Cancelled, vec![E::Cancelled]),

        (S::Waiting { .. }, I::Check { blocked: true, .. }) => {
            to(S::Failed, vec![E::Fail(FailReason::WaitFailed)])
        }
        (
            S::Waiting { step },
            I::Check {
                ready: true,
                blocked: false,
            },
        ) => to(
            S::Running {
                step,
                restarts: 0,
                answered: 0,
            },
            vec![E::StartStep { step }],
        ),
        (S::Waiting { .. }, I::Check { .. }) => stay(state),
        // Nothing runs while waiting: a restart looks again at the next check.
        (S::Waiting { .. }, _) => stay(state),

        // A policy step's turn-ends are its policy's: gated, nudged.
        (
            S::Running { .. } | S::Escalated { .. },
            I::StepFinished | I::AwaitingInput(InputSource::TurnEnd),
        ) if rules.finish == Finish::Policy => stay(state),
        (S::Running { .. } | S::Escalated { .. }, I::PolicySettled { .. })
            if rules.finish != Finish::Policy =>
        {
            stay(state)
        }
        (S::Running { .. } | S::Escalated { .. }, I::PolicySettled { passed: false }) => {
            to(S::Failed, vec![E::Fail(FailReason::PolicyFailed)])
        }
        (
            S::Running {
                step,
                restarts,
                answered,
            },
            I::AwaitingInput(src),
        ) => match rules.on_input {
            InputRule::AutoAllow if answered >= rules.auto_allow_max => {
                to(S::Failed, vec![E::Fail(FailReason::AutoAllowExhausted)])
            }
            InputRule::AutoAllow => to(
                S::Running {
                    step,
                    restarts,
                    answered: answered + 1,
                },
                vec![E::AutoAllow(src)],
            ),
            InputRule::Escalate => to(
                S::Escalated {
                    step,
                    restarts,
                    deadline_ms: rules.escalation_deadline_ms,
                },
                vec![E::Escalate(src)],
            ),
            InputRule::Fail => to(S::Failed, vec![E::Fail(FailReason::InputRefused)]),
        },
        (
            S::Running { step, .. } | S::Escalated { step, .. },
            I::StepFinished | I::PolicySettled { passed: true },
        ) => {
            if step >= rules.last {
                to(S::Done, vec![E::StepDone { step }, E::Done])
            } else {
                to(S::Waiting { step: step + 1 }, vec![E::StepDone { step }])
            }
        }
        (S::Running { .. } | S::Escalated { .. }, I::SessionDied) => {
            to(S::Failed, vec![E::Fail(FailReason::SessionDied)])
        }
        (
            S::Running { step, restarts, .. } | S::Escalated { step, restarts, .. },
            I::Recover { owned_agent: true },
        ) => {
            if restarts >= MAX_RESTARTS {
                to(S::Failed, vec![E::Fail(FailReason::TooManyRestarts)])
            } else {
                to(
                    S::Running {
                        step,
                        restarts: restarts + 1,
                        answered: 0,
                    },
                    vec![E::RestartStep { step }],
                )
            }
        }
        (S::Running { .. }, I::Recover { owned_agent: false }) => stay(state),
        (S::Escalated { .. }, I::Recover { owned_agent: false }) => {
            stay_with(state, vec![E::RearmTimer])
        }
        // Stale inputs for a state that cannot have them.
        (S::Running { .. }, I::Check { .. } | I::Resolved | I::Timeout) => stay(state),

        (S::Escalated { step, restarts, .. }, I::Resolved) => to(
            S::Running {
                step,
                restarts,
                answered: 0,
            },
            vec![E::SendResponse],
        ),
        (S::Escalated { .. }, I::Timeout) => {
            to(S::Failed, vec![E::Fail(FailReason::EscalationTimedOut)])
        }
        // One escalation at a time: a second ask while the operator has
        // not answered is covered by the answer to come.
        (S::Escalated { .. }, I::AwaitingInput(_) | I::Check { .. }) => stay(state),
    }
}

fn stay_with(s: RunState, effects: Vec<Effect>) -> Decision {
    Decision { next: s, effects }
}

/// Whether a turn-end's last message finishes the step: a line that is
/// only [`STEP_DONE`] (surrounding spaces and markdown emphasis allowed).
pub fn finishes_step(message: Option<&str>) -> bool {
    message.unwrap_or_default().lines().any(|l| {
        l.trim_matches(|c: char| c.is_whitespace() || "*_`".contains(c))
            .eq_ignore_ascii_case(STEP_DONE)
    })
}

/// The prompt a step's session gets: the step's prompt and the marker's
/// instruction.
pub fn step_prompt(step: &StepSpec) -> String {
    let body = step.prompt.as_deref().unwrap_or("Carry out this step.");
    if step.wait_for.finish() == Finish::Policy {
        return format!(
            "{body}\n\nThis step is finished when your work passes its gate; if it does not, the gate's reason comes back to you as your next prompt."
        );
    }
    format!(
        "{body}\n\nWhen this step is finished, end your answer with one line that holds only {STEP_DONE}. If you need input, ask and end your turn without it."
    )
}

#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod tests;

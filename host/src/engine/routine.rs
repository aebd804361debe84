//! Durable routines: a run of sequential steps, each an ACP session (one
//! the daemon starts, or an existing one) given a prompt, that may wait
//! for earlier steps or sessions (fan-in: ALL of them finished), and that
//! says what happens when its session is *awaiting input*.
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

use serde::{Deserialize, Serialize};

/// The line a step's session ends its last turn with when the step is
/// finished.
pub const STEP_DONE: &str = "STEP DONE";

/// How many times a step is restarted after the daemon that ran its agent
/// died, before the run fails.
pub const MAX_RESTARTS: u32 = 2;

/// The default time an escalated step waits for the operator.
pub const DEFAULT_ESCALATION_SECS: u64 = 300;

/// A routine as submitted (`gatehost routine start FILE.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RoutineSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub steps: Vec<StepSpec>,
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepSpec {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub session: SessionSpec,
    /// Labels of earlier steps, or session ids: the step starts once all
    /// have finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_for: Vec<String>,
    /// A gate policy attached to the step's session (a `POST /v1/policies`
    /// body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
    #[serde(default)]
    pub on_input: OnInput,
}

/// The step's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum SessionSpec {
    /// An ACP agent the daemon starts; `permission` answers its
    /// permission requests (default: `[agents] permission`, else deny
    /// all); one it escalates is the step's awaiting input.
    Acp {
        command: Vec<String>,
        cwd: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission: Option<crate::permission::PermissionRule>,
    },
    /// An existing session, by id.
    Existing(String),
}

/// What a step does when its session is awaiting input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", tag = "mode")]
pub enum OnInput {
    /// Answer with `prompt` (a turn-end) or allow (a permission request).
    AutoAllow { prompt: String },
    /// Ask the operator; nobody answering in `timeoutSecs` fails the run.
    Escalate {
        #[serde(default = "default_timeout", rename = "timeoutSecs")]
        timeout_secs: u64,
    },
    /// Fail the run.
    Fail,
}

impl Default for OnInput {
    fn default() -> Self {
        OnInput::Escalate {
            timeout_secs: DEFAULT_ESCALATION_SECS,
        }
    }
}

fn default_timeout() -> u64 {
    DEFAULT_ESCALATION_SECS
}

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
}

impl RoutineSpec {
    /// Checks what the decision relies on: labels unique and non-empty, a
    /// `waitFor` label names an earlier step (anything else is a session
    /// id), commands non-empty.
    pub fn validate(&self) -> Result<(), SpecError> {
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
            for w in &s.wait_for {
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
        }
        Ok(())
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "phase")]
pub enum RunState {
    /// Step `step` waits for its `waitFor` to finish.
    Waiting { step: usize },
    /// Step `step`'s session works; `restarts` counts its restarts.
    Running { step: usize, restarts: u32 },
    /// Step `step` is awaiting the operator until `deadline_ms`.
    Escalated {
        step: usize,
        restarts: u32,
        deadline_ms: i64,
    },
    /// Every step finished (terminal).
    Done,
    /// A step failed (terminal).
    Failed,
    /// The operator cancelled the run (terminal).
    Cancelled,
}

impl RunState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Done | RunState::Failed | RunState::Cancelled
        )
    }

    /// The step under way, if any.
    pub fn step(self) -> Option<usize> {
        match self {
            RunState::Waiting { step }
            | RunState::Running { step, .. }
            | RunState::Escalated { step, .. } => Some(step),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RunState::Waiting { .. } => "waiting",
            RunState::Running { .. } => "running",
            RunState::Escalated { .. } => "escalated",
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }
}

/// Where awaiting input came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputSource {
    /// A turn-end without the step's done marker.
    TurnEnd,
    /// A permission request the session's rule escalated.
    Permission,
}

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

impl OnInput {
    pub fn rule(&self) -> InputRule {
        match self {
            OnInput::AutoAllow { .. } => InputRule::AutoAllow,
            OnInput::Escalate { .. } => InputRule::Escalate,
            OnInput::Fail => InputRule::Fail,
        }
    }
}

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailReason {
    /// A step it waited for failed.
    WaitFailed,
    /// Its session awaited input and the step's rule is `fail`.
    InputRefused,
    /// Its session exited before finishing.
    SessionDied,
    /// Nobody answered the escalation in time.
    EscalationTimedOut,
    /// The daemon died under it more than [`MAX_RESTARTS`] times.
    TooManyRestarts,
}

impl FailReason {
    pub fn describe(self) -> &'static str {
        match self {
            FailReason::WaitFailed => "a step or session it waited for failed",
            FailReason::InputRefused => {
                "its session asked for input and the step's onInput is fail"
            }
            FailReason::SessionDied => "its session exited before the step finished",
            FailReason::EscalationTimedOut => "nobody resolved the escalation before its timeout",
            FailReason::TooManyRestarts => {
                "the daemon died under the step more times than it is restarted"
            }
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
            S::Running { step, restarts: 0 },
            vec![E::StartStep { step }],
        ),
        (S::Waiting { .. }, I::Check { .. }) => stay(state),
        // Nothing runs while waiting: a restart looks again at the next check.
        (S::Waiting { .. }, _) => stay(state),

        (S::Running { step, restarts }, I::AwaitingInput(src)) => match rules.on_input {
            InputRule::AutoAllow => stay_with(state, vec![E::AutoAllow(src)]),
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
        (S::Running { step, .. } | S::Escalated { step, .. }, I::StepFinished) => {
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
            S::Running { step, restarts } | S::Escalated { step, restarts, .. },
            I::Recover { owned_agent: true },
        ) => {
            if restarts >= MAX_RESTARTS {
                to(S::Failed, vec![E::Fail(FailReason::TooManyRestarts)])
            } else {
                to(
                    S::Running {
                        step,
                        restarts: restarts + 1,
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

        (S::Escalated { step, restarts, .. }, I::Resolved) => {
            to(S::Running { step, restarts }, vec![E::SendResponse])
        }
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
    format!(
        "{body}\n\nWhen this step is finished, end your answer with one line that holds only {STEP_DONE}. If you need input, ask and end your turn without it."
    )
}

#[cfg(test)]
mod tests;

//! A routine's stored records: its spec as submitted (`routines.spec`),
//! where a run is (`state`) and why it ended (`reason`). It owns their
//! shapes; it must never decide a run's next state (`engine::routine`).

use serde::{Deserialize, Serialize};

/// The line a step's session ends its last turn with when the step is
/// finished.
pub const STEP_DONE: &str = "STEP DONE";

/// How many times a step is restarted after the daemon that ran its agent
/// died, before the run fails.
pub const MAX_RESTARTS: u32 = 2;

/// The default time an escalated step waits for the operator.
pub const DEFAULT_ESCALATION_SECS: u64 = 300;

/// How many times `autoAllow` answers one step by default; the next ask
/// fails the run (an agent that asks forever is not left looping).
pub const DEFAULT_AUTO_ALLOW_MAX: u32 = 10;

/// A routine as submitted (`gatehost routine start FILE.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RoutineSpec {
    /// A name for the run, for people (shown in its events and lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The steps, run in order (a fan-in step after the ones it names).
    pub steps: Vec<StepSpec>,
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepSpec {
    /// The step's name, unique in the routine (`routine resolve` and fan-ins
    /// name it).
    pub label: String,
    /// What the step's agent is asked (gatehost adds the line that says
    /// how to end the step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The session the step runs in: an ACP agent the daemon starts, or an
    /// existing session.
    pub session: SessionSpec,
    /// What the step waits for (see the module's doc).
    #[serde(default, skip_serializing_if = "WaitFor::is_default")]
    pub wait_for: WaitFor,
    /// With `waitFor: "policy"`: a gate policy attached to the step's
    /// session (a `POST /v1/policies` body without `sessionId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<StepPolicy>,
    /// What the step does when its session awaits input (default: escalate,
    /// [`DEFAULT_ESCALATION_SECS`]).
    #[serde(default)]
    pub on_input: OnInput,
}

/// A step's policy as submitted: an attach body without its session,
/// parsed for the step's session where the routine's start checks it and
/// where the step attaches it.
pub use super::attach::Template as StepPolicy;

/// What a step waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum WaitFor {
    /// What finishes it: its turn-end with the marker, or its policy.
    Finish(Finish),
    /// Earlier steps' labels and session ids it starts after (fan-in);
    /// it finishes as [`Finish::TurnEnd`].
    All(Vec<String>),
}

/// What finishes a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Finish {
    /// Its session's turn-end that ends with [`STEP_DONE`].
    TurnEnd,
    /// Its policy (`policy`) passing.
    Policy,
}

impl Default for WaitFor {
    fn default() -> Self {
        WaitFor::Finish(Finish::TurnEnd)
    }
}

impl WaitFor {
    fn is_default(&self) -> bool {
        *self == WaitFor::default()
    }

    /// The labels and session ids the step starts after.
    pub fn prerequisites(&self) -> &[String] {
        match self {
            WaitFor::All(ids) => ids,
            WaitFor::Finish(_) => &[],
        }
    }

    /// What finishes the step (a fan-in finishes as [`Finish::TurnEnd`]).
    pub fn finish(&self) -> Finish {
        match self {
            WaitFor::Finish(f) => *f,
            WaitFor::All(_) => Finish::TurnEnd,
        }
    }
}

impl<'de> Deserialize<'de> for WaitFor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        const WANT: &str =
            "\"turn-end\", \"policy\", or a list of earlier steps' labels and session ids";
        match Raw::deserialize(d)
            .map_err(|_| D::Error::custom(format!("waitFor must be {WANT}")))?
        {
            Raw::Word(w) if w == "turn-end" => Ok(WaitFor::Finish(Finish::TurnEnd)),
            Raw::Word(w) if w == "policy" => Ok(WaitFor::Finish(Finish::Policy)),
            Raw::Word(w) => Err(D::Error::custom(format!("waitFor {w:?}: must be {WANT}"))),
            Raw::List(ids) => Ok(WaitFor::All(ids)),
        }
    }
}

/// The step's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum SessionSpec {
    /// An ACP agent the daemon starts; `permission` answers its
    /// permission requests (default: `[agents] permission`, else deny
    /// all); one it escalates is the step's awaiting input.
    Acp {
        /// The agent's argv (a bare program name on the daemon's PATH, or an
        /// absolute path).
        command: Vec<String>,
        /// The directory it runs in (absolute).
        cwd: String,
        /// How its permission requests are answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission: Option<crate::permission::PermissionRule>,
    },
    /// An existing session, by id.
    Existing(String),
}

/// What a step does when its session is awaiting input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", tag = "mode")]
pub enum OnInput {
    /// Answer with `prompt` (a turn-end) or allow (a permission request),
    /// at most `max` times for the step (default
    /// [`DEFAULT_AUTO_ALLOW_MAX`]); the next ask fails the run.
    AutoAllow {
        /// The prompt sent at a turn-end that asks (a permission request is
        /// allowed).
        prompt: String,
        /// The most asks it answers for the step.
        #[serde(default = "default_auto_allow_max")]
        max: u32,
    },
    /// Ask the operator; nobody answering in `timeoutSecs` fails the run.
    Escalate {
        /// How long the operator has to answer (seconds).
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

fn default_auto_allow_max() -> u32 {
    DEFAULT_AUTO_ALLOW_MAX
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "phase")]
pub enum RunState {
    /// Step `step` waits for its `waitFor` to finish.
    Waiting {
        /// The step's index, from 0.
        step: usize,
    },
    /// Step `step`'s session works; `restarts` counts its restarts,
    /// `answered` the asks `autoAllow` answered.
    Running {
        /// The step's index, from 0.
        step: usize,
        /// How many times its agent was started again after a daemon died.
        restarts: u32,
        /// How many asks `autoAllow` answered for the step.
        #[serde(default)]
        answered: u32,
    },
    /// Step `step` is awaiting the operator until `deadline_ms`.
    Escalated {
        /// The step's index, from 0.
        step: usize,
        /// How many times its agent was started again after a daemon died.
        restarts: u32,
        /// When nobody answering fails the run (ms since the Unix epoch).
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
    /// Whether the run is over (`done`, `failed`, `cancelled`): nothing moves
    /// it again.
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

    /// Its name as stored and shown (`waiting`, `escalated`), the API's
    /// `phase`.
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
    /// Its policy ended without passing (blocked, cancelled), or could
    /// not be attached.
    PolicyFailed,
    /// Its session asked again after `autoAllow` answered `max` times.
    AutoAllowExhausted,
}

impl RunReason {
    /// As stored: the reason's name, or the words.
    pub fn as_str(&self) -> &str {
        match self {
            RunReason::Failed(f) => f.name(),
            RunReason::Said(s) => s,
        }
    }
}

impl FailReason {
    /// Its stored name (`session-died`).
    pub fn name(self) -> &'static str {
        match self {
            FailReason::WaitFailed => "wait-failed",
            FailReason::InputRefused => "input-refused",
            FailReason::SessionDied => "session-died",
            FailReason::EscalationTimedOut => "escalation-timed-out",
            FailReason::TooManyRestarts => "too-many-restarts",
            FailReason::PolicyFailed => "policy-failed",
            FailReason::AutoAllowExhausted => "auto-allow-exhausted",
        }
    }

    /// One line a person reads about the failure (`its session exited before
    /// the step finished`).
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
            FailReason::PolicyFailed => "the step's policy did not pass",
            FailReason::AutoAllowExhausted => {
                "its session asked again after autoAllow answered as many times as its max"
            }
        }
    }
}

/// Why a run ended, as stored (`reason`): the engine's [`FailReason`], or
/// a person's words (a damaged run cancelled in place).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunReason {
    /// The engine's reason.
    Failed(FailReason),
    /// A person's words (a damaged run cancelled in place).
    Said(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_stored_as_its_name_or_the_words() {
        for f in [
            FailReason::WaitFailed,
            FailReason::InputRefused,
            FailReason::SessionDied,
            FailReason::EscalationTimedOut,
            FailReason::TooManyRestarts,
            FailReason::PolicyFailed,
            FailReason::AutoAllowExhausted,
        ] {
            let json = serde_json::to_value(RunReason::Failed(f)).expect("encodes");
            assert_eq!(json, serde_json::json!(f.name()));
            let back: RunReason = serde_json::from_value(json).expect("decodes");
            assert_eq!(back, RunReason::Failed(f));
        }
        let said: RunReason =
            serde_json::from_value(serde_json::json!("cancelled by x")).expect("decodes");
        assert_eq!(said.as_str(), "cancelled by x");
    }
}

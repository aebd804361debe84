//! A session's state as a pure machine: what a report, a registration or
//! the watchdog's finding of silence does to a session, which events tell
//! of it, and what the engine must do in the same transaction.
//!
//! It owns the rules only. It must never touch the store, the clock or a
//! policy: [`decide`] is a pure function, unit-tested for every state ×
//! input; the report, the registration and the watchdog perform its
//! answer (`sessions::report`, `sessions`, `watchdog`).

use super::ReportKind;
use crate::store::{SessionRow, SessionState};

/// A session as the decision sees it: what it is doing, and whether the
/// watchdog found it silent (`stale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Standing {
    pub state: SessionState,
    pub stale: bool,
}

impl Standing {
    pub(crate) fn of(s: &SessionRow) -> Standing {
        Standing {
            state: s.state,
            stale: s.stale_at.is_some(),
        }
    }
}

/// Everything that can happen to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// A report from (or about) the session.
    Report(ReportKind),
    /// It was registered again (a hook registers on every start);
    /// `started`: by the daemon, which runs its process.
    Register { started: bool },
    /// The watchdog found it silent past `[daemon] heartbeat_timeout`.
    Silent,
}

/// The events a session's step publishes, in the names stored events and
/// the API have always used (`session:…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A stale session spoke again.
    Live,
    /// Silent past the timeout.
    Stale,
    TurnStart,
    TurnEnd,
    AwaitingInput,
    Exited,
}

impl Event {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Event::Live => "session:live",
            Event::Stale => "session:stale",
            Event::TurnStart => "session:turn-start",
            Event::TurnEnd => "session:turn-end",
            Event::AwaitingInput => "session:awaiting-input",
            Event::Exited => "session:exited",
        }
    }
}

/// What the engine does in the step's transaction (the events aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// It was heard from: its heartbeat is now.
    Touch,
    /// Its report's message is its last message.
    KeepMessage,
    /// One more turn ended.
    CountTurn,
    /// The report's event is where its last turn ended (what a policy
    /// attached after it watches from).
    MarkTurn,
    /// Its routine step hears of the report.
    TellRoutines,
    /// The session policies whose rules match it are attached.
    AttachPolicies,
    /// The policies already judging it are named to the caller (their
    /// verdicts are to come).
    NameJudging,
    /// A stop no policy of the operator's watches is said once.
    NoteUngated,
    /// Its turn ended for the policies watching it: it leaves their
    /// pending set, and an empty set queues their gate.
    EndTurnInPolicies,
}

/// A step: the session's state after it, whether it is still stale, the
/// events (in order) and the effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub to: SessionState,
    pub stale: bool,
    pub events: Vec<Event>,
    pub effects: &'static [Effect],
}

impl Step {
    pub(crate) fn does(&self, e: Effect) -> bool {
        self.effects.contains(&e)
    }

    /// The event of the report itself (the last one), if any: a heartbeat
    /// and a registration have none.
    pub(crate) fn report_event(&self) -> Option<Event> {
        self.events
            .last()
            .copied()
            .filter(|e| !matches!(e, Event::Live | Event::Stale))
    }
}

/// Why an input is refused (a conflict answered to the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The session exited: it reports nothing more.
    Exited,
}

/// The answer of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing changes and nothing is published (a second exit, silence
    /// of a session already stale or exited).
    Ignore,
    Refuse(Refusal),
    Go(Step),
}

/// The session's machine: what `input` does to a session standing so.
pub(crate) fn decide(now: Standing, input: Input) -> Decision {
    use Effect as F;
    use SessionState as S;
    // A word from a stale session makes it live again, said first.
    let heard = |to: SessionState, event: Option<Event>, effects: &'static [Effect]| {
        let mut events = Vec::new();
        if now.stale {
            events.push(Event::Live);
        }
        events.extend(event);
        Decision::Go(Step {
            to,
            stale: false,
            events,
            effects,
        })
    };
    match (now.state, input) {
        // A heartbeat only says it is there, exited or not.
        (state, Input::Report(ReportKind::Heartbeat)) => heard(state, None, &[F::Touch]),
        // A second exit report changes nothing and publishes nothing.
        (S::Exited, Input::Report(ReportKind::Exited)) => Decision::Ignore,
        (S::Exited, Input::Report(_)) => Decision::Refuse(Refusal::Exited),
        (_, Input::Report(ReportKind::TurnStart)) => heard(
            S::Running,
            Some(Event::TurnStart),
            &[F::Touch, F::KeepMessage, F::TellRoutines, F::AttachPolicies],
        ),
        (_, Input::Report(ReportKind::TurnEnd)) => heard(
            S::Idle,
            Some(Event::TurnEnd),
            &[
                F::Touch,
                F::CountTurn,
                F::KeepMessage,
                F::MarkTurn,
                F::TellRoutines,
                F::NameJudging,
                F::NoteUngated,
                F::EndTurnInPolicies,
            ],
        ),
        (_, Input::Report(ReportKind::AwaitingInput)) => heard(
            S::AwaitingInput,
            Some(Event::AwaitingInput),
            &[F::Touch, F::KeepMessage, F::TellRoutines],
        ),
        (_, Input::Report(ReportKind::Exited)) => heard(
            S::Exited,
            Some(Event::Exited),
            &[
                F::Touch,
                F::KeepMessage,
                F::MarkTurn,
                F::TellRoutines,
                F::EndTurnInPolicies,
            ],
        ),
        // The daemon started its process: it runs (a session that
        // exited is never started again under its id).
        (S::Exited, Input::Register { started: true }) => Decision::Refuse(Refusal::Exited),
        (_, Input::Register { started: true }) => {
            heard(S::Running, None, &[F::Touch, F::AttachPolicies])
        }
        (state, Input::Register { started: false }) => {
            heard(state, None, &[F::Touch, F::AttachPolicies])
        }
        // Silence counts once, and never for a session that exited.
        (S::Exited, Input::Silent) => Decision::Ignore,
        (_, Input::Silent) if now.stale => Decision::Ignore,
        (state, Input::Silent) => Decision::Go(Step {
            to: state,
            stale: true,
            events: vec![Event::Stale],
            effects: &[],
        }),
    }
}

#[cfg(test)]
mod tests;

//! `decide` for every session state × input: the steps written out here
//! (not derived from the code under test); every other pair is ignored or
//! refused as listed.

use super::*;
use crate::exhaustive::variants;
use Effect as F;
use Event as E;
use SessionState as S;

impl Standing {
    /// Every standing: each state, stale or not.
    fn all() -> Vec<Standing> {
        let mut all = Vec::new();
        for state in [S::Running, S::Idle, S::AwaitingInput, S::Exited] {
            for stale in [false, true] {
                all.push(Standing { state, stale });
            }
        }
        all
    }
}

impl Input {
    /// Every input (checked against the types by
    /// [`every_state_and_input_is_listed`]).
    fn all() -> Vec<Input> {
        let mut all: Vec<Input> = ReportKind::ALL.into_iter().map(Input::Report).collect();
        all.push(Input::Register { started: false });
        all.push(Input::Register { started: true });
        all.push(Input::Silent);
        all
    }
}

/// A variant added to a state or an input does not compile until it is
/// named here, and this fails until its list holds it.
#[test]
fn every_state_and_input_is_listed() {
    variants!(Input; Input::Report(_), Input::Register { .. }, Input::Silent)
        .assert_listed(&Input::all());
    variants!(ReportKind;
        ReportKind::TurnStart,
        ReportKind::TurnEnd,
        ReportKind::AwaitingInput,
        ReportKind::Exited,
        ReportKind::Heartbeat,
    )
    .assert_listed(&ReportKind::ALL);
    let states: Vec<SessionState> = Standing::all().iter().map(|s| s.state).collect();
    let mut states = states;
    states.dedup();
    variants!(SessionState; S::Running, S::Idle, S::AwaitingInput, S::Exited)
        .assert_listed(&states);
}

const TURN_START: &[Effect] = &[F::Touch, F::KeepMessage, F::TellRoutines, F::AttachPolicies];
const TURN_END: &[Effect] = &[
    F::Touch,
    F::CountTurn,
    F::KeepMessage,
    F::MarkTurn,
    F::TellRoutines,
    F::NameJudging,
    F::NoteUngated,
    F::EndTurnInPolicies,
];
const AWAITING: &[Effect] = &[F::Touch, F::KeepMessage, F::TellRoutines];
const EXITED: &[Effect] = &[
    F::Touch,
    F::KeepMessage,
    F::MarkTurn,
    F::TellRoutines,
    F::EndTurnInPolicies,
];
const REGISTER: &[Effect] = &[F::Touch, F::AttachPolicies];

/// The steps for a session that is not stale; a stale one's are the same
/// but for `session:live` said first (checked below).
fn expected(state: SessionState, input: Input) -> Decision {
    let go = |to, events: &[Event], effects| {
        Decision::Go(Step {
            to,
            stale: false,
            events: events.to_vec(),
            effects,
        })
    };
    let live = state != S::Exited;
    match input {
        Input::Report(ReportKind::Heartbeat) => go(state, &[], &[F::Touch]),
        Input::Report(ReportKind::Exited) if !live => Decision::Ignore,
        Input::Report(_) if !live => Decision::Refuse(Refusal::Exited),
        Input::Report(ReportKind::TurnStart) => go(S::Running, &[E::TurnStart], TURN_START),
        Input::Report(ReportKind::TurnEnd) => go(S::Idle, &[E::TurnEnd], TURN_END),
        Input::Report(ReportKind::AwaitingInput) => {
            go(S::AwaitingInput, &[E::AwaitingInput], AWAITING)
        }
        Input::Report(ReportKind::Exited) => go(S::Exited, &[E::Exited], EXITED),
        Input::Register { started: true } if !live => Decision::Refuse(Refusal::Exited),
        Input::Register { started: true } => go(S::Running, &[], REGISTER),
        Input::Register { started: false } => go(state, &[], REGISTER),
        Input::Silent if live => Decision::Go(Step {
            to: state,
            stale: true,
            events: vec![E::Stale],
            effects: &[],
        }),
        Input::Silent => Decision::Ignore,
    }
}

#[test]
fn every_state_and_input_is_decided_as_listed() {
    let mut checked = 0;
    for now in Standing::all() {
        for input in Input::all() {
            let mut want = expected(now.state, input);
            if now.stale {
                match (&mut want, input) {
                    // Silence is said once.
                    (_, Input::Silent) => want = Decision::Ignore,
                    (Decision::Go(step), _) => step.events.insert(0, E::Live),
                    _ => {}
                }
            }
            assert_eq!(decide(now, input), want, "{now:?} × {input:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 8 * 8);
}

#[test]
fn a_stale_session_that_speaks_is_live_again_first() {
    let stale = Standing {
        state: S::Idle,
        stale: true,
    };
    let Decision::Go(step) = decide(stale, Input::Report(ReportKind::TurnEnd)) else {
        panic!("a turn-end of a stale session is refused");
    };
    assert_eq!(step.events, [E::Live, E::TurnEnd]);
    assert!(!step.stale);
    assert_eq!(step.report_event(), Some(E::TurnEnd));
    let Decision::Go(beat) = decide(stale, Input::Report(ReportKind::Heartbeat)) else {
        panic!("a heartbeat is refused");
    };
    assert_eq!(beat.events, [E::Live]);
    assert_eq!(beat.report_event(), None);
}

#[test]
fn no_step_leaves_exited_and_every_change_is_said() {
    for now in Standing::all() {
        for input in Input::all() {
            let Decision::Go(step) = decide(now, input) else {
                continue;
            };
            if now.state == S::Exited {
                assert_eq!(step.to, S::Exited, "{now:?} × {input:?} left exited");
            }
            if step.stale != now.stale {
                assert!(!step.events.is_empty(), "{now:?} × {input:?} is silent");
            }
            // Every report but a heartbeat is said by its own event.
            if let Input::Report(kind) = input
                && kind != ReportKind::Heartbeat
            {
                assert!(step.report_event().is_some(), "{now:?} × {input:?}");
            }
        }
    }
}

#[test]
fn event_names_are_the_stored_ones() {
    assert_eq!(E::Live.as_str(), "session:live");
    assert_eq!(E::Stale.as_str(), "session:stale");
    assert_eq!(E::TurnStart.as_str(), "session:turn-start");
    assert_eq!(E::TurnEnd.as_str(), "session:turn-end");
    assert_eq!(E::AwaitingInput.as_str(), "session:awaiting-input");
    assert_eq!(E::Exited.as_str(), "session:exited");
}

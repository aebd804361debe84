//! `decide` for every run state × input × step rule, the expected
//! decision written out (not derived from the code under test), with the
//! step and restart counts at their boundaries (the spec's checks and the
//! done marker are `spec_tests`').

use super::*;
use crate::exhaustive::variants;
use Effect as E;
use RunInput as I;
use RunState as S;

const DEADLINE: i64 = 1_000;
/// `autoAllow`'s max in these tests.
const AUTO_MAX: u32 = 2;

fn rules(on_input: InputRule, finish: Finish, last: usize) -> StepRules {
    StepRules {
        on_input,
        finish,
        auto_allow_max: AUTO_MAX,
        last,
        escalation_deadline_ms: DEADLINE,
    }
}

fn running(step: usize, restarts: u32, answered: u32) -> RunState {
    S::Running {
        step,
        restarts,
        answered,
    }
}

fn states() -> Vec<RunState> {
    vec![
        S::Waiting { step: 0 },
        S::Waiting { step: 1 },
        running(0, 0, 0),
        running(1, 0, 0),
        running(0, MAX_RESTARTS, 0),
        running(0, 0, AUTO_MAX - 1),
        running(1, 0, AUTO_MAX),
        S::Escalated {
            step: 0,
            restarts: 0,
            deadline_ms: 5,
        },
        S::Escalated {
            step: 1,
            restarts: MAX_RESTARTS,
            deadline_ms: 5,
        },
        S::Done,
        S::Failed,
        S::Cancelled,
    ]
}

impl InputRule {
    fn all() -> Vec<InputRule> {
        vec![InputRule::AutoAllow, InputRule::Escalate, InputRule::Fail]
    }
}

/// Every [`Finish`].
fn all_finishes() -> Vec<Finish> {
    vec![Finish::TurnEnd, Finish::Policy]
}

/// Every [`InputSource`].
fn all_input_sources() -> Vec<InputSource> {
    vec![InputSource::TurnEnd, InputSource::Permission]
}

impl RunInput {
    /// Every input (checked against the type by [`every_state_and_input_is_listed`]).
    fn all() -> Vec<RunInput> {
        let mut all = vec![
            I::Check {
                ready: false,
                blocked: false,
            },
            I::Check {
                ready: true,
                blocked: false,
            },
            I::Check {
                ready: false,
                blocked: true,
            },
            I::Check {
                ready: true,
                blocked: true,
            },
            I::StepFinished,
            I::PolicySettled { passed: true },
            I::PolicySettled { passed: false },
            I::SessionDied,
            I::Resolved,
            I::Timeout,
            I::Cancel,
            I::Recover { owned_agent: true },
            I::Recover { owned_agent: false },
        ];
        all.extend(all_input_sources().into_iter().map(I::AwaitingInput));
        all
    }
}

/// A variant added to a state or an input does not compile until it is
/// named here, and this fails until its list holds it.
#[test]
fn every_state_and_input_is_listed() {
    variants!(RunInput;
        I::Check { .. },
        I::AwaitingInput(_),
        I::StepFinished,
        I::PolicySettled { .. },
        I::SessionDied,
        I::Resolved,
        I::Timeout,
        I::Cancel,
        I::Recover { .. },
    )
    .assert_listed(&RunInput::all());
    variants!(InputSource; InputSource::TurnEnd, InputSource::Permission)
        .assert_listed(&all_input_sources());
    variants!(InputRule; InputRule::AutoAllow, InputRule::Escalate, InputRule::Fail)
        .assert_listed(&InputRule::all());
    variants!(Finish; Finish::TurnEnd, Finish::Policy).assert_listed(&all_finishes());
    variants!(RunState;
        S::Waiting { .. },
        S::Running { .. },
        S::Escalated { .. },
        S::Done,
        S::Failed,
        S::Cancelled,
    )
    .assert_listed(&states());
}

fn d(next: RunState, effects: Vec<Effect>) -> Decision {
    Decision { next, effects }
}

fn fail(r: FailReason) -> Decision {
    d(S::Failed, vec![E::Fail(r)])
}

/// A step under way (running or escalated) finishing (its marker, or its
/// policy passed), its session dying, or its agent gone with the old
/// daemon.
fn step_ended_or_recovered(step: usize, restarts: u32, input: RunInput) -> Decision {
    match input {
        I::StepFinished | I::PolicySettled { passed: true } if step == 1 => {
            d(S::Done, vec![E::StepDone { step }, E::Done])
        }
        I::StepFinished | I::PolicySettled { passed: true } => {
            d(S::Waiting { step: 1 }, vec![E::StepDone { step }])
        }
        I::SessionDied => fail(FailReason::SessionDied),
        _ if restarts == MAX_RESTARTS => fail(FailReason::TooManyRestarts),
        _ => d(
            running(step, restarts + 1, 0),
            vec![E::RestartStep { step }],
        ),
    }
}

/// What finishes the step decides which inputs count: with a policy, its
/// end does and turn-ends (the policy's to gate) do not; without one,
/// the policy inputs are stale.
fn ignored_by_finish(input: RunInput, finish: Finish) -> bool {
    match finish {
        Finish::Policy => matches!(
            input,
            I::StepFinished | I::AwaitingInput(InputSource::TurnEnd)
        ),
        Finish::TurnEnd => matches!(input, I::PolicySettled { .. }),
    }
}

/// The expected decision, from the rules in the module's doc (last step
/// index 1: step 1 is the last).
fn expected(state: RunState, input: RunInput, rule: InputRule, finish: Finish) -> Decision {
    let same = d(state, vec![]);
    if state.is_terminal() {
        return same;
    }
    if input == I::Cancel {
        return d(S::Cancelled, vec![E::Cancelled]);
    }
    let under_way = matches!(state, S::Running { .. } | S::Escalated { .. });
    if under_way && ignored_by_finish(input, finish) {
        return same;
    }
    if under_way && input == (I::PolicySettled { passed: false }) {
        return fail(FailReason::PolicyFailed);
    }
    match state {
        S::Waiting { step } => match input {
            I::Check { blocked: true, .. } => fail(FailReason::WaitFailed),
            I::Check { ready: true, .. } => d(running(step, 0, 0), vec![E::StartStep { step }]),
            _ => same,
        },
        S::Running {
            step,
            restarts,
            answered,
        } => match input {
            I::AwaitingInput(src) => match rule {
                InputRule::AutoAllow if answered >= AUTO_MAX => {
                    fail(FailReason::AutoAllowExhausted)
                }
                InputRule::AutoAllow => d(
                    running(step, restarts, answered + 1),
                    vec![E::AutoAllow(src)],
                ),
                InputRule::Escalate => d(
                    S::Escalated {
                        step,
                        restarts,
                        deadline_ms: DEADLINE,
                    },
                    vec![E::Escalate(src)],
                ),
                InputRule::Fail => fail(FailReason::InputRefused),
            },
            I::StepFinished
            | I::PolicySettled { .. }
            | I::SessionDied
            | I::Recover { owned_agent: true } => step_ended_or_recovered(step, restarts, input),
            _ => same,
        },
        S::Escalated { step, restarts, .. } => match input {
            I::Resolved => d(running(step, restarts, 0), vec![E::SendResponse]),
            I::Timeout => fail(FailReason::EscalationTimedOut),
            I::StepFinished
            | I::PolicySettled { .. }
            | I::SessionDied
            | I::Recover { owned_agent: true } => step_ended_or_recovered(step, restarts, input),
            I::Recover { owned_agent: false } => d(state, vec![E::RearmTimer]),
            _ => same,
        },
        S::Done | S::Failed | S::Cancelled => same,
    }
}

#[test]
fn every_state_input_rule_and_finish() {
    let mut n = 0;
    for s in states() {
        for i in RunInput::all() {
            for r in InputRule::all() {
                for f in all_finishes() {
                    assert_eq!(
                        decide(s, i, rules(r, f, 1)),
                        expected(s, i, r, f),
                        "{s:?} × {i:?} × {r:?} × {f:?}"
                    );
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 12 * 15 * 3 * 2);
}

#[test]
fn auto_allow_answers_max_times_then_the_next_ask_fails_the_run() {
    let r = rules(InputRule::AutoAllow, Finish::TurnEnd, 0);
    let mut s = running(0, 0, 0);
    for n in 1..=AUTO_MAX {
        let a = decide(s, I::AwaitingInput(InputSource::TurnEnd), r);
        assert_eq!(
            a.effects,
            vec![E::AutoAllow(InputSource::TurnEnd)],
            "ask {n}"
        );
        s = a.next;
    }
    assert_eq!(
        decide(s, I::AwaitingInput(InputSource::Permission), r),
        fail(FailReason::AutoAllowExhausted)
    );
}

#[test]
fn a_policy_step_finishes_when_its_policy_passes_and_never_on_a_turn_end() {
    let r = rules(InputRule::Escalate, Finish::Policy, 1);
    let s = running(0, 0, 0);
    for turn in [I::StepFinished, I::AwaitingInput(InputSource::TurnEnd)] {
        assert_eq!(decide(s, turn, r), d(s, vec![]), "{turn:?}");
    }
    assert_eq!(
        decide(s, I::PolicySettled { passed: true }, r),
        d(S::Waiting { step: 1 }, vec![E::StepDone { step: 0 }])
    );
    assert_eq!(
        decide(s, I::PolicySettled { passed: false }, r),
        fail(FailReason::PolicyFailed)
    );
}

#[test]
fn terminal_states_never_emit_again() {
    for s in [S::Done, S::Failed, S::Cancelled] {
        for i in RunInput::all() {
            assert!(
                decide(s, i, rules(InputRule::Escalate, Finish::TurnEnd, 0))
                    .effects
                    .is_empty()
            );
        }
    }
}

#[test]
fn a_whole_run_auto_allow_then_escalate_and_resolve() {
    let r0 = rules(InputRule::AutoAllow, Finish::TurnEnd, 1);
    let r1 = rules(InputRule::Escalate, Finish::TurnEnd, 1);
    let ready = I::Check {
        ready: true,
        blocked: false,
    };
    let mut s = initial();
    s = decide(s, ready, r0).next;
    let a = decide(s, I::AwaitingInput(InputSource::TurnEnd), r0);
    assert_eq!(a.effects, vec![E::AutoAllow(InputSource::TurnEnd)]);
    s = decide(a.next, I::StepFinished, r0).next;
    assert_eq!(s, S::Waiting { step: 1 });
    s = decide(s, ready, r1).next;
    s = decide(s, I::AwaitingInput(InputSource::Permission), r1).next;
    assert!(matches!(s, S::Escalated { step: 1, .. }));
    s = decide(s, I::Resolved, r1).next;
    let end = decide(s, I::StepFinished, r1);
    assert_eq!(end.next, S::Done);
    assert_eq!(end.effects, vec![E::StepDone { step: 1 }, E::Done]);
}

#[test]
fn the_state_round_trips_through_its_stored_form() {
    for s in states() {
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            serde_json::from_str::<RunState>(&json).unwrap(),
            s,
            "{json}"
        );
    }
}

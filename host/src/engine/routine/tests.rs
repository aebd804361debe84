//! `decide` for every run state × input × step rule, the expected
//! decision written out (not derived from the code under test), with the
//! step and restart counts at their boundaries; the spec's checks and the
//! done marker.

use super::*;
use Effect as E;
use RunInput as I;
use RunState as S;

const DEADLINE: i64 = 1_000;

fn rules(on_input: InputRule, last: usize) -> StepRules {
    StepRules {
        on_input,
        last,
        escalation_deadline_ms: DEADLINE,
    }
}

fn states() -> Vec<RunState> {
    vec![
        S::Waiting { step: 0 },
        S::Waiting { step: 1 },
        S::Running {
            step: 0,
            restarts: 0,
        },
        S::Running {
            step: 1,
            restarts: 0,
        },
        S::Running {
            step: 0,
            restarts: MAX_RESTARTS,
        },
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

fn inputs() -> Vec<RunInput> {
    vec![
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
        I::AwaitingInput(InputSource::TurnEnd),
        I::AwaitingInput(InputSource::Permission),
        I::StepFinished,
        I::SessionDied,
        I::Resolved,
        I::Timeout,
        I::Cancel,
        I::Recover { owned_agent: true },
        I::Recover { owned_agent: false },
    ]
}

fn d(next: RunState, effects: Vec<Effect>) -> Decision {
    Decision { next, effects }
}

fn fail(r: FailReason) -> Decision {
    d(S::Failed, vec![E::Fail(r)])
}

/// A step under way (running or escalated) finishing, its session dying,
/// or its agent gone with the old daemon.
fn step_ended_or_recovered(step: usize, restarts: u32, input: RunInput) -> Decision {
    match input {
        I::StepFinished if step == 1 => d(S::Done, vec![E::StepDone { step }, E::Done]),
        I::StepFinished => d(S::Waiting { step: 1 }, vec![E::StepDone { step }]),
        I::SessionDied => fail(FailReason::SessionDied),
        _ if restarts == MAX_RESTARTS => fail(FailReason::TooManyRestarts),
        _ => d(
            S::Running {
                step,
                restarts: restarts + 1,
            },
            vec![E::RestartStep { step }],
        ),
    }
}

/// The expected decision, from the rules in the module's doc (last step
/// index 1: step 1 is the last).
fn expected(state: RunState, input: RunInput, rule: InputRule) -> Decision {
    let same = d(state, vec![]);
    if state.is_terminal() {
        return same;
    }
    if input == I::Cancel {
        return d(S::Cancelled, vec![E::Cancelled]);
    }
    match state {
        S::Waiting { step } => match input {
            I::Check { blocked: true, .. } => fail(FailReason::WaitFailed),
            I::Check { ready: true, .. } => d(
                S::Running { step, restarts: 0 },
                vec![E::StartStep { step }],
            ),
            _ => same,
        },
        S::Running { step, restarts } => match input {
            I::AwaitingInput(src) => match rule {
                InputRule::AutoAllow => d(state, vec![E::AutoAllow(src)]),
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
            I::StepFinished | I::SessionDied | I::Recover { owned_agent: true } => {
                step_ended_or_recovered(step, restarts, input)
            }
            _ => same,
        },
        S::Escalated { step, restarts, .. } => match input {
            I::Resolved => d(S::Running { step, restarts }, vec![E::SendResponse]),
            I::Timeout => fail(FailReason::EscalationTimedOut),
            I::StepFinished | I::SessionDied | I::Recover { owned_agent: true } => {
                step_ended_or_recovered(step, restarts, input)
            }
            I::Recover { owned_agent: false } => d(state, vec![E::RearmTimer]),
            _ => same,
        },
        S::Done | S::Failed | S::Cancelled => same,
    }
}

#[test]
fn every_state_input_and_rule() {
    let mut n = 0;
    for s in states() {
        for i in inputs() {
            for r in [InputRule::AutoAllow, InputRule::Escalate, InputRule::Fail] {
                assert_eq!(
                    decide(s, i, rules(r, 1)),
                    expected(s, i, r),
                    "{s:?} × {i:?} × {r:?}"
                );
                n += 1;
            }
        }
    }
    assert_eq!(n, 10 * 13 * 3);
}

#[test]
fn terminal_states_never_emit_again() {
    for s in [S::Done, S::Failed, S::Cancelled] {
        for i in inputs() {
            assert!(
                decide(s, i, rules(InputRule::Escalate, 0))
                    .effects
                    .is_empty()
            );
        }
    }
}

#[test]
fn a_whole_run_auto_allow_then_escalate_and_resolve() {
    let r0 = rules(InputRule::AutoAllow, 1);
    let r1 = rules(InputRule::Escalate, 1);
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

fn step(label: &str, wait: &[&str]) -> StepSpec {
    StepSpec {
        label: label.into(),
        prompt: None,
        session: SessionSpec::Acp {
            command: vec!["agent".into()],
            cwd: "/tmp".into(),
            permission: None,
        },
        wait_for: wait.iter().map(|w| w.to_string()).collect(),
        policy: None,
        on_input: OnInput::default(),
    }
}

#[test]
fn specs_are_checked() {
    let ok = RoutineSpec {
        label: None,
        steps: vec![step("a", &[]), step("b", &["a", "sess-elsewhere"])],
    };
    assert_eq!(ok.validate(), Ok(()));
    let none = RoutineSpec {
        label: None,
        steps: vec![],
    };
    assert_eq!(none.validate(), Err(SpecError::NoSteps));
    let dup = RoutineSpec {
        label: None,
        steps: vec![step("a", &[]), step("a", &[])],
    };
    assert_eq!(dup.validate(), Err(SpecError::DuplicateLabel("a".into())));
    let later = RoutineSpec {
        label: None,
        steps: vec![step("a", &["b"]), step("b", &[])],
    };
    assert!(matches!(
        later.validate(),
        Err(SpecError::WaitsForLater { .. })
    ));
    let itself = RoutineSpec {
        label: None,
        steps: vec![step("a", &["a"])],
    };
    assert!(matches!(
        itself.validate(),
        Err(SpecError::WaitsForLater { .. })
    ));
    let mut empty = step("a", &[]);
    empty.session = SessionSpec::Acp {
        command: vec![],
        cwd: "/".into(),
        permission: None,
    };
    let spec = RoutineSpec {
        label: None,
        steps: vec![empty],
    };
    assert_eq!(spec.validate(), Err(SpecError::EmptyCommand("a".into())));
    let mut zero = step("a", &[]);
    zero.on_input = OnInput::Escalate { timeout_secs: 0 };
    let spec = RoutineSpec {
        label: None,
        steps: vec![zero],
    };
    assert_eq!(spec.validate(), Err(SpecError::ZeroTimeout("a".into())));
}

#[test]
fn a_spec_parses_from_its_json_and_unknown_fields_are_refused() {
    let spec: RoutineSpec = serde_json::from_str(
        r#"{"steps":[{"label":"a","prompt":"hi","session":{"acp":{"command":["x"],"cwd":"/w"}},
            "onInput":{"mode":"auto-allow","prompt":"go on"}},
           {"label":"b","session":{"existing":"s1"},"waitFor":["a"],"onInput":{"mode":"escalate"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        spec.steps[1].on_input,
        OnInput::Escalate {
            timeout_secs: DEFAULT_ESCALATION_SECS
        }
    );
    assert_eq!(spec.steps[1].session, SessionSpec::Existing("s1".into()));
    assert!(serde_json::from_str::<RoutineSpec>(r#"{"steps":[],"evil":1}"#).is_err());
}

#[test]
fn the_done_marker_is_a_line_of_its_own() {
    assert!(finishes_step(Some("work done\nSTEP DONE\n")));
    assert!(finishes_step(Some("**step done**")));
    assert!(!finishes_step(Some("I am not STEP DONE yet?")));
    assert!(!finishes_step(None));
    assert!(step_prompt(&step("a", &[])).contains(STEP_DONE));
}

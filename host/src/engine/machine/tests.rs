//! `decide` for every state × input: the transitions are listed here
//! explicitly (not derived from the code under test), every other pair
//! must be ignored or refused as listed.

use super::*;
use crate::exhaustive::variants;
use PolicyEvent as E;
use PolicyStatus as S;

impl AfterPass {
    pub(super) fn all() -> Vec<AfterPass> {
        vec![AfterPass::Done, AfterPass::AwaitAck, AfterPass::CommitNow]
    }
}

impl Verdict {
    pub(super) fn all() -> Vec<Verdict> {
        let mut all: Vec<Verdict> = AfterPass::all().into_iter().map(Verdict::Pass).collect();
        all.extend([
            Verdict::PassChanged,
            Verdict::PassUnreadable,
            Verdict::Fail { retry: true },
            Verdict::Fail { retry: false },
            Verdict::Error,
            Verdict::ErrorRetry,
            Verdict::PassReview,
        ]);
        all
    }
}

impl AfterNudge {
    pub(super) fn all() -> Vec<AfterNudge> {
        vec![
            AfterNudge::Watch,
            AfterNudge::AllEnded,
            AfterNudge::NoneAlive,
        ]
    }
}

impl CommitResult {
    pub(super) fn all() -> Vec<CommitResult> {
        vec![
            CommitResult::Committed,
            CommitResult::Stale,
            CommitResult::Failed,
        ]
    }
}

impl ReviewStep {
    pub(super) fn all() -> Vec<ReviewStep> {
        let mut all: Vec<ReviewStep> = AfterPass::all().into_iter().map(ReviewStep::Ship).collect();
        all.extend([ReviewStep::Repair, ReviewStep::Escalate]);
        all
    }
}

impl Input {
    /// Every input: each variant with every value of its fields
    /// (checked against the types by [`every_input_is_listed`]).
    pub(super) fn all() -> Vec<Input> {
        let mut all = vec![
            Input::TurnEnd { more_pending: true },
            Input::TurnEnd {
                more_pending: false,
            },
            Input::SlotTaken,
            Input::Cancel,
            Input::Recover,
            Input::StoreError,
            Input::Poisoned,
            Input::Corrupt,
            Input::StatusUnreadable,
            Input::MemberStale { cancel: false },
            Input::MemberStale { cancel: true },
            Input::Expired,
        ];
        all.extend(Verdict::all().into_iter().map(Input::Verdict));
        all.extend(AfterNudge::all().into_iter().map(Input::NudgeDelivered));
        all.extend(ReviewStep::all().into_iter().map(Input::Review));
        for alive in [true, false] {
            all.push(Input::RequestChanges { alive });
        }
        for approve in [true, false] {
            for fresh in [true, false] {
                for comment in [true, false] {
                    all.push(Input::Ack {
                        approve,
                        fresh,
                        comment,
                    });
                }
            }
        }
        all.extend(CommitResult::all().into_iter().map(Input::Commit));
        all
    }
}

/// The lists above name every variant of every input type: a variant
/// added to one does not compile until it is named here, and this fails
/// until its list holds it.
#[test]
fn every_input_is_listed() {
    variants!(Input;
        Input::TurnEnd { .. },
        Input::SlotTaken,
        Input::Verdict(_),
        Input::NudgeDelivered(_),
        Input::Ack { .. },
        Input::Cancel,
        Input::RequestChanges { .. },
        Input::Commit(_),
        Input::Recover,
        Input::StoreError,
        Input::Poisoned,
        Input::Corrupt,
        Input::StatusUnreadable,
        Input::MemberStale { .. },
        Input::Expired,
        Input::Review(_),
    )
    .assert_listed(&Input::all());
    variants!(Verdict;
        Verdict::Pass(_),
        Verdict::PassChanged,
        Verdict::PassUnreadable,
        Verdict::Fail { .. },
        Verdict::Error,
        Verdict::ErrorRetry,
        Verdict::PassReview,
    )
    .assert_listed(&Verdict::all());
    variants!(AfterPass; AfterPass::Done, AfterPass::AwaitAck, AfterPass::CommitNow)
        .assert_listed(&AfterPass::all());
    variants!(AfterNudge; AfterNudge::Watch, AfterNudge::AllEnded, AfterNudge::NoneAlive)
        .assert_listed(&AfterNudge::all());
    variants!(CommitResult; CommitResult::Committed, CommitResult::Stale, CommitResult::Failed)
        .assert_listed(&CommitResult::all());
    variants!(ReviewStep; ReviewStep::Ship(_), ReviewStep::Repair, ReviewStep::Escalate)
        .assert_listed(&ReviewStep::all());
}

mod table;
use table::expected;

/// The refusals, written out.
fn refused(state: PolicyStatus, input: Input) -> Option<Refusal> {
    match (state, input) {
        (S::Done | S::Cancelled, Input::Cancel) => Some(Refusal::Settled),
        (s, Input::Ack { .. }) if s != S::AwaitingAck => Some(Refusal::NotAwaitingAck),
        (S::AwaitingAck, Input::RequestChanges { alive: false }) => Some(Refusal::NoMemberAlive),
        (s, Input::RequestChanges { .. }) if s != S::AwaitingAck => Some(Refusal::NotAwaitingAck),
        _ => None,
    }
}

#[test]
fn every_state_and_input_is_decided_as_listed() {
    let table = expected();
    let mut checked = 0;
    for state in PolicyStatus::ALL {
        for input in Input::all() {
            let got = decide(state, input);
            let want = match table.iter().find(|(s, i, ..)| *s == state && *i == input) {
                Some((_, _, to, events, effects)) => {
                    let Decision::Go(step) = got else {
                        panic!("{state:?} × {input:?}: {got:?}, expected a step to {to:?}");
                    };
                    assert_eq!(step.to, *to, "{state:?} × {input:?}");
                    assert_eq!(step.events, events.as_slice(), "{state:?} × {input:?}");
                    assert_eq!(step.effects, effects.as_slice(), "{state:?} × {input:?}");
                    checked += 1;
                    continue;
                }
                None => match refused(state, input) {
                    Some(r) => Decision::Refuse(r),
                    None => Decision::Ignore,
                },
            };
            assert_eq!(got, want, "{state:?} × {input:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, PolicyStatus::ALL.len() * Input::all().len());
    // Every listed transition was met.
    assert_eq!(
        table.len(),
        table
            .iter()
            .filter(|(s, i, ..)| matches!(decide(*s, *i), Decision::Go(_)))
            .count()
    );
}

#[test]
fn no_step_leaves_a_terminal_state_and_every_block_says_so() {
    for state in PolicyStatus::ALL {
        for input in Input::all() {
            let Decision::Go(step) = decide(state, input) else {
                continue;
            };
            if matches!(state, S::Done | S::Cancelled) {
                assert_eq!(
                    step.to, state,
                    "{state:?} × {input:?} left a terminal state"
                );
            }
            if step.to == S::Blocked {
                assert_eq!(
                    step.events.last(),
                    Some(&E::Blocked),
                    "{state:?} × {input:?}"
                );
            }
            if step.to == S::Cancelled && state != S::Cancelled {
                assert_eq!(
                    step.events.last(),
                    Some(&E::Cancelled),
                    "{state:?} × {input:?}"
                );
            }
            // A change of state is always told by an event.
            if step.to != state {
                assert!(!step.events.is_empty(), "{state:?} × {input:?} is silent");
            }
        }
    }
}

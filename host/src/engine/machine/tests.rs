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

/// A transition: from, input, to, events, effects.
type Row = (
    PolicyStatus,
    Input,
    PolicyStatus,
    Vec<PolicyEvent>,
    Vec<Effect>,
);

/// Every transition of the lifecycle, written out.
fn expected() -> Vec<Row> {
    use Effect as F;
    let mut t = vec![
        (
            S::Watching,
            Input::TurnEnd { more_pending: true },
            S::Watching,
            vec![],
            vec![],
        ),
        (
            S::Watching,
            Input::TurnEnd {
                more_pending: false,
            },
            S::Queued,
            vec![E::Queued],
            vec![F::RunGate],
        ),
        (
            S::Queued,
            Input::SlotTaken,
            S::Gating,
            vec![E::Gating],
            vec![],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Pass(AfterPass::Done)),
            S::Done,
            vec![E::Passed, E::Done],
            vec![F::ChainNext],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Pass(AfterPass::AwaitAck)),
            S::AwaitingAck,
            vec![E::Passed, E::CommitReady],
            vec![],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Pass(AfterPass::CommitNow)),
            S::Committing,
            vec![E::Passed, E::CommitReady, E::Approved],
            vec![F::Commit],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::PassChanged),
            S::Queued,
            vec![E::Queued],
            vec![F::RunGate],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::PassUnreadable),
            S::Blocked,
            vec![E::Passed, E::Blocked],
            vec![],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Fail { retry: true }),
            S::Nudging,
            vec![E::Failed, E::Nudge],
            vec![F::Nudge],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Fail { retry: false }),
            S::Blocked,
            vec![E::Failed, E::Blocked],
            vec![],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::Error),
            S::Blocked,
            vec![E::Failed, E::Blocked],
            vec![],
        ),
        (
            S::Gating,
            Input::Verdict(Verdict::ErrorRetry),
            S::Queued,
            vec![E::Retry, E::Queued],
            vec![F::RetryGate],
        ),
        (
            S::Watching,
            Input::MemberStale { cancel: false },
            S::Blocked,
            vec![E::Blocked],
            vec![],
        ),
        (
            S::Watching,
            Input::MemberStale { cancel: true },
            S::Cancelled,
            vec![E::Cancelled],
            vec![],
        ),
        (
            S::Nudging,
            Input::NudgeDelivered(AfterNudge::Watch),
            S::Watching,
            vec![E::Watching],
            vec![F::DeliverNudge],
        ),
        (
            S::Nudging,
            Input::NudgeDelivered(AfterNudge::AllEnded),
            S::Queued,
            vec![E::Queued],
            vec![F::RunGate, F::DeliverNudge],
        ),
        (
            S::Nudging,
            Input::NudgeDelivered(AfterNudge::NoneAlive),
            S::Blocked,
            vec![E::Blocked],
            vec![],
        ),
        (
            S::Committing,
            Input::Commit(CommitResult::Committed),
            S::Done,
            vec![E::Committed, E::Done],
            vec![F::ChainNext],
        ),
        (
            S::Committing,
            Input::Commit(CommitResult::Stale),
            S::Queued,
            vec![E::Stale, E::Queued],
            vec![F::RunGate],
        ),
        (
            S::Committing,
            Input::Commit(CommitResult::Failed),
            S::Blocked,
            vec![E::CommitFailed, E::Blocked],
            vec![],
        ),
        (
            S::Cancelled,
            Input::Commit(CommitResult::Committed),
            S::Cancelled,
            vec![E::Committed],
            vec![],
        ),
        (
            S::Gating,
            Input::Recover,
            S::Queued,
            vec![E::Queued],
            vec![F::RunGate],
        ),
        (
            S::Queued,
            Input::Recover,
            S::Queued,
            vec![],
            vec![F::RunGate],
        ),
        (
            S::Nudging,
            Input::Recover,
            S::Nudging,
            vec![],
            vec![F::Nudge],
        ),
        (
            S::Committing,
            Input::Recover,
            S::Committing,
            vec![],
            vec![F::Commit],
        ),
        (
            S::Queued,
            Input::Poisoned,
            S::Blocked,
            vec![E::Blocked],
            vec![],
        ),
        (
            S::Gating,
            Input::Poisoned,
            S::Blocked,
            vec![E::Blocked],
            vec![],
        ),
    ];
    for fresh in [true, false] {
        t.push((
            S::AwaitingAck,
            Input::Ack {
                approve: false,
                fresh,
                comment: false,
            },
            S::Cancelled,
            vec![E::Rejected, E::Cancelled],
            vec![],
        ));
        t.push((
            S::AwaitingAck,
            Input::Ack {
                approve: false,
                fresh,
                comment: true,
            },
            S::Cancelled,
            vec![E::Rejected, E::Nudge, E::Cancelled],
            vec![F::DeliverNudge],
        ));
    }
    t.push((
        S::AwaitingAck,
        Input::RequestChanges { alive: true },
        S::Watching,
        vec![E::Nudge, E::Watching],
        vec![F::DeliverNudge],
    ));
    // An approval's comment is refused before the machine sees it; were one
    // to reach it, it changes nothing.
    for comment in [true, false] {
        t.push((
            S::AwaitingAck,
            Input::Ack {
                approve: true,
                fresh: true,
                comment,
            },
            S::Committing,
            vec![E::Approved],
            vec![F::Commit],
        ));
        t.push((
            S::AwaitingAck,
            Input::Ack {
                approve: true,
                fresh: false,
                comment,
            },
            S::Queued,
            vec![E::Stale, E::Queued],
            vec![F::RunGate],
        ));
    }
    // A row that does not decode blocks any state that is not settled.
    for s in [
        S::Watching,
        S::Queued,
        S::Gating,
        S::Nudging,
        S::AwaitingAck,
        S::Committing,
        S::Reviewing,
    ] {
        t.push((
            s,
            Input::Corrupt,
            S::Blocked,
            vec![E::Blocked],
            vec![F::AbortGate],
        ));
    }
    // A status that does not decode reads as blocked: stored so, said.
    t.push((
        S::Blocked,
        Input::StatusUnreadable,
        S::Blocked,
        vec![E::Blocked],
        vec![],
    ));
    // A deadline blocks whatever waits (not a gate or commit in flight).
    for s in [S::Watching, S::Queued, S::Nudging, S::AwaitingAck] {
        t.push((
            s,
            Input::Expired,
            S::Blocked,
            vec![E::Expired, E::Blocked],
            vec![],
        ));
    }
    // A review waits on its reviewer: the deadline blocks it, and kills
    // a judge reviewing.
    t.push((
        S::Reviewing,
        Input::Expired,
        S::Blocked,
        vec![E::Expired, E::Blocked],
        vec![F::AbortGate],
    ));
    // The review chain: a pass with a review goes to reviewing; the
    // chain's decision leaves it, each terminal emission from there only.
    t.push((
        S::Gating,
        Input::Verdict(Verdict::PassReview),
        S::Reviewing,
        vec![E::Passed, E::ReviewStarted],
        vec![F::Review],
    ));
    t.push((
        S::Reviewing,
        Input::Recover,
        S::Reviewing,
        vec![],
        vec![F::Review],
    ));
    t.push((
        S::Reviewing,
        Input::Review(ReviewStep::Ship(AfterPass::Done)),
        S::Done,
        vec![E::ReviewVerdict, E::ReviewShipped, E::Done],
        vec![F::ChainNext],
    ));
    t.push((
        S::Reviewing,
        Input::Review(ReviewStep::Ship(AfterPass::AwaitAck)),
        S::AwaitingAck,
        vec![E::ReviewVerdict, E::ReviewShipped, E::CommitReady],
        vec![],
    ));
    t.push((
        S::Reviewing,
        Input::Review(ReviewStep::Ship(AfterPass::CommitNow)),
        S::Committing,
        vec![
            E::ReviewVerdict,
            E::ReviewShipped,
            E::CommitReady,
            E::Approved,
        ],
        vec![F::Commit],
    ));
    t.push((
        S::Reviewing,
        Input::Review(ReviewStep::Repair),
        S::Watching,
        vec![E::ReviewVerdict, E::ReviewRepair, E::Watching],
        vec![F::DeliverRepair],
    ));
    t.push((
        S::Reviewing,
        Input::Review(ReviewStep::Escalate),
        S::Blocked,
        vec![E::ReviewVerdict, E::ReviewEscalated, E::Blocked],
        vec![],
    ));
    // Cancel works in every state that is not terminal.
    for s in [
        S::Watching,
        S::Queued,
        S::Gating,
        S::Nudging,
        S::AwaitingAck,
        S::Committing,
        S::Reviewing,
        S::Blocked,
    ] {
        t.push((
            s,
            Input::Cancel,
            S::Cancelled,
            vec![E::Cancelled],
            vec![F::AbortGate],
        ));
    }
    t
}

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

#[test]
fn event_names_are_the_stored_ones() {
    for e in PolicyEvent::ALL {
        assert!(
            e.as_str().starts_with("policy:") || e.as_str().starts_with("review:"),
            "{}",
            e.as_str()
        );
        assert_eq!(PolicyEvent::parse(e.as_str()), Some(e));
    }
    assert_eq!(PolicyEvent::CommitReady.as_str(), "policy:commit-ready");
    assert_eq!(PolicyEvent::NextRefused.as_str(), "policy:next-refused");
    assert_eq!(PolicyEvent::Expired.as_str(), "policy:expired");
    assert_eq!(PolicyEvent::Retry.as_str(), "policy:retry");
    assert_eq!(PolicyEvent::parse("policy:unknown"), None);
}

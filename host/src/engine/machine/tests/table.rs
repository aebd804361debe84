//! The lifecycle's transitions, written out row by row (not derived from
//! the code under test): what `decide` must answer for each.

use super::super::*;
use PolicyEvent as E;
use PolicyStatus as S;

/// A transition: from, input, to, events, effects.
pub(super) type Row = (
    PolicyStatus,
    Input,
    PolicyStatus,
    Vec<PolicyEvent>,
    Vec<Effect>,
);

/// Every transition of the lifecycle, written out.
pub(super) fn expected() -> Vec<Row> {
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

//! The policy lifecycle as a pure state machine: which state follows a
//! state and an input, which events tell of it, and what the engine must
//! do once the transition is stored.
//!
//! It owns the rules only. It must never touch the store, the clock, a
//! process or the network: [`decide`] is a pure function, unit-tested for
//! every state × input, and the engine's one transition function
//! (`Policies::transition`) is the only place that applies its answer.

use crate::store::PolicyStatus;

mod events;
pub use events::PolicyEvent;

/// What a finished gate found, as far as the lifecycle cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Passed, and the judged content is what follows.
    Pass(AfterPass),
    /// Passed, but gated on the live workspace its commit paths changed
    /// while the gate ran: it gates again.
    PassChanged,
    /// Passed, but the commit paths could not be read to pin them.
    PassUnreadable,
    /// Failed; `retry`: a retry is left and a member is alive to act on
    /// the nudge.
    Fail { retry: bool },
    /// The gate could not run (timeout, crash, trap, missing adapter).
    Error,
    /// The gate could not run, and an infrastructure retry is left: it
    /// runs again after a backoff.
    ErrorRetry,
    /// Passed, and the policy has a `review`: its reviewer reviews the
    /// change before the pass goes on (what it goes on to is stored with
    /// the chain).
    PassReview,
}

/// What a pass leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterPass {
    /// Nothing to commit: the policy is done.
    Done,
    /// A commit a human must approve.
    AwaitAck,
    /// A commit approved by the policy itself (`requireHumanAck: false`).
    CommitNow,
}

/// What the nudge task found once the nudge was published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterNudge {
    /// Live members are awaited again.
    Watch,
    /// Every live member ended a turn since the nudge already.
    AllEnded,
    /// No member is alive to act on it.
    NoneAlive,
}

/// How a commit attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitResult {
    /// Published (or nothing to commit: the content was HEAD's).
    Committed,
    /// The content changed or the branch moved under it: it gates again.
    Stale,
    /// It cannot be made (a planted symlink, a ref that keeps moving).
    Failed,
}

/// Everything that can happen to a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A member ended its turn or exited (exit ends the last turn);
    /// `more_pending`: other members are still awaited.
    TurnEnd {
        more_pending: bool,
    },
    /// A gating slot was taken for it.
    SlotTaken,
    /// Its gate finished.
    Verdict(Verdict),
    /// The nudge task watched the members again.
    NudgeDelivered(AfterNudge),
    /// A person's answer to `commit-ready`; `fresh`: the content to
    /// commit is still the judged one; `comment`: a reject carries the
    /// operator's comment, delivered to the agent as its nudge.
    Ack {
        approve: bool,
        fresh: bool,
        comment: bool,
    },
    Cancel,
    /// The operator's line comments on a change awaiting its ack ("request
    /// changes"); `alive`: a member is alive to act on them.
    RequestChanges {
        alive: bool,
    },
    Commit(CommitResult),
    /// The daemon restarted, or the sweep found it without a task.
    Recover,
    /// A task driving it stopped on a store error before storing anything.
    StoreError,
    /// Its gate killed the daemon twice (a run marker survived two starts).
    Poisoned,
    /// Its stored row does not decode (a damaged store): it cannot go on.
    Corrupt,
    /// Its stored status itself does not decode: it reads as `blocked`
    /// (the store's placeholder), and is stored blocked, and said.
    StatusUnreadable,
    /// A member is silent past `[daemon] heartbeat_timeout` (the
    /// watchdog); `cancel`: `[daemon] on_stale = "cancel"`, else block.
    MemberStale {
        cancel: bool,
    },
    /// Its `deadline` ran out (the watchdog).
    Expired,
    /// The review chain's decision on a reviewer's verdict
    /// (`engine::chain::decide`).
    Review(ReviewStep),
}

/// What a reviewer's verdict leads to, as the chain decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewStep {
    /// SHIP: on to what the pass leads to.
    Ship(AfterPass),
    /// BLOCK with a cycle left: the repairer is nudged and watched.
    Repair,
    /// BLOCK with no cycle left (or no repairer alive): blocked, once.
    Escalate,
}

/// Why an input is refused (a conflict answered to the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NotAwaitingAck,
    Settled,
    /// Changes requested of a policy none of whose members is alive.
    NoMemberAlive,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::NotAwaitingAck => "not-awaiting-ack",
            Refusal::Settled => "settled",
            Refusal::NoMemberAlive => "no-member-alive",
        }
    }
}

/// What the engine does once the transition is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Run (or queue) its gate.
    RunGate,
    /// Kill its running gate, if any.
    AbortGate,
    /// Publish the nudge's watch and deliver it.
    Nudge,
    /// Deliver the nudge message to the live members.
    DeliverNudge,
    /// Make the commit.
    Commit,
    /// Attach the `next` policy (in the same transaction).
    ChainNext,
    /// Run its gate again after the infrastructure retries' backoff.
    RetryGate,
    /// Run (or resume) its review.
    Review,
    /// Deliver the repair nudge to the repairer (the review task's own).
    DeliverRepair,
}

/// A transition: the new state, the events telling of it (in order), the
/// effects to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub to: PolicyStatus,
    pub events: &'static [PolicyEvent],
    pub effects: &'static [Effect],
}

/// The answer of [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The input changes nothing in this state (a verdict for a policy
    /// cancelled while its gate ran, a turn-end it does not wait for).
    Ignore,
    /// The input is an error in this state.
    Refuse(Refusal),
    Go(Step),
}

const fn go(
    to: PolicyStatus,
    events: &'static [PolicyEvent],
    effects: &'static [Effect],
) -> Decision {
    Decision::Go(Step {
        to,
        events,
        effects,
    })
}

/// The lifecycle: what `input` does to a policy in `state`.
pub fn decide(state: PolicyStatus, input: Input) -> Decision {
    use AfterNudge as N;
    use Effect as F;
    use PolicyEvent as E;
    use PolicyStatus as S;
    match (state, input) {
        // Cancel: every state but a terminal one.
        (S::Done | S::Cancelled, Input::Cancel) => Decision::Refuse(Refusal::Settled),
        (_, Input::Cancel) => go(S::Cancelled, &[E::Cancelled], &[F::AbortGate]),

        (S::Watching, Input::TurnEnd { more_pending: true }) => go(S::Watching, &[], &[]),
        (
            S::Watching,
            Input::TurnEnd {
                more_pending: false,
            },
        ) => go(S::Queued, &[E::Queued], &[F::RunGate]),
        (_, Input::TurnEnd { .. }) => Decision::Ignore,

        (S::Queued, Input::SlotTaken) => go(S::Gating, &[E::Gating], &[]),
        (_, Input::SlotTaken) => Decision::Ignore,

        (S::Gating, Input::Verdict(v)) => match v {
            Verdict::Pass(AfterPass::Done) => go(S::Done, &[E::Passed, E::Done], &[F::ChainNext]),
            Verdict::Pass(AfterPass::AwaitAck) => {
                go(S::AwaitingAck, &[E::Passed, E::CommitReady], &[])
            }
            Verdict::Pass(AfterPass::CommitNow) => go(
                S::Committing,
                &[E::Passed, E::CommitReady, E::Approved],
                &[F::Commit],
            ),
            Verdict::PassChanged => go(S::Queued, &[E::Queued], &[F::RunGate]),
            Verdict::PassUnreadable => go(S::Blocked, &[E::Passed, E::Blocked], &[]),
            Verdict::Fail { retry: true } => go(S::Nudging, &[E::Failed, E::Nudge], &[F::Nudge]),
            Verdict::Fail { retry: false } | Verdict::Error => {
                go(S::Blocked, &[E::Failed, E::Blocked], &[])
            }
            Verdict::ErrorRetry => go(S::Queued, &[E::Retry, E::Queued], &[F::RetryGate]),
            Verdict::PassReview => go(S::Reviewing, &[E::Passed, E::ReviewStarted], &[F::Review]),
        },
        // Cancelled (or re-queued) while the gate ran: its verdict is
        // dropped.
        (_, Input::Verdict(_)) => Decision::Ignore,

        (S::Nudging, Input::NudgeDelivered(n)) => match n {
            N::Watch => go(S::Watching, &[E::Watching], &[F::DeliverNudge]),
            N::AllEnded => go(S::Queued, &[E::Queued], &[F::RunGate, F::DeliverNudge]),
            N::NoneAlive => go(S::Blocked, &[E::Blocked], &[]),
        },
        (_, Input::NudgeDelivered(_)) => Decision::Ignore,

        (
            S::AwaitingAck,
            Input::Ack {
                approve: false,
                comment: false,
                ..
            },
        ) => go(S::Cancelled, &[E::Rejected, E::Cancelled], &[]),
        // The comment reaches the agent as its nudge (`policy:nudge`, and
        // the prompt of the members gatehost started); the policy ends.
        (
            S::AwaitingAck,
            Input::Ack {
                approve: false,
                comment: true,
                ..
            },
        ) => go(
            S::Cancelled,
            &[E::Rejected, E::Nudge, E::Cancelled],
            &[F::DeliverNudge],
        ),
        (S::AwaitingAck, Input::Ack { fresh: true, .. }) => {
            go(S::Committing, &[E::Approved], &[F::Commit])
        }
        (S::AwaitingAck, Input::Ack { fresh: false, .. }) => {
            go(S::Queued, &[E::Stale, E::Queued], &[F::RunGate])
        }
        (_, Input::Ack { .. }) => Decision::Refuse(Refusal::NotAwaitingAck),

        // Request changes: the comments are the members' nudge, and the
        // policy waits for their next turn (then gates again).
        (S::AwaitingAck, Input::RequestChanges { alive: true }) => {
            go(S::Watching, &[E::Nudge, E::Watching], &[F::DeliverNudge])
        }
        (S::AwaitingAck, Input::RequestChanges { alive: false }) => {
            Decision::Refuse(Refusal::NoMemberAlive)
        }
        (_, Input::RequestChanges { .. }) => Decision::Refuse(Refusal::NotAwaitingAck),

        (S::Committing, Input::Commit(r)) => match r {
            CommitResult::Committed => go(S::Done, &[E::Committed, E::Done], &[F::ChainNext]),
            CommitResult::Stale => go(S::Queued, &[E::Stale, E::Queued], &[F::RunGate]),
            CommitResult::Failed => go(S::Blocked, &[E::CommitFailed, E::Blocked], &[]),
        },
        // Cancelled while the commit was being published: the commit is
        // there, and said so; the policy stays cancelled.
        (S::Cancelled, Input::Commit(CommitResult::Committed)) => {
            go(S::Cancelled, &[E::Committed], &[])
        }
        (_, Input::Commit(_)) => Decision::Ignore,

        // A gate that was running when its task died runs again; the
        // other working states resume their task.
        (S::Gating, Input::Recover) => go(S::Queued, &[E::Queued], &[F::RunGate]),
        (S::Queued, Input::Recover) => go(S::Queued, &[], &[F::RunGate]),
        (S::Nudging, Input::Recover) => go(S::Nudging, &[], &[F::Nudge]),
        (S::Committing, Input::Recover) => go(S::Committing, &[], &[F::Commit]),
        (S::Reviewing, Input::Recover) => go(S::Reviewing, &[], &[F::Review]),
        (_, Input::Recover) => Decision::Ignore,

        // Nothing was stored: the state is as it was, and the sweep will
        // re-drive it (`Recover`).
        (_, Input::StoreError) => Decision::Ignore,

        (S::Queued | S::Gating, Input::Poisoned) => go(S::Blocked, &[E::Blocked], &[]),
        (_, Input::Poisoned) => Decision::Ignore,

        (S::Done | S::Cancelled | S::Blocked, Input::Corrupt) => Decision::Ignore,
        (_, Input::Corrupt) => go(S::Blocked, &[E::Blocked], &[F::AbortGate]),
        // No state to move from: it reads as blocked (the store's
        // placeholder), is stored so, and said.
        (S::Blocked, Input::StatusUnreadable) => go(S::Blocked, &[E::Blocked], &[]),
        (_, Input::StatusUnreadable) => Decision::Ignore,

        // The watchdog reclaims only a policy that waits on its agents: a
        // gate, nudge or commit in flight settles first, and a policy
        // awaiting a person's ack needs no agent.
        (S::Watching, Input::MemberStale { cancel: false }) => go(S::Blocked, &[E::Blocked], &[]),
        (S::Watching, Input::MemberStale { cancel: true }) => {
            go(S::Cancelled, &[E::Cancelled], &[])
        }
        (_, Input::MemberStale { .. }) => Decision::Ignore,

        // A deadline is the policy's: whatever it waits on (its agents, a
        // gating slot, a person's ack). A gate or commit in flight settles
        // first (the watchdog looks again).
        (S::Watching | S::Queued | S::Nudging | S::AwaitingAck, Input::Expired) => {
            go(S::Blocked, &[E::Expired, E::Blocked], &[])
        }
        // A review waits on its reviewer (a judge is killed).
        (S::Reviewing, Input::Expired) => {
            go(S::Blocked, &[E::Expired, E::Blocked], &[F::AbortGate])
        }
        (_, Input::Expired) => Decision::Ignore,

        // A review chain's terminal emissions (shipped, escalated) happen
        // only from `reviewing`, in the transaction that leaves it: each
        // at most once.
        (S::Reviewing, Input::Review(r)) => match r {
            ReviewStep::Ship(AfterPass::Done) => go(
                S::Done,
                &[E::ReviewVerdict, E::ReviewShipped, E::Done],
                &[F::ChainNext],
            ),
            ReviewStep::Ship(AfterPass::AwaitAck) => go(
                S::AwaitingAck,
                &[E::ReviewVerdict, E::ReviewShipped, E::CommitReady],
                &[],
            ),
            ReviewStep::Ship(AfterPass::CommitNow) => go(
                S::Committing,
                &[
                    E::ReviewVerdict,
                    E::ReviewShipped,
                    E::CommitReady,
                    E::Approved,
                ],
                &[F::Commit],
            ),
            ReviewStep::Repair => go(
                S::Watching,
                &[E::ReviewVerdict, E::ReviewRepair, E::Watching],
                &[F::DeliverRepair],
            ),
            ReviewStep::Escalate => go(
                S::Blocked,
                &[E::ReviewVerdict, E::ReviewEscalated, E::Blocked],
                &[],
            ),
        },
        (_, Input::Review(_)) => Decision::Ignore,
    }
}

/// The daemon's tasks that drive a policy, each ending in an input of
/// the lifecycle: waiting for a gating slot (`SlotTaken`), the gate (a
/// verdict), the nudge (`NudgeDelivered`), the commit (`Commit`), the
/// review (`Review`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Slot,
    Gate,
    Nudge,
    Commit,
    Review,
}

/// Whether `task` still drives a policy in `state`: whether the lifecycle
/// takes the task's outcome there. A task that finds its policy moved on
/// (cancelled, re-queued, settled) stops, since whatever it found would
/// be ignored; this asks the machine rather than restating its rule.
pub fn drives(task: Task, state: PolicyStatus) -> bool {
    // An outcome of the task that only the state it drives takes (a
    // commit published after a cancel is still said on the cancelled
    // policy, but no commit task drives a cancelled one).
    let outcome = match task {
        Task::Slot => Input::SlotTaken,
        Task::Gate => Input::Verdict(Verdict::Error),
        Task::Nudge => Input::NudgeDelivered(AfterNudge::NoneAlive),
        Task::Commit => Input::Commit(CommitResult::Failed),
        Task::Review => Input::Review(ReviewStep::Escalate),
    };
    matches!(decide(state, outcome), Decision::Go(_))
}

/// Whether a policy in `state` awaits a person's ack (an ack or a
/// request for changes is not refused as `not-awaiting-ack`).
pub fn awaits_ack(state: PolicyStatus) -> bool {
    let ack = Input::Ack {
        approve: true,
        fresh: true,
        comment: false,
    };
    !matches!(
        decide(state, ack),
        Decision::Refuse(Refusal::NotAwaitingAck)
    )
}

#[cfg(test)]
mod tasks_tests;
#[cfg(test)]
mod tests;

//! Review chains (`review: {reviewer, repairer?, maxCycles}`): the
//! chain's state as stored with its policy, and its decision as a pure
//! function. When the author's turn passes the policy's gate, the
//! reviewer reviews the change; SHIP goes on to the policy's `then`,
//! BLOCK sends a repair nudge to the repairer, whose next turn-end is
//! gated and reviewed again; after `maxCycles` BLOCKs the chain escalates.
//!
//! It owns the rules only. It must never touch the store, the clock, a
//! process or the network: [`decide`] is unit-tested for every state ×
//! outcome, the review task (`engine::review`) does the I/O around it, and
//! every answer reaches the store through `Policies::transition`, in the
//! transaction that records the chain's new state, so that a terminal
//! emission (shipped, escalated) happens at most once across restarts.

pub use crate::model::chain::{ChainPhase, ChainRecord, ShipTo};

/// Where a passed chain ships, in the machine's terms (an extension
/// trait: `ShipTo` is gatehost-model's, `AfterPass` the engine's).
pub trait ShipToExt {
    /// The chain's `ShipTo` for the machine's `AfterPass`.
    fn of(a: super::machine::AfterPass) -> ShipTo;
    /// The machine's `AfterPass` for this `ShipTo`.
    fn after_pass(self) -> super::machine::AfterPass;
}

impl ShipToExt for ShipTo {
    fn of(a: super::machine::AfterPass) -> ShipTo {
        match a {
            super::machine::AfterPass::Done => ShipTo::Done,
            super::machine::AfterPass::AwaitAck => ShipTo::AwaitAck,
            super::machine::AfterPass::CommitNow => ShipTo::CommitNow,
        }
    }

    fn after_pass(self) -> super::machine::AfterPass {
        match self {
            ShipTo::Done => super::machine::AfterPass::Done,
            ShipTo::AwaitAck => super::machine::AfterPass::AwaitAck,
            ShipTo::CommitNow => super::machine::AfterPass::CommitNow,
        }
    }
}

/// A chain record's state for the machine (an extension trait:
/// `ChainRecord` is gatehost-model's, `ChainState` the engine's).
pub trait ChainRecordExt {
    /// The record's state.
    fn state(&self) -> ChainState;
}

impl ChainRecordExt for ChainRecord {
    fn state(&self) -> ChainState {
        let (cycle, max) = (self.cycle, self.max_cycles);
        match self.phase {
            ChainPhase::Reviewing => ChainState::Reviewing { cycle, max },
            ChainPhase::Repairing => ChainState::Repairing { cycle, max },
            ChainPhase::Shipped => ChainState::Shipped,
            ChainPhase::Escalated => ChainState::Escalated,
        }
    }
}

/// The chain's state as the decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainState {
    /// No review yet: the author works.
    Authoring,
    Reviewing {
        cycle: u32,
        max: u32,
    },
    Repairing {
        cycle: u32,
        max: u32,
    },
    Shipped,
    Escalated,
}

/// What happened to the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainOutcome {
    /// The author's (or repairer's) turn passed the policy's gate.
    GatePassed,
    /// The reviewer's verdict (of the cycle under review).
    Ship,
    /// BLOCK; `repairer_alive`: the repairer can still act on a nudge.
    Block { repairer_alive: bool },
    /// The daemon restarted (or the sweep found it) while reviewing.
    Recover,
    /// The session reviewer went silent (stale, past `[daemon]
    /// heartbeat_timeout`) without answering.
    ReviewerSilent,
}

/// What the engine does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainAction {
    /// Start review `cycle`.
    Review { cycle: u32 },
    /// Run the review under way again (its task died with the daemon).
    Resume,
    /// On to the policy's `then` (terminal).
    Ship,
    /// Nudge the repairer with the findings and watch it.
    Repair,
    /// Blocked, an event and a notification (terminal).
    Escalate,
    /// Nothing: a verdict of a review no longer under way, anything
    /// after a terminal state.
    Ignore,
}

/// The chain: what `outcome` does in `state`.
pub fn decide(state: ChainState, outcome: ChainOutcome) -> ChainAction {
    use ChainAction as A;
    use ChainOutcome as O;
    use ChainState as S;
    match (state, outcome) {
        // The content changed after SHIP (a stale ack, a commit whose
        // paths moved) and passed its gate again: what is committed must
        // be what was reviewed, so it is reviewed anew.
        (S::Shipped, O::GatePassed) => A::Review { cycle: 1 },
        // Terminal: each emission happened once and never again.
        (S::Shipped | S::Escalated, _) => A::Ignore,

        (S::Authoring, O::GatePassed) => A::Review { cycle: 1 },
        (S::Repairing { cycle, .. }, O::GatePassed) => A::Review { cycle: cycle + 1 },
        // A pass while a review is under way cannot be (the policy does
        // not gate then): ignored.
        (S::Reviewing { .. }, O::GatePassed) => A::Ignore,

        (S::Reviewing { .. }, O::Ship) => A::Ship,
        (
            S::Reviewing { cycle, max },
            O::Block {
                repairer_alive: true,
            },
        ) if cycle < max => A::Repair,
        // No cycle left, or nobody to repair: a person must look.
        (S::Reviewing { .. }, O::Block { .. }) => A::Escalate,
        (S::Reviewing { .. }, O::Recover) => A::Resume,
        // Nobody will answer: a person must look (the author repairing
        // for a reviewer that never spoke would loop for nothing).
        (S::Reviewing { .. }, O::ReviewerSilent) => A::Escalate,

        // A verdict with no review under way (a stale task's): dropped.
        (S::Authoring | S::Repairing { .. }, O::Ship | O::Block { .. }) => A::Ignore,
        // Nothing runs for the chain there: the policy's lifecycle drives.
        (S::Authoring | S::Repairing { .. }, O::Recover | O::ReviewerSilent) => A::Ignore,
    }
}

#[cfg(test)]
mod tests;

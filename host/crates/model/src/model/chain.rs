//! A review chain's stored state (the policy row's `review` column): where
//! the chain is, which cycle, what SHIP leads to. It owns the record's
//! shape; it must never decide a chain (`engine::chain` does).

use serde::{Deserialize, Serialize};

/// Where a chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChainPhase {
    /// The reviewer reviews the change of cycle `cycle`.
    Reviewing,
    /// The repairer was nudged with the findings of cycle `cycle`; its
    /// next turn-end is gated and reviewed again.
    Repairing,
    /// SHIP: the policy went on to its `then` (terminal).
    Shipped,
    /// BLOCK `maxCycles` times: blocked, a person told (terminal).
    Escalated,
}

/// What a pass leads to once shipped (stored: the review may outlive
/// the daemon that gated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShipTo {
    /// The policy is `done` (a policy that emits).
    Done,
    /// The commit waits for the operator's ack (`awaiting-ack`).
    AwaitAck,
    /// The commit is made at once (`requireHumanAck: false`).
    CommitNow,
}

/// A chain's stored state (the policy row's `review` column).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainRecord {
    /// Where the chain is.
    pub phase: ChainPhase,
    /// The review under way or last done, from 1.
    pub cycle: u32,
    /// The most reviews it runs before it escalates (the input's `maxCycles`).
    pub max_cycles: u32,
    /// What SHIP leads to.
    pub ship_to: ShipTo,
    /// The change under review (a diff against HEAD, as the gate judged
    /// it; capped), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The event cursor when the review started: a session reviewer's
    /// turn-end after it is its answer.
    pub started_after: i64,
    /// The last BLOCK's findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<String>,
    /// This review's name (`rv-` and 12 hex digits, new at each cycle): a
    /// session reviewer's verdict line must end with it, so that an
    /// answer is bound to the prompt it answers (a reviewer of two
    /// authors answers each by name). `None` for a record stored before
    /// names existed (any verdict line then answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// The cycle a status line names: `reviewing (cycle 2 of 5)`.
pub fn describe(status: &str, record: Option<&ChainRecord>) -> String {
    match record.map(|r| (r.phase, r.cycle, r.max_cycles)) {
        Some((ChainPhase::Reviewing, c, m)) => format!("{status} (cycle {c} of {m})"),
        Some((ChainPhase::Repairing, c, m)) => {
            format!("{status} (repairing after review {c} of {m})")
        }
        Some((ChainPhase::Shipped, c, m)) => format!("{status} (shipped at review {c} of {m})"),
        Some((ChainPhase::Escalated, c, m)) => {
            format!("{status} (escalated after review {c} of {m})")
        }
        None => status.to_string(),
    }
}

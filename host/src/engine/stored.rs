//! A policy row's typed columns, as the engine reads them: the row was
//! decoded once by the store's codec (a column that does not decode is
//! the row's `damage`), so these only refuse a damaged row, with an error
//! naming the policy and the column ([`EngineError::Corrupt`]): never a
//! silent `None` that would make a commit policy commit nothing or a chain
//! lose its `next`. It must never decode JSON or decide anything about the
//! lifecycle.

use super::{AttachInput, EngineError, EngineResult};
use crate::commit::Prepared;
use crate::model::chain::ChainRecord;
use crate::store::PolicyRow;

pub use crate::model::plan::{CommitPlan, PLAN_VERSION};

/// The error of a row the store found damaged.
pub fn damaged(p: &PolicyRow) -> EngineResult<()> {
    match &p.damage {
        None => Ok(()),
        Some(d) => Err(EngineError::Corrupt {
            policy: p.id.clone(),
            column: d.column.clone(),
            message: d.message.clone(),
        }),
    }
}

/// The review chain's state (`None` before its first review).
pub fn chain(p: &PolicyRow) -> EngineResult<Option<&ChainRecord>> {
    damaged(p)?;
    Ok(p.review.as_ref())
}

/// The policy's attach input.
pub fn spec(p: &PolicyRow) -> EngineResult<&AttachInput> {
    damaged(p)?;
    Ok(&p.spec)
}

/// The policy's commit plan, if a gate recorded one.
pub fn plan(p: &PolicyRow) -> EngineResult<Option<&CommitPlan>> {
    damaged(p)?;
    Ok(p.plan.as_ref())
}

/// The policy's commit plan, which its state says it has.
pub fn plan_required(p: &PolicyRow) -> EngineResult<&CommitPlan> {
    plan(p)?.ok_or_else(|| EngineError::Corrupt {
        policy: p.id.clone(),
        column: "plan".into(),
        message: "missing, though the policy is past its gate".into(),
    })
}

/// The policy's prepared commit, if one was stored.
pub fn prepared(p: &PolicyRow) -> EngineResult<Option<&Prepared>> {
    damaged(p)?;
    Ok(p.prepared.as_ref())
}

#[cfg(test)]
#[path = "stored_tests.rs"]
mod tests;

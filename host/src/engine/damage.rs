//! Stored rows that do not decode (a damaged store): a policy whose row
//! does not decode is blocked with a `policy:blocked` event naming it, the
//! column and the decode error; a policy that needs a member session whose
//! row does not decode is blocked the same way, naming the session.
//!
//! It owns what happens to such a row: found at start-up (recovery), by
//! the sweep, a turn-end, a gate, an ack or a commit, it is blocked once,
//! and nothing else is affected. It must never act on a damaged row's
//! placeholders, never write them back (the store writes only a damaged
//! policy's status, reason and time), and never let one damaged row stop
//! the daemon or a read of many.

use super::Policies;
use super::machine::{self, Decision, Input, Step};
use super::{EngineError, EngineResult};
use crate::model::event::{BlockOutcome, Blocked, DamageRef, PolicyChange};
use crate::store::{PolicyRow, SessionRow, Tx};

/// The error of a session row the store found damaged.
pub(super) fn session_error(s: &SessionRow) -> Option<EngineError> {
    s.damage.as_ref().map(|d| EngineError::SessionCorrupt {
        session: s.id.clone(),
        column: d.column.clone(),
        message: d.message.clone(),
    })
}

/// The `damage` field of a `policy:blocked` event for `e`.
fn damage_of(e: &EngineError) -> Option<DamageRef> {
    match e {
        EngineError::Corrupt {
            policy,
            column,
            message,
        } => Some(DamageRef::Policy {
            policy_id: policy.clone(),
            column: column.clone(),
            message: message.clone(),
        }),
        EngineError::SessionCorrupt {
            session,
            column,
            message,
        } => Some(DamageRef::Session {
            session_id: session.clone(),
            column: column.clone(),
            message: message.clone(),
        }),
        _ => None,
    }
}

/// `policy:blocked` for a row that does not decode.
fn blocked_damaged(reason: &str, e: &EngineError) -> PolicyChange {
    PolicyChange::Blocked(Blocked {
        outcome: BlockOutcome::Error,
        reason: Some(reason.to_string()),
        stale_sessions: None,
        gate_crashes: None,
        damage: Some(damage_of(e)),
    })
}

impl Policies {
    /// Blocks `p`, whose row the store found damaged, in `tx`: its status
    /// (and reason) alone is stored, with a `policy:blocked` event whose
    /// `damage` names the policy, the column and the error. Nothing for a
    /// row that decodes or a policy already settled.
    pub(crate) fn settle_damaged(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
    ) -> EngineResult<Option<Step>> {
        let Err(e) = super::stored::damaged(p) else {
            return Ok(None);
        };
        // A status that does not decode leaves no state to move from: it
        // reads as blocked, and is stored so (and said).
        let input = if p.damage.as_ref().is_some_and(|d| d.column == "status") {
            Input::StatusUnreadable
        } else {
            Input::Corrupt
        };
        if machine::decide(p.status, input) == Decision::Ignore {
            return Ok(None);
        }
        tracing::error!(policy = %p.id, error = %e, "a policy's stored row does not decode; it is blocked");
        let reason = e.to_string();
        let payload = blocked_damaged(&reason, &e);
        p.reason = Some(reason);
        self.transition(tx, p, input, |_| Some(payload.clone().into()))
    }

    /// Blocks policy `id` because of `e`, found while driving it (its row,
    /// or a member session's, does not decode), with the error as its
    /// reason: retrying could never help.
    pub(crate) fn settle_corrupt(&self, id: &str, e: &EngineError) -> EngineResult<Option<Step>> {
        let reason = e.to_string();
        self.engine().write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            if p.damage.is_some() {
                return self.settle_damaged(tx, &mut p);
            }
            tracing::error!(policy = %id, error = %e, "a stored row this policy needs does not decode; it is blocked");
            p.reason = Some(reason.clone());
            self.transition(tx, &mut p, Input::Corrupt, |_| {
                Some(blocked_damaged(&reason, e).into())
            })
        })
    }

    /// At start-up: every policy not settled whose row does not decode,
    /// or that has a member whose row does not decode, is blocked (each
    /// in its own transaction, so one cannot stop the others). The rows
    /// are decoded one at a time and only the damaged ones kept; a
    /// policy's members are looked at only when a session is damaged
    /// (never one session read per policy): `sessions` holds every
    /// session whose row does not decode (and may hold others).
    pub(super) fn settle_damaged_rows(&self, sessions: &[SessionRow]) -> EngineResult<()> {
        let engine = self.engine();
        for id in engine.store().damaged_policies()? {
            if let Some(step) = self.block_damaged(&id)? {
                self.perform(&id, &step);
            }
        }
        let sessions: Vec<&SessionRow> = sessions.iter().filter(|s| s.damage.is_some()).collect();
        if sessions.is_empty() {
            return Ok(());
        }
        // The policies that need a damaged session, oldest first, each
        // blocked naming its first damaged member (as its row lists them).
        let mut policies = std::collections::BTreeMap::new();
        for s in &sessions {
            for p in engine.store().live_with(&s.id)? {
                policies.insert(p.id.clone(), p);
            }
        }
        let mut policies: Vec<PolicyRow> = policies.into_values().collect();
        policies.sort_by_key(|p| p.seq);
        for p in policies {
            if p.damage.is_some() || p.status.is_settled() {
                continue;
            }
            let Some(e) = p.sessions.iter().find_map(|sid| {
                sessions
                    .iter()
                    .find(|s| &s.id == sid)
                    .and_then(|s| session_error(s))
            }) else {
                continue;
            };
            if let Some(step) = self.settle_corrupt(&p.id, &e)? {
                self.perform(&p.id, &step);
            }
        }
        Ok(())
    }

    /// Blocks policy `id` if its row does not decode.
    pub(super) fn block_damaged(&self, id: &str) -> EngineResult<Option<Step>> {
        self.engine().write(|tx| match tx.policy(id)? {
            Some(mut p) => self.settle_damaged(tx, &mut p),
            None => Ok(None),
        })
    }
}

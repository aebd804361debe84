//! The operator's answer to `policy:commit-ready` (approve, reject with a
//! comment, refused as stale) and the policy as it is now (what changed
//! since its snapshot).
//!
//! It owns the checks an ack must pass before it is stored (the tree
//! reviewed, the approver, the fingerprint). It must never store an
//! approval of a tree other than the one reviewed, nor change a policy's
//! state but through the transition.

use super::Policies;
use super::machine::{Input, awaits_ack};
use super::{EngineError, EngineResult, PolicyEvent, stored};
use crate::commit::{self};
use crate::model::event::{self as ev, PolicyChange as P};
use crate::model::plan::ChangedAfter;
use crate::store::{PolicyRow, PolicyStatus};
use std::path::Path;

/// An approval bound to `tree` holds only while the policy's snapshot is
/// that tree.
pub(super) fn reviewed_tree(
    id: &str,
    plan: &stored::CommitPlan,
    tree: Option<&str>,
) -> EngineResult<()> {
    let Some(tree) = tree else {
        return Ok(());
    };
    let now = plan.snapshot.as_ref().map(|s| s.tree.as_str());
    if now == Some(tree.trim()) {
        return Ok(());
    }
    Err(EngineError::Conflict {
        code: "tree-changed",
        message: match now {
            Some(now) => format!(
                "the change was updated, review it again: policy {id}'s snapshot is tree {now}, the approval was for {tree}"
            ),
            None => format!(
                "the change was updated, review it again: policy {id} has no snapshot tree, the approval was for {tree}"
            ),
        },
    })
}

impl Policies {
    /// The workspace of `p`'s first member; an error for a member whose
    /// row does not decode (its workspace cannot be known).
    pub(super) fn workspace_of(&self, p: &PolicyRow) -> EngineResult<String> {
        let first = p
            .sessions
            .first()
            .ok_or_else(|| EngineError::NotFound(format!("policy {} has no session", p.id)))?;
        let s = self.engine().session(first)?;
        match super::damage::session_error(&s) {
            Some(e) => Err(e),
            None => Ok(s.workspace),
        }
    }

    /// A policy as it is now: one awaiting its ack with a snapshot gets
    /// `plan.changedAfterSnapshot` as of this call (what the commit will
    /// not hold), not as of its commit-ready. Nothing is stored.
    pub(crate) async fn policy_now(&self, id: &str) -> EngineResult<PolicyRow> {
        let mut p = self.engine().policy(id)?;
        // A row that does not decode is shown as it was found, with its
        // `damage` (the sweep blocks it).
        if !awaits_ack(p.status) || p.damage.is_some() {
            return Ok(p);
        }
        let Some(snap) = stored::plan_required(&p)?.snapshot.clone() else {
            return Ok(p);
        };
        let workspace = match self.workspace_of(&p) {
            Err(EngineError::SessionCorrupt { .. }) => return Ok(p),
            w => w?,
        };
        let cache = self.stat_cache(&workspace);
        let changed = tokio::task::spawn_blocking(move || {
            let cache = cache.lock().unwrap_or_else(|p| p.into_inner());
            commit::changed_since(Path::new(&workspace), &snap, Some(&cache))
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the task failed: {e}")));
        if let Some(plan) = p.plan.as_mut() {
            plan.changed_after_snapshot = Some(ChangedAfter::of(changed));
        }
        Ok(p)
    }

    /// The operator's answer to `policy:commit-ready`. A second ack, or an
    /// ack of a policy not awaiting one, is a conflict and changes nothing.
    /// An approval whose paths changed since the gate passed is refused as
    /// stale and the policy gates again.
    ///
    /// An approval given for `tree` (the snapshot's tree id the person
    /// reviewed) is refused, changing nothing, when the policy's snapshot
    /// is another tree now (re-gated meanwhile).
    ///
    /// A reject's `comment` (the operator's) is delivered to the agent as
    /// its nudge ([`super::reject_nudge`]): the `policy:nudge` event, and
    /// the prompt of the live members gatehost started. A comment with an
    /// approval, or past [`super::MAX_REJECT_COMMENT`], is refused.
    pub(crate) async fn ack(
        &self,
        id: &str,
        approve: bool,
        tree: Option<&str>,
        comment: Option<&str>,
        by: &str,
        proof: Option<&crate::passkey::Proof>,
    ) -> EngineResult<PolicyRow> {
        let engine = self.engine();
        let by_passkey = proof.map(crate::passkey::Proof::by);
        let by = by_passkey.as_deref().unwrap_or(by);
        let nudge = match comment {
            None => None,
            Some(_) if approve => {
                return Err(super::sessions::invalid(
                    "comment",
                    "a comment goes with a reject (approve: false) only",
                ));
            }
            Some(c) if c.len() > super::MAX_REJECT_COMMENT => {
                return Err(super::sessions::invalid(
                    "comment",
                    format!("at most {} bytes", super::MAX_REJECT_COMMENT),
                ));
            }
            Some(c) => super::reject_nudge(id, c),
        };
        let current = engine.policy(id)?;
        if !awaits_ack(current.status) {
            return Err(EngineError::Conflict {
                code: "not-awaiting-ack",
                message: format!(
                    "policy {id} is {}, not awaiting-ack: nothing to approve or reject",
                    current.status.as_str()
                ),
            });
        }
        if let Err(e) = stored::damaged(&current) {
            // Nothing can be committed from it: blocked, and said.
            if let Some(step) = self.block_damaged(id)? {
                self.perform(id, &step);
            }
            return Err(e);
        }
        let workspace = match self.workspace_of(&current) {
            Err(e @ EngineError::SessionCorrupt { .. }) => {
                self.settle_corrupt(id, &e)?;
                return Err(e);
            }
            w => w?,
        };
        let plan = match stored::plan_required(&current) {
            Ok(plan) => plan,
            Err(e) => {
                // Nothing can be committed from it: blocked, and said.
                self.settle_corrupt(id, &e)?;
                return Err(e);
            }
        };
        if approve {
            reviewed_tree(id, plan, tree)?;
            engine.settings().check_approver(&current, proof)?;
        }
        let paths = plan.paths.clone();
        let snapshot = plan.snapshot.clone();
        // Gated on a snapshot, the commit is that snapshot, whatever the
        // workspace holds now: nothing can be stale, and what changed
        // since is said (it will not be in the commit).
        let changed_after = match (&snapshot, approve) {
            (Some(snap), true) => {
                let (ws, snap) = (workspace.clone(), snap.clone());
                let cache = self.stat_cache(&workspace);
                Some(
                    tokio::task::spawn_blocking(move || {
                        let cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                        commit::changed_since(Path::new(&ws), &snap, Some(&cache))
                            .map_err(|e| e.to_string())
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("the task failed: {e}"))),
                )
            }
            _ => None,
        };
        let now_fp = if approve && snapshot.is_none() {
            let ws = workspace.clone();
            let p2 = paths.clone();
            Some(
                tokio::task::spawn_blocking(move || commit::fingerprint(Path::new(&ws), &p2))
                    .await
                    .map_err(|e| EngineError::task_failed("the fingerprint task", e))?
                    .map_err(|e| e.to_string()),
            )
        } else {
            None
        };
        let (p, step) = engine.write(|tx| {
            let mut p = tx
                .policy(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no policy '{id}'")))?;
            let plan_now = stored::plan_required(&p)?;
            if approve {
                // Checked again where the decision is stored: a re-gate
                // between the first look and here is refused too.
                reviewed_tree(id, plan_now, tree)?;
                engine.settings().check_approver(&p, proof)?;
            }
            let gated = plan_now.fingerprint.clone();
            let fresh = snapshot.is_some() || matches!(&now_fp, Some(Ok(fp)) if *fp == gated);
            let why = match &now_fp {
                Some(Err(e)) => format!("the commit paths cannot be read: {e}"),
                _ => "the commit paths changed since the gate passed".to_string(),
            };
            let from = p.status;
            if !approve {
                p.reason = Some(format!("commit rejected by {by}"));
            } else if !fresh {
                p.plan = None;
                p.reason = Some(format!("ack refused as stale: {why}; the gate runs again"));
            }
            let reason = p.reason.clone();
            let step = self.transition(
                tx,
                &mut p,
                Input::Ack {
                    approve,
                    fresh,
                    comment: nudge.is_some(),
                },
                |event| {
                    Some(match event {
                        PolicyEvent::Rejected => P::Rejected(ev::Rejected {
                            by: by.to_string(),
                            comment: nudge.as_ref().and(comment.map(str::to_string)),
                        })
                        .into(),
                        PolicyEvent::Nudge => P::Nudge(P::nudge_by(nudge.clone()?, by)).into(),
                        PolicyEvent::Cancelled => {
                            P::cancelled(from.as_str(), reason.clone()).into()
                        }
                        PolicyEvent::Stale => P::stale(Some(by), why.clone()).into(),
                        PolicyEvent::Queued => P::queued("stale ack: re-gating").into(),
                        PolicyEvent::Approved => P::Approved(ev::Approved {
                            by: by.to_string(),
                            changed_after_snapshot: changed_after.as_ref().map(|c| match c {
                                Ok(list) => ChangedAfter::Paths(list.clone()),
                                Err(e) => ChangedAfter::Failed { error: e.clone() },
                            }),
                        })
                        .into(),
                        _ => return None,
                    })
                },
            )?;
            Ok((p, step))
        })?;
        if let Some(step) = &step {
            self.perform(id, step);
            if let Some(message) = &nudge {
                // Stored already (the `policy:nudge` event): a member that
                // cannot be read gets it from the bus only.
                match stored::spec(&p).and_then(|input| self.alive_members(input)) {
                    Ok(alive) => self.deliver_step_nudge(step, &alive, message).await,
                    Err(e) => {
                        tracing::warn!(policy = id, error = %e, "the reject's nudge is on the bus only");
                    }
                }
            }
        }
        // The machine's step re-gates a stale ack: refused as such.
        if step.is_some_and(|s| s.to == PolicyStatus::Queued) {
            return Err(EngineError::Conflict {
                code: "stale",
                message: format!(
                    "ack refused: {}",
                    p.reason.clone().unwrap_or_else(|| "stale".into())
                ),
            });
        }
        Ok(p)
    }
}

//! The one transition function of the policy lifecycle and what runs
//! once a step is stored: every change of a policy's state goes through
//! [`Policies::transition`], which applies [`machine::decide`], stores the
//! new state, its timestamp and the step's events in one transaction;
//! [`Policies::perform`] then starts the tasks the step names. A cancel is
//! one such step.
//!
//! It owns the policy row's writes and the tasks' bookkeeping (gate tasks,
//! busy policies, stat caches, watches). It must never publish an event whose
//! state change is not stored, nor store an event of another kind than the
//! step names.

use super::Policies;
use super::machine::{self, Decision, Effect, Input, PolicyEvent, Step};
use super::{EngineError, EngineResult, busy};
use crate::model::event::{Change, PolicyChange, PolicyHead};
use crate::store::{PolicyRow, PolicyStatus, Tx, now_ms};
use std::sync::{Arc, Mutex};

impl Policies {
    /// The stat cache of `workspace`'s snapshots.
    pub(crate) fn stat_cache(&self, workspace: &str) -> Arc<Mutex<crate::commit::StatCache>> {
        self.stat_caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(workspace.to_string())
            .or_default()
            .clone()
    }

    /// The watch kept on `workspace`'s commit `paths` between turns.
    pub(super) fn standing(
        &self,
        workspace: &str,
        paths: &[String],
    ) -> super::on_snapshot::StandingSlot {
        let mut key = workspace.to_string();
        for p in paths {
            key.push('\0');
            key.push_str(p);
        }
        self.standings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .slot(key, super::on_snapshot::KEPT_WATCHES)
    }

    /// Marks a nudge or commit task of `id` running until the guard is
    /// dropped; `None` if one runs.
    pub(crate) fn begin_task(&self, id: &str) -> Option<busy::TaskGuard> {
        self.busy.begin(id)
    }

    /// Whether a gate task of this daemon runs (or is about to) for `id`.
    pub(super) fn has_gate_task(&self, id: &str) -> bool {
        self.gate_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
    }

    /// The one transition function: applies [`machine::decide`] to `p`
    /// and `input`, storing the new state, its timestamp and the events of
    /// the step (each with the usual fields and `payload(event)`) in `tx`,
    /// and attaching the `next` policy when the step says so. Returns the
    /// step, whose other effects the caller runs once `tx` committed
    /// ([`Policies::perform`]); `None` when the input changes nothing; a
    /// conflict when the state refuses it. `payload` says each event of
    /// the step (`None`, or a change of another kind: an internal error).
    pub(crate) fn transition(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
        input: Input,
        payload: impl Fn(PolicyEvent) -> Option<Change>,
    ) -> EngineResult<Option<Step>> {
        // A row that does not decode goes nowhere but to `blocked` (said)
        // or `cancelled`: its placeholders are never acted on.
        if p.damage.is_some()
            && !matches!(
                input,
                Input::Cancel | Input::Corrupt | Input::StatusUnreadable
            )
        {
            return self.settle_damaged(tx, p);
        }
        let step = match machine::decide(p.status, input) {
            Decision::Ignore => return Ok(None),
            Decision::Refuse(r) => {
                let message = match r {
                    machine::Refusal::NotAwaitingAck => format!(
                        "policy {} is {}, not awaiting-ack: nothing to approve or reject",
                        p.id,
                        p.status.as_str()
                    ),
                    machine::Refusal::Settled => {
                        format!("policy {} is already {}", p.id, p.status.as_str())
                    }
                    machine::Refusal::NoMemberAlive => format!(
                        "policy {}: no member is alive to act on the requested changes (approve, reject or cancel it)",
                        p.id
                    ),
                };
                return Err(EngineError::Conflict {
                    code: r.code(),
                    message,
                });
            }
            Decision::Go(step) => step,
        };
        let from = p.status;
        p.status = step.to;
        p.updated_at = now_ms();
        if p.damage.is_some() {
            tx.put_damaged_policy(p)?;
        } else {
            tx.put_policy(p)?;
        }
        for &event in step.events {
            let change = payload(event).filter(|c| PolicyEvent::of(c) == event);
            let Some(change) = change else {
                tracing::error!(policy = %p.id, event = event.as_str(), ?input, "a transition's event has no payload");
                return Err(EngineError::Internal(format!(
                    "policy {}: no payload for its {} event",
                    p.id,
                    event.as_str()
                )));
            };
            self.policy_event(tx, change, p)?;
        }
        if from != p.status
            && matches!(
                p.status,
                PolicyStatus::AwaitingAck
                    | PolicyStatus::Done
                    | PolicyStatus::Blocked
                    | PolicyStatus::Cancelled
            )
        {
            self.engine().runs().routine_policy_settled(tx, p)?;
        }
        if step.effects.contains(&Effect::ChainNext) {
            self.chain_next(tx, p)?;
        }
        tracing::debug!(policy = %p.id, from = from.as_str(), to = p.status.as_str(), ?input, "transition");
        Ok(Some(step))
    }

    /// Runs the effects of a stored step that happen outside the store
    /// (the nudge's delivery is the nudge task's own).
    pub(crate) fn perform(&self, id: &str, step: &Step) {
        for effect in step.effects {
            match effect {
                Effect::RunGate => self.schedule_gate(id),
                Effect::AbortGate => self.abort_gate(id),
                Effect::Nudge => self.spawn_nudge(id.to_string()),
                Effect::Commit => self.spawn_commit(id.to_string()),
                Effect::RetryGate => self.schedule_retry(id),
                Effect::Review => self.engine().reviews().spawn_review(id.to_string()),
                Effect::DeliverNudge | Effect::ChainNext | Effect::DeliverRepair => {}
            }
        }
    }

    /// Appends a policy (or review) event, with `p`'s head (its id,
    /// status and members).
    pub(crate) fn policy_event(
        &self,
        tx: &mut Tx<'_>,
        change: impl Into<Change>,
        p: &PolicyRow,
    ) -> EngineResult<i64> {
        let event = change.into().with(PolicyHead {
            policy_id: p.id.clone(),
            status: p.status.as_str().to_string(),
            session_ids: p.sessions.clone(),
        });
        self.engine().append(
            tx,
            &event,
            p.sessions.first().map(String::as_str),
            Some(&p.id),
        )
    }

    /// Cancels a policy in any state but a terminal one (`done`,
    /// `cancelled`); its gate, if running, is killed. A commit being made
    /// stops before its branch moves; one published already in the same
    /// instant is reported by a `policy:committed` event on the cancelled
    /// policy.
    pub(crate) fn cancel(&self, id: &str, by: &str) -> EngineResult<PolicyRow> {
        let (p, step) = self.engine().write(|tx| {
            let mut p = tx
                .policy(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no policy '{id}'")))?;
            let from = p.status;
            let reason = format!("cancelled by {by}");
            p.reason = Some(reason.clone());
            let step = self.transition(tx, &mut p, Input::Cancel, |_| {
                Some(PolicyChange::cancelled(from.as_str(), Some(reason.clone())).into())
            })?;
            Ok((p, step))
        })?;
        if let Some(step) = step {
            self.perform(id, &step);
        }
        tracing::info!(policy = id, by, "policy cancelled");
        Ok(p)
    }

    fn abort_gate(&self, id: &str) {
        let handle = self
            .gate_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(h) = handle {
            // Dropping the gate future kills its process tree (the
            // supervisor's guard) or drops the plugin's store.
            h.abort();
        }
        self.engine().reviews().abort_review(id);
    }
}

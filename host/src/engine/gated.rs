//! A gate's end: storing its verdict and what follows it (done,
//! commit-ready, a nudge, a retry, a review, blocked) in one transition,
//! and attaching a completed policy's `next`.
//!
//! It owns what a verdict leads to. It must never store a verdict for a
//! policy that left `gating` meanwhile (a cancel), and never change a
//! policy's state but through the transition.

use super::Policies;
use super::judge::{Judged, judge_outcome};
use super::machine::{Input, Step, Task, Verdict, drives};
use super::nudge::render_nudge;
use super::said::Said;
use super::{AttachInput, EngineResult, PolicyEvent, stored};
use crate::gate::GateRunner;
use crate::model::event::{self as ev, PolicyChange as P};
use crate::store::{PolicyRow, SessionState, Tx};
use crate::verdict::{Outcome, RunReport};

use super::lifecycle::Changed;
impl Policies {
    pub(super) async fn finish_gate(
        &self,
        runner: &GateRunner,
        id: &str,
        input: &AttachInput,
        report: RunReport,
        judged: Judged,
        changed: Changed,
    ) -> EngineResult<Option<Step>> {
        let engine = self.engine();
        let Changed {
            summary: changes,
            review_diff,
        } = changed;
        let summary = ev::GateSummary::of(&report);
        let alive = self.alive_members(input)?;
        engine.write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            if !drives(Task::Gate, p.status) {
                // Cancelled while the gate ran: its verdict is dropped.
                return Ok(None);
            }
            p.verdict = Some(report.clone());
            // The gate finished: the daemon outlived it.
            p.gate_crashes = 0;
            let mut said = Said::default();
            if report.outcome != Outcome::Error {
                // A verdict: the next time the gate cannot run counts anew.
                p.infra_retries_used = 0;
            }
            let outcome = match report.outcome {
                Outcome::Pass => {
                    let judged = judge_outcome(input, &report, &judged, &changes);
                    if let Some(reason) = judged.reason {
                        p.reason = Some(reason);
                    }
                    if let Some(plan) = &judged.plan {
                        p.plan = Some(plan.clone());
                        p.prepared = None;
                        said.plan = p.plan.clone();
                    }
                    let v = judged.verdict;
                    match v {
                        // A review chain: the reviewer reviews what passed.
                        Verdict::Pass(after) => engine.reviews().begin_review(
                            tx,
                            &mut p,
                            input,
                            after,
                            review_diff.clone(),
                            &mut said,
                        )?,
                        v => v,
                    }
                }
                Outcome::Error => self.could_not_run(&mut p, &report, &mut said),
                Outcome::Fail => {
                    let retry = (p.retries_used as u32) < input.max_retries() && !alive.is_empty();
                    if retry {
                        p.retries_used += 1;
                        p.reason = Some(report.reason.clone());
                        let message = render_nudge(
                            input
                                .on_fail
                                .nudge
                                .as_deref()
                                .unwrap_or(&runner.config().daemon.default_nudge),
                            &report,
                        );
                        // Kept with the verdict: the nudge task delivers
                        // what the event says, whatever the template is then.
                        p.nudge = Some(message.clone());
                        said.nudge = Some(ev::Nudge {
                            message,
                            by: None,
                            comments: None,
                            retry: Some(p.retries_used),
                            max_retries: Some(input.max_retries()),
                            sessions: Some(alive.clone()),
                        });
                    } else {
                        p.reason = Some(if alive.is_empty() {
                            format!(
                                "the gate failed and no member is alive to fix it: {}",
                                report.reason
                            )
                        } else {
                            format!(
                                "the gate failed after {} retries: {}",
                                p.retries_used, report.reason
                            )
                        });
                        tracing::warn!(policy = id, reason = ?p.reason, "policy blocked");
                    }
                    Verdict::Fail { retry }
                }
            };
            let blocked_outcome = match outcome {
                Verdict::Fail { .. } => ev::BlockOutcome::Fail,
                _ => ev::BlockOutcome::Error,
            };
            let reason = p.reason.clone();
            self.transition(tx, &mut p, Input::Verdict(outcome), |event| {
                Some(match event {
                    PolicyEvent::Passed => P::Passed(summary.clone()).into(),
                    PolicyEvent::Failed => P::Failed(summary.clone()).into(),
                    PolicyEvent::Retry => P::Retry(said.retry.clone()?).into(),
                    PolicyEvent::Queued if outcome == Verdict::ErrorRetry => {
                        P::queued("the gate could not run; it runs again after the backoff").into()
                    }
                    PolicyEvent::Queued => {
                        P::queued("the commit paths changed while the gate ran; it runs again")
                            .into()
                    }
                    PolicyEvent::Blocked => P::blocked(blocked_outcome, reason.clone()).into(),
                    PolicyEvent::CommitReady => P::CommitReady(ev::CommitReady {
                        plan: said.plan.clone().map(Box::new),
                    })
                    .into(),
                    PolicyEvent::Approved => P::approved_by_policy().into(),
                    PolicyEvent::Nudge => P::Nudge(said.nudge.clone()?).into(),
                    PolicyEvent::ReviewStarted => {
                        ev::ReviewChange::Started(said.review.clone()?).into()
                    }
                    PolicyEvent::Done => P::done().into(),
                    _ => return None,
                })
            })
        })
    }

    /// Members that have not exited (one whose row does not decode is
    /// not counted: nothing it reports can be recorded).
    pub(super) fn alive_members(&self, input: &AttachInput) -> EngineResult<Vec<String>> {
        let mut alive = Vec::new();
        for sid in input.members() {
            if let Some(s) = self.engine().store().session(&sid)?
                && s.damage.is_none()
                && s.state != SessionState::Exited
            {
                alive.push(sid);
            }
        }
        Ok(alive)
    }

    /// Attaches the `next` policy of a completed one, exactly once (its id
    /// is stored in the same transaction).
    pub(crate) fn chain_next(&self, tx: &mut Tx<'_>, p: &mut PolicyRow) -> EngineResult<()> {
        if p.next_id.is_some() {
            return Ok(());
        }
        let input = match stored::spec(p) {
            Ok(i) => i,
            Err(e) => {
                // The policy is done; its `next` cannot be read: said.
                let reason = e.to_string();
                self.policy_event(tx, P::NextRefused(ev::Reasoned { reason }), p)?;
                tracing::error!(policy = %p.id, error = %e, "the next policy cannot be read");
                return Ok(());
            }
        };
        let Some(next) = &input.next else {
            return Ok(());
        };
        let mut next = AttachInput::clone(next);
        if next.members().is_empty() {
            next.session_ids = Some(p.sessions.clone());
        }
        let store_check = super::attach::validate(&mut next, &self.engine().runner(), &|sid| {
            Ok(tx.session(sid)?)
        });
        if let Err(e) = store_check {
            let reason = e.to_string();
            self.policy_event(tx, P::NextRefused(ev::Reasoned { reason }), p)?;
            tracing::warn!(policy = %p.id, error = %e, "the next policy was refused");
            return Ok(());
        }
        let child = self.insert_policy(tx, &next, Some(&p.id))?;
        p.next_id = Some(child.id.clone());
        tx.record_next(p)?;
        if drives(Task::Slot, child.status) {
            // Scheduled after the commit: the task reads the stored row.
            let engine = self.engine();
            let cid = child.id.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                engine.policies().schedule_gate(&cid);
            });
        }
        Ok(())
    }
}

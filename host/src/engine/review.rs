//! The review chain's I/O: starting a review when a gate passed, running
//! a judge reviewer or prompting a session reviewer and reading its
//! answer, and storing what the chain's decision (`chain::decide`) says
//! in one transaction with its events (`review:*`), then delivering the
//! repair nudge.
//!
//! It owns the loop around the decision, never the decision itself; it
//! must never change a policy's state but through `Policies::transition`,
//! never act on a verdict of a review no longer under way (the stored
//! cycle is checked in the transaction that applies it), and never read a
//! verdict from anything but the reviewer's own output.

use super::Reviews;
use super::attach::Reviewer;
use super::chain::{
    self, ChainAction, ChainOutcome, ChainPhase, ChainRecord, ChainRecordExt as _, ChainState,
    ShipTo, ShipToExt as _,
};
use super::machine::{AfterPass, Input, ReviewStep, Task, Verdict, drives};
use super::{AttachInput, EngineResult, PolicyEvent, stored};
use crate::gate::GateContext;
use crate::model::event::{
    self as ev, Event, PolicyChange, ReviewChange as R, SessionEvent, WatchdogEvent,
};
use crate::store::{EventFilter, PolicyRow, SessionState, Tx};
use crate::verdict::{Outcome, RunReport};
use std::path::Path;
use std::time::Duration;

mod answer;
use answer::{Answer, new_nonce, read_answer, session_prompt, silent};

/// The most bytes of the change a review carries (stored with the chain,
/// put in a session reviewer's prompt).
const MAX_DIFF: usize = 256 * 1024;

/// The most bytes of a verdict's findings kept (events, the repair nudge).
const MAX_FINDINGS: usize = 8 * 1024;

/// How long one wait for a session reviewer's answer lasts before the
/// task looks at the policy again (a cancel, a deadline).
const ANSWER_POLL: Duration = Duration::from_secs(30);

fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// The change of a workspace as plugins and judges see it (against HEAD),
/// for a review; a workspace without git has none, one whose change
/// cannot be computed says so.
pub(super) async fn workspace_diff(workspace: &str, caps: crate::change::ChangeCaps) -> String {
    if std::fs::symlink_metadata(Path::new(workspace).join(".git")).is_err() {
        return String::new();
    }
    let ws = workspace.to_string();
    match tokio::task::spawn_blocking(move || {
        crate::commit::workspace_changes(Path::new(&ws), caps)
    })
    .await
    {
        Ok(Ok(files)) => crate::change::render(&files),
        Ok(Err(e)) => format!("(the change could not be computed: {e})"),
        Err(e) => format!("(the diff task failed: {e})"),
    }
}

/// A judge reviewer's findings: its reason, the failing gate's findings
/// and output.
fn judge_findings(report: &RunReport) -> String {
    cap(
        super::render_nudge("{reason}\n{findings}{output}", report)
            .trim()
            .to_string(),
        MAX_FINDINGS,
    )
}

impl Reviews {
    /// A gate passed on a policy with a review: the chain decides (its
    /// first review, the next one after a repair, or anew after SHIP),
    /// and the chain's record is set in `p` with the change. Returns the
    /// lifecycle's verdict; `said.review` is `review:started`'s
    /// payload.
    pub(super) fn begin_review(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
        input: &AttachInput,
        after: AfterPass,
        diff: Option<String>,
        said: &mut super::said::Said,
    ) -> EngineResult<Verdict> {
        let Some(review) = &input.review else {
            return Ok(Verdict::Pass(after));
        };
        let findings = stored::chain(p)?.and_then(|r| r.findings.clone());
        let state = p
            .review
            .as_ref()
            .map_or(ChainState::Authoring, ChainRecord::state);
        let ChainAction::Review { cycle } = chain::decide(state, ChainOutcome::GatePassed) else {
            return Ok(Verdict::Pass(after));
        };
        let record = ChainRecord {
            phase: ChainPhase::Reviewing,
            cycle,
            max_cycles: review.max_cycles(),
            ship_to: ShipTo::of(after),
            diff: diff.map(|d| cap(d, MAX_DIFF)),
            started_after: tx.head_cursor()?,
            findings,
            nonce: Some(new_nonce()),
        };
        let (label, prompt) = match &review.reviewer {
            Reviewer::Judge(g) => (g.label(), None),
            Reviewer::Session(s) => (
                format!("session {}", s.session),
                Some(session_prompt(s.rubric(), &record)),
            ),
        };
        said.review = Some(ev::ReviewStarted {
            cycle,
            max_cycles: record.max_cycles,
            reviewer: label,
            prompt,
            diff_bytes: record.diff.as_ref().map_or(0, String::len),
        });
        p.reason = Some(format!(
            "the gate passed; review {cycle} of {} under way",
            record.max_cycles
        ));
        p.review = Some(record);
        Ok(Verdict::PassReview)
    }

    /// Runs (or resumes) the review of a policy in `reviewing`, once at a
    /// time; a cancel kills it.
    pub(crate) fn spawn_review(&self, id: String) {
        let mut tasks = self.review_tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tasks.get(&id).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let engine = self.engine();
        let owned = id.clone();
        let handle = tokio::spawn(async move {
            if let Err(e) = engine.reviews().review_task(&owned).await {
                if engine.outage().failed_engine(&e) {
                    tracing::info!(policy = %owned, error = %e, "review failed; the sweep runs it again");
                } else {
                    tracing::error!(policy = %owned, error = %e, "review failed; the sweep runs it again");
                }
            }
            engine
                .reviews()
                .review_tasks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&owned);
        });
        tasks.insert(id, handle.abort_handle());
    }

    /// Kills the review task of `id`, if one runs (a cancel): a judge
    /// reviewing is killed as a gate is.
    pub(super) fn abort_review(&self, id: &str) {
        let review = self
            .review_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(h) = review {
            // A judge reviewing is killed the same way.
            h.abort();
        }
    }

    async fn review_task(&self, id: &str) -> EngineResult<()> {
        let p = self.engine().policy(id)?;
        if !drives(Task::Review, p.status) {
            return Ok(());
        }
        let (input, record, review) =
            match stored::spec(&p).and_then(|i| Ok((i, stored::chain(&p)?))) {
                Ok((input, Some(record))) if input.review.is_some() => match &input.review {
                    Some(review) => (input, record, review),
                    None => return Ok(()),
                },
                Ok(_) => {
                    let e = super::EngineError::Corrupt {
                        policy: id.to_string(),
                        column: "review".into(),
                        message: "reviewing without a review chain".into(),
                    };
                    return self.settle_and_perform(id, &e);
                }
                Err(e) => return self.settle_and_perform(id, &e),
            };
        let answer = match &review.reviewer {
            Reviewer::Judge(gate) => self.judge_review(&p, input, gate, record).await?,
            Reviewer::Session(s) => {
                match self
                    .session_review(id, &s.session, s.rubric(), record)
                    .await?
                {
                    Some(a) => a,
                    None => return Ok(()),
                }
            }
        };
        self.apply_answer(id, record, review, answer).await
    }

    /// The reviewer session's lane: its reviews one at a time.
    fn reviewer_lane(&self, reviewer: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        super::lane(&self.reviewer_lanes, reviewer)
    }

    fn settle_and_perform(&self, id: &str, e: &super::EngineError) -> EngineResult<()> {
        let engine = self.engine();
        if let Some(step) = engine.policies().settle_corrupt(id, e)? {
            engine.policies().perform(id, &step);
        }
        Ok(())
    }

    /// A judge reviewer: PASS is SHIP; FAIL, no verdict, or a judge that
    /// could not run is BLOCK (fail closed), with its reason.
    async fn judge_review(
        &self,
        p: &PolicyRow,
        input: &AttachInput,
        gate: &crate::gate::GateSpec,
        record: &ChainRecord,
    ) -> EngineResult<Answer> {
        let engine = self.engine();
        let runner = engine.runner();
        let mut workspace = String::new();
        let mut text = Vec::new();
        let mut members = Vec::new();
        for sid in &p.sessions {
            if let Some(s) = engine.store().session(sid)? {
                if workspace.is_empty() {
                    workspace = s.workspace.clone();
                }
                if let Some(m) = &s.last_message {
                    text.push(format!("[session {}] {m}", s.id));
                }
                members.push(s);
            }
        }
        let anchor = match super::sessions::open_registered(&workspace, &members) {
            Ok(a) => a,
            Err(e) => {
                return Ok(Answer::said(
                    false,
                    format!("the reviewer could not run: {e}"),
                ));
            }
        };
        let ctx = GateContext {
            text: (!text.is_empty()).then(|| text.join("\n\n")),
            diff: record.diff.clone().filter(|d| !d.is_empty()),
            changes: None,
            session_id: p.sessions.first().cloned(),
            policy_id: Some(p.id.clone()),
            trust: input.attached_by,
        };
        let report = runner
            .run_gates(std::slice::from_ref(gate), &anchor, &ctx)
            .await;
        Ok(match report.outcome {
            Outcome::Pass => Answer::said(true, cap(report.reason.clone(), MAX_FINDINGS)),
            Outcome::Fail => Answer::said(false, judge_findings(&report)),
            Outcome::Error => Answer::said(
                false,
                format!("the reviewer could not run: {}", judge_findings(&report)),
            ),
        })
    }

    /// A session reviewer: prompted (on stdin for a session the daemon
    /// started; every session reads it in `review:started`), its next
    /// turn-end after the review began is its answer. `None`: the policy
    /// left `reviewing` meanwhile.
    async fn session_review(
        &self,
        id: &str,
        reviewer: &str,
        rubric: &str,
        record: &ChainRecord,
    ) -> EngineResult<Option<Answer>> {
        let engine = self.engine();
        // One review in flight per reviewer session: the others wait here
        // (in turn) before their prompt is delivered.
        let lane = self.reviewer_lane(reviewer);
        let _turn = lane.lock().await;
        engine
            .agents()
            .deliver_prompt(reviewer, &session_prompt(rubric, record))
            .await;
        // A reviewer already stale will not answer either.
        if self
            .engine()
            .store()
            .session(reviewer)?
            .is_some_and(|s| s.stale_at.is_some())
        {
            return Ok(Some(silent(reviewer)));
        }
        let mut filter = EventFilter {
            since: record.started_after,
            types: vec![
                "session:turn-end".into(),
                "session:exited".into(),
                "session:stale".into(),
            ],
            session_ids: vec![reviewer.to_string()],
            limit: 1,
            ..Default::default()
        };
        loop {
            let p = engine.policy(id)?;
            let still = drives(Task::Review, p.status)
                && stored::chain(&p)?.is_some_and(|r| r.cycle == record.cycle);
            if !still {
                return Ok(None);
            }
            let found = engine.wait_events(&filter, ANSWER_POLL).await?;
            if let Some(e) = found.first() {
                let message = match &e.event {
                    Event::Session(SessionEvent::Exited(_)) => {
                        return Ok(Some(Answer::said(
                            false,
                            format!(
                                "the reviewer session {reviewer} exited without a verdict: BLOCK"
                            ),
                        )));
                    }
                    Event::Watchdog(WatchdogEvent::Stale(_)) => return Ok(Some(silent(reviewer))),
                    Event::Session(SessionEvent::TurnEnd(r)) => r.message.as_deref(),
                    _ => None,
                };
                match read_answer(message, record.nonce.as_deref()) {
                    Some(answer) => return Ok(Some(answer)),
                    None => {
                        // Its answer to another review: not this one's.
                        tracing::info!(
                            policy = id,
                            reviewer,
                            cursor = e.cursor,
                            "a reviewer's turn-end answers another review"
                        );
                        filter.since = e.cursor;
                        continue;
                    }
                }
            }
            if engine.is_stopping() {
                return Ok(None);
            }
        }
    }

    /// Stores what the chain decides on `answer` (if the review of
    /// `record.cycle` is still under way), then delivers the repair nudge.
    async fn apply_answer(
        &self,
        id: &str,
        record: &ChainRecord,
        review: &super::attach::ReviewInput,
        answer: Answer,
    ) -> EngineResult<()> {
        let engine = self.engine();
        let applied = engine.write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            let Some(mut rec) = stored::chain(&p)?.cloned() else {
                return Ok(None);
            };
            if !drives(Task::Review, p.status)
                || rec.cycle != record.cycle
                || rec.phase != ChainPhase::Reviewing
            {
                // A verdict of a review no longer under way: dropped.
                return Ok(None);
            }
            let repairer = review.repairer_of(&p.sessions).unwrap_or_default();
            let repairer_alive = tx
                .session(&repairer)?
                .is_some_and(|s| s.damage.is_none() && s.state != SessionState::Exited);
            let outcome = if answer.silent {
                ChainOutcome::ReviewerSilent
            } else if answer.ship {
                ChainOutcome::Ship
            } else {
                ChainOutcome::Block { repairer_alive }
            };
            let (cycle, max) = (rec.cycle, rec.max_cycles);
            let step = match chain::decide(rec.state(), outcome) {
                ChainAction::Ship => {
                    rec.phase = ChainPhase::Shipped;
                    p.reason = Some(format!("the reviewer shipped it at review {cycle} of {max}"));
                    ReviewStep::Ship(rec.ship_to.after_pass())
                }
                ChainAction::Repair => {
                    rec.phase = ChainPhase::Repairing;
                    rec.findings = Some(answer.findings.clone());
                    // The repairer's next turn-end counts; its gate's
                    // nudges count anew.
                    p.pending = vec![repairer.clone()];
                    p.watch_after = tx.head_cursor()?;
                    p.retries_used = 0;
                    p.reason = Some(format!("review {cycle} of {max} blocked it; {repairer} repairs"));
                    ReviewStep::Repair
                }
                ChainAction::Escalate => {
                    rec.phase = ChainPhase::Escalated;
                    rec.findings = Some(answer.findings.clone());
                    p.reason = Some(if answer.silent {
                        format!("{} at review {cycle} of {max}: a person must look", answer.findings)
                    } else if repairer_alive {
                        format!("the reviewer blocked it {cycle} times (maxCycles {max}): a person must look. Last findings: {}", answer.findings)
                    } else {
                        format!("the reviewer blocked it and the repairer {repairer} has exited: a person must look. Findings: {}", answer.findings)
                    });
                    tracing::warn!(policy = id, cycle, max, "review chain escalated");
                    ReviewStep::Escalate
                }
                ChainAction::Review { .. } | ChainAction::Resume | ChainAction::Ignore => {
                    return Ok(None);
                }
            };
            p.review = Some(rec);
            let message = format!(
                "The reviewer blocked your change (review {cycle} of {max}):\n{}\nRepair it and end your turn again.",
                answer.findings
            );
            let reason = p.reason.clone();
            let plan = p.plan.clone();
            let verdict = if answer.ship { "SHIP" } else { "BLOCK" };
            let ended = ev::ReviewEnded {
                cycle,
                max_cycles: max,
                reason: reason.clone(),
            };
            let step = engine.policies().transition(tx, &mut p, Input::Review(step), |event| {
                Some(match event {
                    PolicyEvent::ReviewVerdict => R::Verdict(ev::ReviewVerdict {
                        cycle,
                        max_cycles: max,
                        verdict: verdict.to_string(),
                        findings: answer.findings.clone(),
                    })
                    .into(),
                    PolicyEvent::ReviewRepair => R::Repair(ev::ReviewRepair {
                        cycle,
                        max_cycles: max,
                        session: repairer.clone(),
                        message: message.clone(),
                    })
                    .into(),
                    PolicyEvent::ReviewShipped => R::Shipped(ended.clone()).into(),
                    PolicyEvent::ReviewEscalated => R::Escalated(ended.clone()).into(),
                    PolicyEvent::Watching => PolicyChange::Watching(ev::Watching {
                        pending: vec![repairer.clone()],
                    })
                    .into(),
                    PolicyEvent::Blocked => {
                        PolicyChange::blocked(ev::BlockOutcome::Review, reason.clone()).into()
                    }
                    PolicyEvent::CommitReady => PolicyChange::CommitReady(ev::CommitReady {
                        plan: plan.clone().map(Box::new),
                    })
                    .into(),
                    PolicyEvent::Approved => PolicyChange::approved_by_policy().into(),
                    PolicyEvent::Done => PolicyChange::Done(ev::Empty {}).into(),
                    _ => return None,
                })
            })?;
            Ok(step.map(|s| (s, repairer, message)))
        })?;
        let Some((step, repairer, message)) = applied else {
            return Ok(());
        };
        engine.policies().perform(id, &step);
        if step
            .effects
            .contains(&super::machine::Effect::DeliverRepair)
        {
            engine.agents().deliver_prompt(&repairer, &message).await;
        }
        Ok(())
    }
}

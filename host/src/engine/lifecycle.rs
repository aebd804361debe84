//! Gating: running a policy's gate when its members have ended their turn,
//! and what follows the verdict (done, commit-ready, nudge, blocked), plus
//! the `next` chain.

use super::judge::{Judged, judge_outcome};
use super::machine::{Input, Step, Task, Verdict, drives};
use super::nudge::render_nudge;
use super::on_snapshot::changed_after;
use super::pinned::{after_gate, fingerprint_of, summary_of};
use super::said::Said;
use super::{AttachInput, Engine, EngineError, EngineResult, GateOn, PolicyEvent, Then, stored};
use crate::gate::{GateContext, GateRunner};
use crate::model::event::{self as ev, PolicyChange as P};
use crate::model::plan::DiffSummary;
use crate::store::{PolicyRow, SessionState, Tx};
use crate::verdict::{Durations, Outcome, RunReport};
use std::path::Path;
use tokio::sync::OwnedSemaphorePermit;

/// What the change of a passing gate is: its summary (`policy:commit-ready`'s
/// plan) and, for a review chain, its diff against HEAD.
struct Changed {
    summary: Option<DiffSummary>,
    review_diff: Option<String>,
}

impl Engine {
    /// Starts the gate task of a queued policy (once: a second call while
    /// one runs does nothing).
    pub(crate) fn schedule_gate(&self, id: &str) {
        self.schedule_gate_with(id, None);
    }

    /// As `schedule_gate`; with `slot`, the policy was already moved to
    /// `gating` (in the transaction that queued it) holding that slot.
    pub(crate) fn schedule_gate_with(&self, id: &str, slot: Option<OwnedSemaphorePermit>) {
        let mut tasks = self
            .inner
            .policies
            .gate_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if tasks.contains_key(id) {
            return;
        }
        let engine = self.clone();
        let owned = id.to_string();
        let handle = tokio::spawn(async move {
            let step = match engine.gate_task(&owned, slot).await {
                Ok(step) => step,
                Err(e) => {
                    // `Input::StoreError`: nothing was stored, the sweep
                    // re-drives the policy from the state the store has.
                    tracing::error!(policy = %owned, error = %e, "gate task failed; the policy stays where the store has it and the sweep picks it up");
                    None
                }
            };
            engine
                .inner
                .policies
                .gate_tasks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&owned);
            if let Some(step) = step {
                engine.perform(&owned, &step);
            }
        });
        tasks.insert(id.to_string(), handle.abort_handle());
    }

    /// Moves a queued policy to `gating` in `tx` if a gating slot is free
    /// right now, publishing `policy:gating`; returns the slot to hand to
    /// `schedule_gate_with`. Saves a transaction on the common path.
    pub(crate) fn try_start_gating(
        &self,
        tx: &mut Tx<'_>,
        p: &mut PolicyRow,
    ) -> EngineResult<Option<OwnedSemaphorePermit>> {
        if !drives(Task::Slot, p.status) {
            return Ok(None);
        }
        if !self.supervising() {
            return self.settings().wait_paused(tx, p).map(|()| None);
        }
        let Ok(slot) = self.inner.policies.gating.clone().try_acquire_owned() else {
            return Ok(None);
        };
        p.gate_runs += 1;
        let run = p.gate_runs;
        self.transition(tx, p, Input::SlotTaken, |_| {
            Some(P::Gating(ev::Gating { run }).into())
        })?;
        Ok(Some(slot))
    }

    async fn gate_task(
        &self,
        id: &str,
        slot: Option<OwnedSemaphorePermit>,
    ) -> EngineResult<Option<Step>> {
        if let Some(slot) = slot {
            let policy = self.policy(id)?;
            if !drives(Task::Gate, policy.status) {
                return Ok(None);
            }
            return self.gate_policy(id, policy, slot).await;
        }
        if !self.supervising() {
            // Waits, queued, its `policy:paused` said (`wait_paused`).
            return Ok(None);
        }
        let permit = self
            .inner
            .policies
            .gating
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| EngineError::Conflict {
                code: "shutdown",
                message: "the gating slots are closed".into(),
            })?;
        let Some(policy) = self.write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            // Paused while it waited for its slot: it waits on, queued.
            if !drives(Task::Slot, p.status) || !self.supervising() {
                return Ok(None);
            }
            p.gate_runs += 1;
            let run = p.gate_runs;
            self.transition(tx, &mut p, Input::SlotTaken, |_| {
                Some(P::Gating(ev::Gating { run }).into())
            })?;
            Ok(Some(p))
        })?
        else {
            return Ok(None);
        };
        self.gate_policy(id, policy, permit).await
    }

    /// Runs the gate of a policy in `gating`, holding its slot, and stores
    /// what follows.
    async fn gate_policy(
        &self,
        id: &str,
        policy: PolicyRow,
        permit: OwnedSemaphorePermit,
    ) -> EngineResult<Option<Step>> {
        // The configuration this gate runs under, to its end, whatever a
        // reload changes meanwhile.
        let runner = self.runner();
        let input = match stored::spec(&policy) {
            Ok(input) => input,
            Err(e) => return self.settle_corrupt(id, &e),
        };
        // A test hook: a gate input that kills the daemon (as an abort in
        // a library could), for the poison-policy test.
        if let (Ok(label), Some(mine)) = (
            std::env::var("GATEHOST_TEST_ABORT_GATE_LABEL"),
            input.label.as_deref(),
        ) && label == mine
        {
            tracing::error!(policy = %id, "test hook: aborting the daemon in this gate");
            std::process::abort();
        }
        let mut sessions = Vec::new();
        for sid in &policy.sessions {
            if let Some(s) = self.inner.store.session(sid)? {
                if let Some(e) = super::damage::session_error(&s) {
                    // Its workspace and messages cannot be known.
                    drop(permit);
                    return self.settle_corrupt(id, &e);
                }
                sessions.push(s);
            }
        }
        let workspace = sessions
            .first()
            .map(|s| s.workspace.clone())
            .unwrap_or_default();
        let commit_paths: Option<Vec<String>> = match (input.then, &input.commit) {
            (Then::Commit, Some(c)) => Some(c.paths.clone()),
            _ => None,
        };
        if let (Some(paths), GateOn::Snapshot) = (&commit_paths, input.gate_on()) {
            let super::on_snapshot::SnapshotRun {
                report,
                taken,
                lease,
                watch,
            } = self
                .run_on_snapshot(&runner, &policy, input, &sessions, &workspace, paths)
                .await;
            drop(permit);
            let review_diff = match &taken {
                Some((_, files)) if report.outcome == Outcome::Pass && input.review.is_some() => {
                    Some(crate::change::render(files))
                }
                _ => None,
            };
            let (changes, changed_after, snap) = match taken {
                Some((snap, files)) if report.outcome == Outcome::Pass => (
                    Some(summary_of(&files)),
                    changed_after(&workspace, &snap, self.stat_cache(&workspace), watch).await,
                    Some(snap),
                ),
                Some((snap, _)) => (None, Ok(Vec::new()), Some(snap)),
                None => (None, Ok(Vec::new()), None),
            };
            // Once the workspace has been read again: the two walks would
            // share the machine's cores, and the verdict waits for this one.
            if let Some(lease) = lease {
                crate::worktree::settle_in_background(lease, &workspace, &policy.id);
            }
            let judged = Judged::Snapshot {
                snap,
                changed_after,
            };
            return self
                .finish_gate(
                    &runner,
                    id,
                    input,
                    report,
                    judged,
                    Changed {
                        summary: changes,
                        review_diff,
                    },
                )
                .await;
        }
        let before = fingerprint_of(&workspace, commit_paths.as_deref()).await;
        let report = self
            .run_in_each_workspace(&runner, &policy, input, &sessions)
            .await;
        let (after, changes) = after_gate(
            &workspace,
            commit_paths.as_deref(),
            report.outcome == Outcome::Pass,
        )
        .await;
        drop(permit);
        let review_diff = if report.outcome == Outcome::Pass && input.review.is_some() {
            Some(
                super::review::workspace_diff(&workspace, self.runner().config().change_caps).await,
            )
        } else {
            None
        };
        self.finish_gate(
            &runner,
            id,
            input,
            report,
            Judged::Workspace { before, after },
            Changed {
                summary: changes,
                review_diff,
            },
        )
        .await
    }

    pub(super) async fn run_policy_gates(
        &self,
        runner: &GateRunner,
        policy: &PolicyRow,
        input: &AttachInput,
        sessions: &[crate::store::SessionRow],
        workspace: &str,
        snapshot_changes: Option<Result<Vec<crate::change::FileChange>, String>>,
    ) -> RunReport {
        let gates = input.gates();
        if gates.is_empty() {
            return RunReport {
                outcome: Outcome::Pass,
                reason: "no gate: the turn-end passes".into(),
                durations: Durations::default(),
                gates: Vec::new(),
                skipped: Vec::new(),
            };
        }
        let anchor = match super::sessions::open_registered(workspace, sessions) {
            Ok(a) => a,
            // Each of its errors names the workspace.
            Err(e) => return error_report(e.to_string()),
        };
        let text = sessions
            .iter()
            .filter_map(|s| {
                s.last_message
                    .as_ref()
                    .map(|m| format!("[session {}] {m}", s.id))
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        // Plugins see the change since HEAD (computed in process: nothing
        // the repository names runs). A workspace without git has no
        // baseline: plugins then get no changed files.
        let needs_diff = gates.iter().any(|g| g.imp().runs_plugin());
        let diff = if let Some(changes) = snapshot_changes {
            match changes {
                Ok(changes) => Some(changes),
                Err(e) if needs_diff => {
                    return error_report(format!("cannot give the change to the plugins: {e}"));
                }
                Err(_) => None,
            }
        } else if needs_diff && std::fs::symlink_metadata(Path::new(workspace).join(".git")).is_ok()
        {
            // A `.git` directory or a linked worktree's `.git` file (whose
            // directories the commit module checks; a refused one is an
            // error, never a silent empty change).
            let ws = workspace.to_string();
            let caps = self.runner().config().change_caps;
            match tokio::task::spawn_blocking(move || {
                crate::commit::workspace_changes(Path::new(&ws), caps)
            })
            .await
            {
                Ok(Ok(d)) => Some(d),
                Ok(Err(e)) => {
                    return error_report(format!(
                        "cannot compute the workspace's changes for the plugins: {e}"
                    ));
                }
                Err(e) => return error_report(format!("the diff task failed: {e}")),
            }
        } else {
            None
        };
        let ctx = GateContext {
            text: (!text.is_empty()).then_some(text),
            diff: None,
            changes: diff,
            session_id: policy.sessions.first().cloned(),
            policy_id: Some(policy.id.clone()),
            trust: input.attached_by,
        };
        runner.run_gates(gates, &anchor, &ctx).await
    }

    async fn finish_gate(
        &self,
        runner: &GateRunner,
        id: &str,
        input: &AttachInput,
        report: RunReport,
        judged: Judged,
        changed: Changed,
    ) -> EngineResult<Option<Step>> {
        let Changed {
            summary: changes,
            review_diff,
        } = changed;
        let summary = ev::GateSummary::of(&report);
        let alive = self.alive_members(input)?;
        self.write(|tx| {
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
                        Verdict::Pass(after) => self.begin_review(
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
            if let Some(s) = self.inner.store.session(&sid)?
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
        let store_check =
            super::attach::validate(&mut next, &self.runner(), &|sid| Ok(tx.session(sid)?));
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
            let engine = self.clone();
            let cid = child.id.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                engine.schedule_gate(&cid);
            });
        }
        Ok(())
    }
}

fn error_report(reason: String) -> RunReport {
    RunReport::error(reason)
}

//! Gating: running a policy's gate when its members have ended their turn
//! (holding a gating slot, on its snapshot or in its members'
//! workspaces); what follows the verdict is `gated`'s.
//!
//! It owns the gate tasks and the gating slots. It must never run a gate
//! without a slot, nor two gate tasks for one policy.

use super::Policies;
use super::judge::Judged;
use super::machine::{Input, Step, Task, drives};
use super::on_snapshot::changed_after;
use super::pinned::{after_gate, fingerprint_of, summary_of};
use super::{AttachInput, EngineError, EngineResult, GateOn, Then, stored};
use crate::gate::{GateContext, GateRunner};
use crate::model::event::{self as ev, PolicyChange as P};
use crate::model::plan::DiffSummary;
use crate::store::{PolicyRow, Tx};
use crate::verdict::{Durations, Outcome, RunReport};
use std::path::Path;
use tokio::sync::OwnedSemaphorePermit;

/// What the change of a passing gate is: its summary (`policy:commit-ready`'s
/// plan) and, for a review chain, its diff against HEAD.
pub(super) struct Changed {
    pub(super) summary: Option<DiffSummary>,
    pub(super) review_diff: Option<String>,
}

impl Policies {
    /// Starts the gate task of a queued policy (once: a second call while
    /// one runs does nothing).
    pub(crate) fn schedule_gate(&self, id: &str) {
        self.schedule_gate_with(id, None);
    }

    /// As `schedule_gate`; with `slot`, the policy was already moved to
    /// `gating` (in the transaction that queued it) holding that slot.
    pub(crate) fn schedule_gate_with(&self, id: &str, slot: Option<OwnedSemaphorePermit>) {
        let mut tasks = self.gate_tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tasks.contains_key(id) {
            return;
        }
        let engine = self.engine();
        let owned = id.to_string();
        let handle = tokio::spawn(async move {
            let step = match engine.policies().gate_task(&owned, slot).await {
                Ok(step) => step,
                Err(e) => {
                    // `Input::StoreError`: nothing was stored, the sweep
                    // re-drives the policy from the state the store has.
                    // An outage of the store is logged once by itself.
                    if engine.outage().failed_engine(&e) {
                        tracing::info!(policy = %owned, error = %e, "gate task failed; the policy stays where the store has it and the sweep picks it up");
                    } else {
                        tracing::error!(policy = %owned, error = %e, "gate task failed; the policy stays where the store has it and the sweep picks it up");
                    }
                    None
                }
            };
            engine
                .policies()
                .gate_tasks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&owned);
            if let Some(step) = step {
                engine.policies().perform(&owned, &step);
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
        let engine = self.engine();
        if !drives(Task::Slot, p.status) {
            return Ok(None);
        }
        if !engine.supervising() {
            return engine.settings().wait_paused(tx, p).map(|()| None);
        }
        let Ok(slot) = self.gating.clone().try_acquire_owned() else {
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
        let engine = self.engine();
        if let Some(slot) = slot {
            let policy = engine.policy(id)?;
            if !drives(Task::Gate, policy.status) {
                return Ok(None);
            }
            return self.gate_policy(id, policy, slot).await;
        }
        if !engine.supervising() {
            // Waits, queued, its `policy:paused` said (`wait_paused`).
            return Ok(None);
        }
        let permit =
            self.gating
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| EngineError::Conflict {
                    code: "shutdown",
                    message: "the gating slots are closed".into(),
                })?;
        let Some(policy) = engine.write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            // Paused while it waited for its slot: it waits on, queued.
            if !drives(Task::Slot, p.status) || !engine.supervising() {
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
        let engine = self.engine();
        // Worktree settles in progress pause until the verdict is stored
        // (the snapshot, the gate, the recording: the turn-end's path).
        let _busy = self.worktrees.busy();
        // The configuration this gate runs under, to its end, whatever a
        // reload changes meanwhile.
        let runner = engine.runner();
        let input = match stored::spec(&policy) {
            Ok(input) => input,
            Err(e) => return self.settle_corrupt(id, &e),
        };
        // A test hook: a gate input that kills the daemon (as an abort in
        // a library could), for the poison-policy test.
        crate::test_hooks::abort_in_gate(id, input.label.as_deref());
        let mut sessions = Vec::new();
        for sid in &policy.sessions {
            if let Some(s) = engine.store().session(sid)? {
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
                overlay,
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
            // A run whose every process saw the worktree through its
            // overlay left the worktree as the sync made it: nothing to
            // read back.
            match (lease, overlay) {
                (Some(lease), Some(overlay)) if !overlay.bypassed() => lease.overlaid(),
                (Some(lease), _) => {
                    crate::worktree::settle_in_background(lease, &workspace, &policy.id);
                }
                (None, _) => {}
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
                super::review::workspace_diff(&workspace, engine.runner().config().change_caps)
                    .await,
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
        snapshot: Option<super::on_snapshot::OnSnapshot>,
    ) -> RunReport {
        let (snapshot_changes, overlay) = match snapshot {
            Some(s) => (Some(s.changes), s.overlay),
            None => (None, None),
        };
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
            Ok(a) => match overlay {
                Some(overlay) => a.through(overlay),
                None => a,
            },
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
            let caps = self.engine().runner().config().change_caps;
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
}

fn error_report(reason: String) -> RunReport {
    RunReport::error(reason)
}

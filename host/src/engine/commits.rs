//! The commit an ack (or `then: commit` without one) allows, exactly once;
//! the ack itself is `ack`'s.
//!
//! Steps, each stored before the next runs: `awaiting-ack` → (ack,
//! fingerprint still the gated one) `committing` → commit object written,
//! its id stored (`prepared`) → branch moved with the expected old value →
//! `done` with `policy:committed {sha}`. After a crash the stored step says
//! what is left: a prepared commit whose branch already moved is only
//! recorded, never made twice.

use super::Policies;
use super::machine::{CommitResult, Input, Task, drives};
use super::{EngineError, EngineResult, PolicyEvent, stored};
use crate::commit::{self, CommitError, Prepared, RefState};
use crate::model::event::{self as ev, PolicyChange as P};
use crate::store::{PolicyStatus, now_ms};
use std::path::Path;

/// Tries at publishing a prepared commit before the policy is blocked.
const PUBLISH_ATTEMPTS: u32 = 5;
/// How long after recording a publish's start its locks may be made.
const LOCK_SPAN: std::time::Duration = std::time::Duration::from_secs(60);
/// Preparations of one commit when its branch keeps moving.
const COMMIT_ATTEMPTS: u32 = 3;

/// Runs `f` (gatehost's writes into the workspace's repository) on a
/// thread that may write only beneath that workspace's `.git`: a symlink
/// the agent planted there (reflog, ref, object directory) cannot carry a
/// write out of it.
pub(super) fn confined<T: Send>(
    runner: &crate::gate::GateRunner,
    workspace: &Path,
    f: impl FnOnce() -> Result<T, commit::CommitError> + Send,
) -> Result<T, commit::CommitError> {
    use std::os::fd::AsFd;
    let git = commit::git_dir_handle(workspace)?;
    runner
        .sandbox()
        .confine_git_writes(git.as_fd(), f)
        .map_err(|e| commit::CommitError::UnsafeRepository(e.to_string()))?
}

impl Policies {
    pub(crate) fn spawn_commit(&self, id: String) {
        let Some(task) = self.begin_task(&id) else {
            return;
        };
        let engine = self.engine();
        tokio::spawn(async move {
            // The policy is free again however the task ends.
            let _task = task;
            if let Err(e) = engine.policies().commit_task(&id).await {
                if engine.outage().failed_engine(&e) {
                    tracing::info!(policy = %id, error = %e, "commit step failed; the sweep retries it");
                } else {
                    tracing::error!(policy = %id, error = %e, "commit step failed; the sweep retries it");
                }
            }
        });
    }

    /// Makes the commit of a policy in `committing`. Commits into one
    /// workspace are made one at a time (prepare and publish under its
    /// lock), so two green policies never race for the branch; a prepared
    /// commit whose branch moved anyway (a person committed in between) is
    /// prepared again on the new HEAD — the fingerprint still guards the
    /// content — a bounded number of times before the policy is blocked.
    async fn commit_task(&self, id: &str) -> EngineResult<()> {
        let engine = self.engine();
        let p = engine.policy(id)?;
        if !drives(Task::Commit, p.status) {
            return Ok(());
        }
        let workspace = match stored::damaged(&p).and_then(|()| self.workspace_of(&p)) {
            Ok(w) => w,
            Err(e @ (EngineError::Corrupt { .. } | EngineError::SessionCorrupt { .. })) => {
                // Nothing can be committed from it: blocked, and said.
                self.settle_corrupt(id, &e)?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let lock = super::lane(&self.commit_locks, &workspace);
        let _held = lock.lock().await;
        for attempt in 1..=COMMIT_ATTEMPTS {
            let reference = match self.commit_once(id, &workspace).await {
                Ok(Some(reference)) => reference,
                Ok(None) => return Ok(()),
                // Retrying cannot help: the policy says why it stopped.
                Err(e @ EngineError::Corrupt { .. }) => {
                    return self.block_commit(id, e.to_string());
                }
                Err(e) => return Err(e),
            };
            if attempt == COMMIT_ATTEMPTS {
                return self.block_commit(
                    id,
                    format!(
                        "{reference} kept moving away from the prepared commit's parent ({COMMIT_ATTEMPTS} tries); nothing was committed"
                    ),
                );
            }
            tracing::info!(policy = id, %reference, "the branch moved before the commit was published; preparing it again");
            engine.write(|tx| {
                let Some(mut p) = tx.policy(id)? else {
                    return Ok(());
                };
                p.prepared = None;
                p.updated_at = now_ms();
                tx.record_prepared(&p)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// One try: prepare (unless stored) and publish. `Some(reference)`:
    /// the branch moved away from the prepared parent.
    async fn commit_once(&self, id: &str, workspace: &str) -> EngineResult<Option<String>> {
        let engine = self.engine();
        let p = engine.policy(id)?;
        if !drives(Task::Commit, p.status) {
            return Ok(None);
        }
        let workspace = workspace.to_string();
        let prepared: Option<Prepared> = stored::prepared(&p)?.cloned();
        let prepared = match prepared {
            Some(pr) => pr,
            None => {
                let plan = stored::plan_required(&p)?.clone();
                let (paths, message, fp) = (plan.paths, plan.message, plan.fingerprint);
                let ws = workspace.clone();
                let runner = engine.runner();
                let snapshot = plan.snapshot;
                let made = tokio::task::spawn_blocking(move || {
                    let who = &runner.config().daemon.committer;
                    confined(&runner, Path::new(&ws), || match &snapshot {
                        // Exactly what the gates judged.
                        Some(snap) => commit::prepare_snapshot(Path::new(&ws), snap, &message, who),
                        None => commit::prepare_by(Path::new(&ws), &paths, &message, &fp, who),
                    })
                })
                .await
                .map_err(|e| EngineError::task_failed("the commit task", e))?;
                match made {
                    Ok(pr) if pr.nothing_to_commit => {
                        return self.finish_commit(id, None, true).map(|_| None);
                    }
                    Ok(pr) => {
                        let still = engine.write(|tx| {
                            let Some(mut p) = tx.policy(id)? else {
                                return Ok(false);
                            };
                            if !drives(Task::Commit, p.status) {
                                // Cancelled while it was prepared: the
                                // commit object stays unreferenced.
                                return Ok(false);
                            }
                            p.prepared = Some(pr.clone());
                            p.updated_at = now_ms();
                            tx.record_prepared(&p)?;
                            Ok(true)
                        })?;
                        if !still {
                            return Ok(None);
                        }
                        crate::test_hooks::commit_barrier(id).await;
                        pr
                    }
                    Err(e @ (CommitError::Stale { .. } | CommitError::RefMoved { .. })) => {
                        let why = match e {
                            CommitError::RefMoved { .. } => {
                                "the branch moved since the snapshot was judged (committing it would undo that commit); the gate runs again"
                            }
                            _ => "the commit paths changed after the ack; the gate runs again",
                        };
                        let step = engine.write(|tx| {
                            let Some(mut p) = tx.policy(id)? else {
                                return Ok(None);
                            };
                            if !drives(Task::Commit, p.status) {
                                return Ok(None);
                            }
                            p.plan = None;
                            p.reason = Some(why.into());
                            self.transition(
                                tx,
                                &mut p,
                                Input::Commit(CommitResult::Stale),
                                |event| match event {
                                    PolicyEvent::Stale => Some(P::stale(None, why).into()),
                                    PolicyEvent::Queued => Some(
                                        P::queued("stale content at commit time: re-gating").into(),
                                    ),
                                    _ => None,
                                },
                            )
                        })?;
                        if let Some(step) = step {
                            self.perform(id, &step);
                        }
                        return Ok(None);
                    }
                    Err(e) => {
                        return self
                            .block_commit(id, format!("the commit could not be made: {e}"))
                            .map(|_| None);
                    }
                }
            }
        };
        // Publish (or, after a crash, finish publishing): a branch still at
        // the parent is moved; one already at the commit only gets its
        // index brought in line. A lock held by anyone else (a live git)
        // is waited out with a growing pause a few times before the policy
        // is blocked; only the locks a previous life made while it
        // published (each publish's start recorded before it took any lock,
        // and removed once it ended) are cleared.
        let mut attempt = 0;
        let state = loop {
            attempt += 1;
            let started = now_ms();
            let recorded = engine.write(|tx| {
                let Some(mut p) = tx.policy(id)? else {
                    return Ok(false);
                };
                if !drives(Task::Commit, p.status) {
                    return Ok(false);
                }
                p.publish_open.push(started);
                tx.record_publishes(&p)?;
                Ok(true)
            })?;
            if !recorded {
                // Cancelled before its branch moved.
                return Ok(None);
            }
            // Publishes into this workspace, of any policy, that began in
            // a previous life and never ended: that life died in them, and
            // its locks are in the way of every commit here.
            let (mut ours, mut dead) = (Vec::new(), Vec::new());
            for other in engine.store().policies_with_open_publishes()? {
                if self.workspace_of(&other).ok().as_deref() == Some(workspace.as_str()) {
                    let spans: Vec<_> = other
                        .publish_open
                        .iter()
                        .filter_map(|&at| self.previous_life_span(at))
                        .collect();
                    if !spans.is_empty() {
                        dead.push(other.id.clone());
                    }
                    ours.extend(spans);
                }
            }
            let ws = workspace.clone();
            let pr = prepared.clone();
            let runner = engine.runner();
            let outcome = tokio::task::spawn_blocking(move || {
                let who = &runner.config().daemon.committer;
                confined(&runner, Path::new(&ws), || {
                    if !ours.is_empty() {
                        commit::clear_stale_locks(Path::new(&ws), &pr, &ours)?;
                    }
                    match commit::ref_state(Path::new(&ws), &pr)? {
                        RefState::AtParent | RefState::AtCommit => {
                            commit::publish_by(Path::new(&ws), &pr, who).map(|_| RefState::AtCommit)
                        }
                        RefState::Descends => {
                            // Published by a life that died before the
                            // index was updated, and committed on since.
                            commit::sync_index_to_branch(Path::new(&ws), &pr)?;
                            Ok(RefState::Descends)
                        }
                        other => Ok(other),
                    }
                })
            })
            .await
            .map_err(|e| EngineError::task_failed("the commit task", e))?;
            // This publish ended (its locks are released); after one that
            // went through, the dead lives' locks are gone too.
            let ended = outcome.is_ok();
            let closed = engine.write(|tx| {
                let Some(mut p) = tx.policy(id)? else {
                    return Ok(());
                };
                if ended {
                    p.publish_open.clear();
                } else {
                    p.publish_open.retain(|&at| at != started);
                }
                tx.record_publishes(&p)?;
                // Once a publish went through, the dead lives' locks in this
                // workspace are gone: their records (of any policy, a
                // cancelled one included) need not be read again.
                let boot = self.boot_ms();
                for other in dead.iter().filter(|o| ended && o.as_str() != id) {
                    if let Some(mut o) = tx.policy(other)? {
                        o.publish_open.retain(|&at| at >= boot);
                        tx.record_publishes(&o)?;
                    }
                }
                Ok(())
            });
            if let Err(e) = closed {
                // Kept open, its span may clear a lock made just after it
                // once this commit is recovered; said.
                tracing::warn!(policy = id, error = %e, "cannot record the end of a publish");
            }
            match outcome {
                Err(e @ CommitError::Git { .. }) if attempt < PUBLISH_ATTEMPTS => {
                    let pause = std::time::Duration::from_millis(500 << (attempt - 1).min(4));
                    tracing::info!(policy = id, attempt, error = %e, ?pause, "publishing the commit failed (a lock held by a live git?); retrying");
                    tokio::time::sleep(pause).await;
                }
                other => break other,
            }
        };
        match state {
            Ok(RefState::AtCommit | RefState::Descends) => self
                .finish_commit(id, prepared.commit.clone(), false)
                .map(|_| None),
            Ok(RefState::AtParent | RefState::Moved) => Ok(Some(prepared.reference.clone())),
            Err(e) => self
                .block_commit(id, format!("the commit could not be recorded: {e}"))
                .map(|_| None),
        }
    }

    /// The span in which a previous life of the daemon, having recorded
    /// `at` (ms) as the start of a publish, may have made git locks; `None`
    /// when `at` is this life's own.
    /// When this daemon started, in ms since the epoch.
    fn boot_ms(&self) -> i64 {
        self.boot_time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    fn previous_life_span(
        &self,
        at: i64,
    ) -> Option<std::ops::RangeInclusive<std::time::SystemTime>> {
        use std::time::{Duration, UNIX_EPOCH};
        let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(at).ok()?);
        let boot = self.boot_time;
        if at >= boot {
            return None;
        }
        // Clock granularity before; a slow disk after, never past our start.
        let from = at.checked_sub(Duration::from_secs(1)).unwrap_or(at);
        let to = (at + LOCK_SPAN).min(boot);
        Some(from..=to)
    }

    fn finish_commit(&self, id: &str, sha: Option<String>, nothing: bool) -> EngineResult<()> {
        self.engine().write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(());
            };
            let cancelled = p.status == PolicyStatus::Cancelled;
            // A commit published in the instant its policy was cancelled
            // is still said on it (the machine's step there).
            let said_on_cancel = cancelled && sha.is_some();
            if !(drives(Task::Commit, p.status) || said_on_cancel) {
                return Ok(());
            }
            p.commit_sha = sha.clone();
            if !cancelled {
                p.reason = Some(match &sha {
                    Some(s) => format!("committed {s}"),
                    None => "nothing to commit: the paths already match HEAD".into(),
                });
            }
            let committed = ev::Committed {
                sha: sha.clone(),
                nothing_to_commit: nothing,
                paths: stored::plan(&p)
                    .ok()
                    .flatten()
                    .map(|plan| plan.paths.clone()),
                note: cancelled.then(|| "published in the instant the policy was cancelled".into()),
            };
            self.transition(
                tx,
                &mut p,
                Input::Commit(CommitResult::Committed),
                |event| match event {
                    PolicyEvent::Committed => Some(P::Committed(committed.clone()).into()),
                    PolicyEvent::Done => Some(P::done().into()),
                    _ => None,
                },
            )?;
            Ok(())
        })?;
        tracing::info!(policy = id, sha = ?sha, "committed");
        Ok(())
    }

    fn block_commit(&self, id: &str, reason: String) -> EngineResult<()> {
        tracing::warn!(policy = id, %reason, "commit blocked");
        self.engine().write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(());
            };
            if !drives(Task::Commit, p.status) {
                return Ok(());
            }
            p.reason = Some(reason.clone());
            // The commit's own failure (a planted symlink where gatehost
            // writes, a ref that keeps moving), then what it leads to.
            self.transition(
                tx,
                &mut p,
                Input::Commit(CommitResult::Failed),
                |event| match event {
                    PolicyEvent::Blocked => {
                        Some(P::blocked(ev::BlockOutcome::Error, Some(reason.clone())).into())
                    }
                    PolicyEvent::CommitFailed => Some(P::commit_failed(reason.clone()).into()),
                    _ => None,
                },
            )?;
            Ok(())
        })
    }
}

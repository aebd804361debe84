//! Keeping policies moving without a person: recovery at start (from
//! the stored state, counting the gates a fault of the daemon killed), the
//! sweep that re-drives what a failed task left behind, and retention.
//!
//! It owns when those run and what they re-drive. It must never change a
//! policy's state but through `Policies::transition`, and never start a
//! second task for a policy that has one.

use super::Policies;
use super::machine::{Decision, Input, Task, drives};
use super::{EngineResult, WORKING, machine};
use crate::model::event::{BlockOutcome, Blocked, PolicyChange, Queued};
use crate::store::{PolicyRow, now_ms};
use std::time::Duration;

/// Daemon deaths in a row during one policy's gate that settle it.
const POISON_AFTER: i64 = 2;

/// How often the sweep looks for policies left without a task.
const SWEEP_EVERY: Duration = Duration::from_secs(3);

/// A policy untouched for this long in a working state, with no task, was
/// left behind (a live transition schedules its task within milliseconds).
const SWEEP_AFTER_MS: i64 = 5_000;

impl Policies {
    /// Self-healing: every few seconds, re-drives the policies a failed
    /// task left behind (a store or git error, a full disk): `gating` or
    /// `queued` with no gate task, `nudging` or `committing` with no task.
    /// Runs until the daemon stops.
    pub(crate) fn spawn_sweeper(&self) {
        // A test hook: no sweep, so that a test sees what re-drives a
        // policy without it (a reload that enables supervision).
        if !crate::test_hooks::sweep() {
            return;
        }
        let engine = self.engine();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SWEEP_EVERY) => {}
                    _ = engine.stopped() => return,
                }
                match engine.policies().sweep() {
                    Ok(()) => engine.outage().read_ok(),
                    // An outage is logged once, at its start and its end.
                    Err(e) if engine.outage().failed_engine(&e) => {
                        tracing::debug!(error = %e, "the sweep could not read the store; it tries again");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the sweep could not read the store; it tries again");
                    }
                }
            }
        });
    }

    /// Applies `[retention]` at start and then every `every`, on the
    /// blocking pool (in small transactions), logging what it deleted.
    /// Runs until the daemon stops.
    pub(crate) fn spawn_retention(&self) {
        let rules = self.engine().runner().config().retention.clone();
        if !rules.enabled {
            tracing::info!("retention is off: events, deliveries, sessions and policies are kept");
            return;
        }
        let engine = self.engine();
        tokio::spawn(async move {
            loop {
                // In a fleet, the leader alone applies it (once for all).
                if !engine.runs_cluster_timers() {
                    tokio::select! {
                        _ = tokio::time::sleep(rules.every.min(Duration::from_secs(5))) => continue,
                        _ = engine.stopped() => return,
                    }
                }
                let (e2, r) = (engine.clone(), rules.clone());
                match tokio::task::spawn_blocking(move || e2.store().apply_retention(&r, now_ms()))
                    .await
                {
                    Ok(Ok(swept)) if swept.is_empty() => {}
                    Ok(Ok(swept)) => tracing::info!(
                        events = swept.events,
                        deliveries = swept.deliveries,
                        sessions = swept.sessions,
                        policies = swept.policies,
                        routines = swept.routines,
                        "retention deleted what no live policy needs"
                    ),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "retention could not run; it tries again later");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the retention task failed; it tries again later");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(rules.every) => {}
                    _ = engine.stopped() => return,
                }
            }
        });
    }

    /// Blocks what does not decode (a row damaged while the daemon ran)
    /// among the policies a task drives, and re-drives what a failed task
    /// left behind. It reads only those policies, by a partial index:
    /// watching policies (and those awaiting their ack) are never its work
    /// (a damaged one is blocked when a turn-end, an ack or a cancel reads
    /// it, or at the next start), nor, while supervision is paused, queued
    /// ones.
    pub(super) fn sweep(&self) -> EngineResult<()> {
        let engine = self.engine();
        let stale_before = now_ms() - SWEEP_AFTER_MS;
        for p in self
            .engine()
            .store()
            .policies_to_sweep(engine.supervising())?
        {
            if p.damage.is_some() {
                if let Some(step) = self.block_damaged(&p.id)? {
                    self.perform(&p.id, &step);
                }
            } else if drives(Task::Slot, p.status) && !engine.supervising() {
                // It waits for supervision, said by its `policy:paused`.
            } else if WORKING.contains(&p.status) && p.updated_at < stale_before {
                self.redrive(
                    &p,
                    "its gate task stopped on an error (the store, a full disk); it runs again",
                )?;
            }
        }
        Ok(())
    }

    /// Starts what a policy in a working state needs when no task of this
    /// daemon drives it (after a restart, or a task that failed): a gate
    /// left `gating` is queued again (`reason` says why) and run; `queued`
    /// is run; `nudging` and `committing` resume. A policy whose gate task
    /// runs is left to it; nudge and commit tasks run once at a time.
    pub(super) fn redrive(&self, p: &PolicyRow, reason: &str) -> EngineResult<()> {
        if (drives(Task::Slot, p.status) || drives(Task::Gate, p.status))
            && self.has_gate_task(&p.id)
        {
            return Ok(());
        }
        if drives(Task::Gate, p.status) {
            tracing::warn!(policy = %p.id, %reason, "a policy was left gating");
        }
        let id = p.id.clone();
        let step = if drives(Task::Gate, p.status) {
            // Stored: the gate runs again from `queued`.
            self.engine().write(|tx| {
                let Some(mut p) = tx.policy(&id)? else {
                    return Ok(None);
                };
                self.transition(tx, &mut p, Input::Recover, |_| {
                    Some(PolicyChange::queued(reason).into())
                })
            })?
        } else {
            // Nothing to store: the task resumes from the state as it is.
            match machine::decide(p.status, Input::Recover) {
                Decision::Go(step) => Some(step),
                _ => None,
            }
        };
        if let Some(step) = step {
            self.perform(&id, &step);
        }
        Ok(())
    }

    /// Carries on the policies taken over from the stale host `from`
    /// (`engine::leader`), as a restart would its own: a gate it was
    /// running runs again from `queued`, a queued one runs, a nudge or a
    /// commit resumes (a prepared commit is looked up in git, never made
    /// twice). A policy that waits (watching, awaiting its ack) waits here.
    pub(crate) fn adopt(&self, from: &str, ids: &[String]) -> EngineResult<()> {
        let reason = format!(
            "host {from} stopped while this policy's work ran; this host took it over and runs it again"
        );
        for id in ids {
            let Some(p) = self.engine().store().policy(id)? else {
                continue;
            };
            if WORKING.contains(&p.status) && p.damage.is_none() {
                self.redrive(&p, &reason)?;
            }
        }
        Ok(())
    }

    /// Picks up every policy where it was left: gates that were queued or
    /// running are queued again and run, nudges re-delivered, commits
    /// reconciled. Sessions gatehost had started are marked exited. A
    /// policy whose row (or a member's) does not decode is blocked.
    ///
    /// A policy found `gating` was running its gate when the daemon died.
    /// When the daemon died of a fault of its own (`fault`: the signal the
    /// fault marker recorded, an abort a gate's input could provoke; never
    /// a kill from outside) that is counted, and the second such death in
    /// a row (no verdict stored in between) settles it as `blocked` with a
    /// `policy:blocked` event instead of running the gate again: a gate
    /// input that kills the daemon must not crash-loop it.
    pub(crate) fn recover(&self, fault: Option<&str>) -> EngineResult<()> {
        let engine = self.engine();
        if let Some(signal) = fault {
            tracing::error!(%signal, "the previous daemon died of a fault of its own; the gates it was running are counted");
        }
        // Runs first: the exits the started sessions' recovery reports
        // must find their steps restarted, not dead.
        let routines = engine.runs().recover_routines()?;
        // One read of the sessions, keeping only the damaged and the
        // started ones (never every session held, nor one read per policy).
        let sessions = engine.store().sessions_to_recover()?;
        engine.agents().recover_started_sessions(&sessions)?;
        engine.runs().perform_routine_actions(routines);
        // A row that does not decode is blocked, never a reason not to start.
        self.settle_damaged_rows(&sessions)?;
        let open = engine.store().policies(WORKING)?;
        for p in open {
            // A gate this life started already (recovery of a started
            // session ended its turn) is left to its task.
            if drives(Task::Gate, p.status) && !self.has_gate_task(&p.id) {
                self.recover_gating(&p.id, fault.is_some())?;
                continue;
            }
            self.redrive(&p, "the daemon restarted while the gate ran; it runs again")?;
        }
        if !engine.supervising() {
            tracing::warn!(
                "supervision is paused ([daemon] enabled = false): turn-ends are recorded, no gate starts"
            );
            engine.settings().announce_paused()?;
        }
        Ok(())
    }

    fn recover_gating(&self, id: &str, fault: bool) -> EngineResult<()> {
        let step = self.engine().write(|tx| {
            let Some(mut p) = tx.policy(id)? else {
                return Ok(None);
            };
            if fault {
                p.gate_crashes += 1;
            }
            let crashes = p.gate_crashes;
            if crashes >= POISON_AFTER {
                let reason = format!(
                    "the daemon died {crashes} times in a row while this policy's gate ran; it is not run again (a gate input that kills the daemon would crash-loop it)"
                );
                tracing::error!(policy = %id, crashes, "a poison policy is settled instead of gated again");
                p.reason = Some(reason.clone());
                return self.transition(tx, &mut p, Input::Poisoned, |_| {
                    Some(
                        PolicyChange::Blocked(Blocked {
                            outcome: BlockOutcome::Error,
                            reason: Some(reason.clone()),
                            stale_sessions: None,
                            gate_crashes: Some(crashes),
                            damage: None,
                        })
                        .into(),
                    )
                });
            }
            tracing::warn!(policy = %id, crashes, "the daemon restarted while this policy's gate ran; it runs again");
            self.transition(tx, &mut p, Input::Recover, |_| {
                Some(
                    PolicyChange::Queued(Queued {
                        reason: "the daemon restarted while the gate ran; it runs again".into(),
                        gate_crashes: Some(crashes),
                    })
                    .into(),
                )
            })
        })?;
        if let Some(step) = step {
            self.perform(id, &step);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::store::{PolicyStatus, Store};
    use serde_json::json;

    fn policy(id: &str, status: PolicyStatus) -> PolicyRow {
        let mut p = PolicyRow::sample(id, status, &["s1"]);
        p.spec = serde_json::from_value(
            json!({"sessionId": "s1", "sessionIds": ["s1"], "gate": {"command": "true"},
            "then": "emit", "onFail": {}, "attachedBy": "agent"}),
        )
        .expect("a spec");
        p
    }

    /// The sweep reads only the policies a task drives, by its index: a
    /// watching policy damaged while the daemon runs is not its to find (a
    /// turn-end, an ack or a cancel that reads it blocks it, or the next
    /// start), while one left gating is blocked by it, as before. Before
    /// (issue 48), every sweep read and decoded every unsettled policy.
    #[tokio::test]
    async fn the_sweep_never_reads_a_watching_policy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let runner = crate::gate::GateRunner::new(crate::config::HostConfig::default());
        let engine = Engine::new(store, runner).expect("engine");
        let status = |id: &str| -> String {
            engine
                .store()
                .stored_text("policies", "status", id)
                .expect("status")
                .unwrap_or_default()
        };
        engine
            .store()
            .write(|tx| {
                tx.insert_policy(&mut policy("watching", PolicyStatus::Watching))?;
                tx.insert_policy(&mut policy("gating", PolicyStatus::Gating))?;
                Ok(())
            })
            .expect("fill");
        engine
            .store()
            .damage_column("policies", "spec", None, "[]")
            .expect("damage");
        engine.policies().sweep().expect("sweep");
        assert_eq!(status("gating"), "blocked");
        assert_eq!(status("watching"), "watching");
        // The next start reads every unsettled row for damage: it is
        // blocked then.
        engine.policies().settle_damaged_rows(&[]).expect("start");
        assert_eq!(status("watching"), "blocked");
    }
}

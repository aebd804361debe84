//! What time and a restart feed the routines: the tick (escalations past
//! their deadline, waiting runs whose `waitFor` finished or never will),
//! every second while the daemon runs, and the recovery of every
//! unfinished run at start. Each is one transaction through `feed`, its
//! actions run after the commit.
//!
//! It must never write when nothing is due (an idle tick reads only and
//! wakes no reader), and never change a run's state but through `feed`.

use super::super::routine::{RunInput, RunState, SessionSpec};
use super::super::{EngineResult, services::Routines};
use super::{Context, RoutineActions, Run, TICK, check_waits};
use crate::store::now_ms;

impl Routines {
    /// Feeds the check of waiting step `step`'s `waitFor` (a run not
    /// ready stays as it is, and nothing is written).
    pub(super) fn feed_check(
        &self,
        tx: &mut crate::store::Tx<'_>,
        run: &mut Run,
        step: usize,
    ) -> EngineResult<Vec<super::Action>> {
        let (ready, blocked, why) = check_waits(run, step, |id| tx.session(id))?;
        if !ready && !blocked {
            return Ok(Vec::new());
        }
        self.feed(
            tx,
            run,
            RunInput::Check { ready, blocked },
            Context {
                why,
                ..Context::default()
            },
        )
    }

    /// One look: escalations past their deadline, waiting runs whose
    /// `waitFor` finished (or never will).
    fn routine_tick(&self) -> EngineResult<()> {
        let actions = self.engine().write(|tx| {
            let mut actions = Vec::new();
            for row in tx.routines_past_deadline(now_ms())? {
                let Some(mut run) = Run::usable(row) else {
                    continue;
                };
                actions.extend(self.feed(tx, &mut run, RunInput::Timeout, Context::default())?);
            }
            for row in tx.waiting_routines()? {
                let Some(mut run) = Run::usable(row) else {
                    continue;
                };
                let Some(step) = run.state.step() else {
                    continue;
                };
                actions.extend(self.feed_check(tx, &mut run, step)?);
            }
            Ok(actions)
        })?;
        self.perform_routine(actions);
        Ok(())
    }

    /// Whether the tick has anything to do: an escalation past its
    /// deadline, a waiting run whose check would move it (looked at only
    /// when a session ended a turn or exited since the last look: nothing
    /// else moves a wait). Reads only, so that an idle tick writes nothing
    /// and wakes no reader.
    fn routine_tick_due(&self) -> EngineResult<bool> {
        let e = self.engine();
        let store = e.store();
        // The cheap look first (by index); then whether one of them is a
        // run the tick can move (a damaged one is left as it is).
        if store.routine_past_deadline(now_ms())?
            && store
                .routines_past_deadline(now_ms())?
                .into_iter()
                .any(|r| Run::usable(r).is_some())
        {
            return Ok(true);
        }
        if !self
            .waits_dirty
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(false);
        }
        for row in store.waiting_routines()? {
            let Some(run) = Run::usable(row) else {
                continue;
            };
            let Some(step) = run.state.step() else {
                continue;
            };
            let (ready, blocked, _) = check_waits(&run, step, |id| store.session(id))?;
            if ready || blocked {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The tick, every second until the daemon stops.
    pub(crate) fn spawn_routine_ticker(&self) {
        let engine = self.engine();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TICK) => {}
                    _ = engine.stopped() => return,
                }
                let failed = match engine.runs().routine_tick_due() {
                    Ok(false) => None,
                    Ok(true) => engine.runs().routine_tick().err().map(|e| ("write", e)),
                    Err(e) => Some(("read", e)),
                };
                if let Some((what, e)) = failed {
                    if engine.outage().failed_engine(&e) {
                        tracing::debug!(error = %e, "the routines' tick could not {what} the store; it tries again");
                    } else {
                        tracing::warn!(error = %e, "the routines' tick could not {what} the store; it tries again");
                    }
                    // The waits it did not get to are looked at again.
                    engine
                        .runs()
                        .waits_dirty
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
    }

    /// At start, before the previous daemon's started sessions are marked
    /// exited: every unfinished run is told the daemon restarted (a step
    /// whose ACP agent died with the old daemon starts again, at most
    /// `MAX_RESTARTS` times). Returns what to run once that recovery is
    /// through (`perform_routine_actions`).
    pub(in crate::engine) fn recover_routines(&self) -> EngineResult<Vec<RoutineActions>> {
        self.recover_routines_of(None)
    }

    /// [`Self::recover_routines`] for the routines `only` names (those
    /// taken over from a dead host: `engine::leader`), or every active one.
    pub(in crate::engine) fn recover_routines_of(
        &self,
        only: Option<&[String]>,
    ) -> EngineResult<Vec<RoutineActions>> {
        let engine = self.engine();
        let mut out = Vec::new();
        for row in engine.store().active_routines()? {
            if only.is_some_and(|ids| !ids.contains(&row.id)) {
                continue;
            }
            let id = row.id.clone();
            let r = engine.write(|tx| {
                let Some(row) = tx.routine(&id)? else {
                    return Ok(Vec::new());
                };
                let mut run = Run::decode(row)?;
                let owned = run
                    .state
                    .step()
                    .and_then(|i| run.spec.steps.get(i))
                    .is_some_and(|s| matches!(s.session, SessionSpec::Acp { .. }));
                tracing::info!(routine = %id, state = run.state.name(), owned, "a routine resumes after a restart");
                let mut actions = match run.state {
                    RunState::Waiting { step } => self.feed_check(tx, &mut run, step)?,
                    _ => self.feed(
                        tx,
                        &mut run,
                        RunInput::Recover { owned_agent: owned },
                        Context::default(),
                    )?,
                };
                actions.extend(self.policy_to_attach(tx, &run)?);
                Ok(actions)
            });
            match r {
                Ok(a) => out.push(RoutineActions(a)),
                Err(e) => {
                    tracing::error!(routine = %id, error = %e, "a routine cannot be resumed");
                }
            }
        }
        Ok(out)
    }
}

//! A session's report: one transaction performing the session machine's
//! step (`machine::decide`): the session row, its event, and the
//! policies it moves (a member's turn-end or exit leaves their pending
//! set; an empty set queues the gate).
//!
//! It owns the performing of a report's step. It must never decide a
//! session's state itself (that is the machine's), and never record a
//! report the caller's key does not cover.

use super::machine::{Decision, Effect as F, Event as Said, Input, Refusal, Standing, decide};
use super::{MAX_MESSAGE, ReportKind, ReportOutcome, UNGATED, cap};
use crate::engine::keys::Caller;
use crate::engine::machine::Input as PolicyInput;
use crate::engine::{EngineError, EngineResult, damage, services::Sessions};
use crate::model::event::{self as ev, Event, SessionEvent};
use crate::store::{PolicyRow, PolicyStatus, SessionRow};

impl Sessions {
    /// A turn-end of `s` that no live policy of the operator's has as a
    /// member: the stop was not gated by the operator (policies the agent
    /// attached itself may still judge it; they are the agent's to
    /// switch off). Said once per session (`session:ungated`, a person's
    /// business: a standing policy that did not match, say), for the
    /// sessions agents run themselves (a hook's, the API's); the sessions
    /// the daemon starts are its routines' and reviews', which say their own.
    /// Returns whether the stop was ungated.
    /// `live`: the session's live policies (`Records::live_with`).
    fn note_ungated(
        &self,
        tx: &mut crate::store::Tx<'_>,
        s: &SessionRow,
        live: &[PolicyRow],
    ) -> EngineResult<bool> {
        let e = self.engine();
        if s.command.is_some() || e.settings().operator_watches(live) {
            return Ok(false);
        }
        if tx.has_session_event(&s.id, UNGATED)? {
            return Ok(true);
        }
        let reason = if live.is_empty() {
            "no policy watches this session: its stop was not gated"
        } else {
            "only policies the agent attached watch this session: no policy of the operator's gated its stop"
        };
        let said = ev::Ungated {
            session_id: s.id.clone(),
            cwd: s.cwd.clone(),
            turn: s.turns,
            reason: reason.to_string(),
        };
        e.append(
            tx,
            &Event::Session(SessionEvent::Ungated(said)),
            Some(&s.id),
            None,
        )?;
        tracing::warn!(session = %s.id, turn = s.turns, "a stop no policy watches: not gated");
        Ok(true)
    }

    /// A report from (or about) a session. Returns the event cursor, or
    /// `None` for a heartbeat (which only updates the session).
    /// The daemon's own report, about a session it follows.
    pub(crate) fn report(
        &self,
        id: &str,
        kind: ReportKind,
        message: Option<String>,
    ) -> EngineResult<Option<i64>> {
        self.report_counted(id, kind, message, &Caller::operator())
            .map(|r| r.cursor)
    }

    /// [`Sessions::report`], also naming, for a turn-end, the policies whose
    /// verdict on the session's work is to come: those it counted (watching
    /// the session, which was pending in them) and those already judging it
    /// (queued, gating or nudging), so a caller (a CLI's stop hook) knows
    /// whose verdicts to wait for.
    ///
    /// With the agent token, only with the session's key.
    pub(crate) fn report_counted(
        &self,
        id: &str,
        kind: ReportKind,
        message: Option<String>,
        caller: &Caller,
    ) -> EngineResult<ReportOutcome> {
        let engine = self.engine();
        let message = message.map(|m| cap(m, MAX_MESSAGE));
        let mut counted = Vec::new();
        let mut routine_actions = Vec::new();
        let mut ungated = false;
        let (cursor, queued) = engine.write(|tx| {
            counted.clear();
            routine_actions.clear();
            ungated = false;
            let mut s = tx
                .session(id)?
                .ok_or_else(|| EngineError::NotFound(format!("no session '{id}'")))?;
            if let Some(e) = damage::session_error(&s) {
                tracing::error!(session = id, error = %e, "a report on a session whose stored row does not decode is refused");
                return Err(e);
            }
            caller.check(&s)?;
            let step = match decide(Standing::of(&s), Input::Report(kind)) {
                Decision::Go(step) => step,
                Decision::Ignore => return Ok((None, Vec::new())),
                Decision::Refuse(Refusal::Exited) => {
                    return Err(EngineError::Conflict {
                        code: "exited",
                        message: format!("session {id} has exited"),
                    });
                }
            };
            self.enter(tx, &mut s, &step, "report")?;
            let Some(event) = step.report_event() else {
                // A heartbeat only updates the session.
                tx.put_session(&s)?;
                return Ok((None, Vec::new()));
            };
            if step.does(F::CountTurn) {
                s.turns += 1;
            }
            if step.does(F::KeepMessage)
                && let Some(m) = &message
            {
                s.last_message = Some(m.clone());
            }
            let report = ev::Report {
                session_id: id.to_string(),
                state: s.state.as_str().to_string(),
                turn: s.turns,
                message: message.clone(),
            };
            let said = Event::Session(match event {
                Said::TurnStart => SessionEvent::TurnStart(report),
                Said::TurnEnd => SessionEvent::TurnEnd(report),
                Said::AwaitingInput => SessionEvent::AwaitingInput(report),
                Said::Exited => SessionEvent::Exited(report),
                // `report_event` is never the watchdog's.
                Said::Live | Said::Stale => {
                    return Err(EngineError::Internal(format!(
                        "a report's step named the watchdog's {}",
                        event.as_str()
                    )));
                }
            });
            let cursor = engine.append(tx, &said, Some(id), None)?;
            let event = event.as_str();
            if step.does(F::MarkTurn) {
                s.last_turn_cursor = Some(cursor);
            }
            tx.put_session(&s)?;
            if step.does(F::TellRoutines) {
                routine_actions = engine.runs().routine_report(tx, id, kind, message.as_deref())?;
            }
            if step.does(F::AttachPolicies) {
                engine.settings().attach_session_policies(tx, &s, "turn-start")?;
            }
            // The session's live policies, read once for the three looks
            // below (nothing between them writes a policy).
            let live = if [F::NameJudging, F::NoteUngated, F::EndTurnInPolicies]
                .into_iter()
                .any(|f| step.does(f))
            {
                tx.live_with(id)?
            } else {
                Vec::new()
            };
            // Policies already judging this session (a gate still running
            // from an earlier turn-end) give their verdict next: a caller
            // waiting for verdicts waits for theirs too.
            if step.does(F::NameJudging) {
                counted.extend(
                    live.iter()
                        .filter(|p| {
                            matches!(
                                p.status,
                                PolicyStatus::Queued | PolicyStatus::Gating | PolicyStatus::Nudging
                            )
                        })
                        .map(|p| p.id.clone()),
                );
            }
            if step.does(F::NoteUngated) {
                ungated = self.note_ungated(tx, &s, &live)?;
            }
            let mut queued = Vec::new();
            if step.does(F::EndTurnInPolicies) {
                let watching = live.into_iter().filter(|p| p.status == PolicyStatus::Watching);
                for mut p in watching {
                    if p.damage.is_some() {
                        // Blocked, said; the others gate as ever.
                        engine.policies().settle_damaged(tx, &mut p)?;
                        continue;
                    }
                    if cursor <= p.watch_after {
                        continue;
                    }
                    let before = p.pending.len();
                    p.pending.retain(|m| m != id);
                    if p.pending.len() == before {
                        continue;
                    }
                    let more_pending = !p.pending.is_empty();
                    counted.push(p.id.clone());
                    let step = engine.policies().transition(tx, &mut p, PolicyInput::TurnEnd { more_pending }, |_| {
                        Some(ev::PolicyChange::queued(format!("session {id}: {event}")).into())
                    })?;
                    if let Some(step) = step.filter(|s| s.to == PolicyStatus::Queued) {
                        let slot = engine.policies().try_start_gating(tx, &mut p)?;
                        queued.push((p.id.clone(), step, slot));
                    }
                }
            }
            Ok((Some(cursor), queued))
        })?;
        engine.runs().perform_routine_actions(routine_actions);
        for (pid, step, slot) in queued {
            match slot {
                Some(slot) => engine.policies().schedule_gate_with(&pid, Some(slot)),
                None => engine.policies().perform(&pid, &step),
            }
        }
        Ok(ReportOutcome {
            cursor,
            policies: counted,
            ungated,
        })
    }
}

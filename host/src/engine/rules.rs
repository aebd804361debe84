//! Session policies at work: when a session registers or starts a turn
//! and no policy of it is live (not done, blocked or cancelled), each
//! `[[daemon.session_policies]]` rule and each standing policy
//! (`engine::standing`) that applies to it attaches its policy, in the transaction that records the registration or the
//! turn-start, so a crash never leaves one without the other.
//!
//! A rule's policy is the operator's (it comes from the operator's
//! configuration, or the operator's token added it): it is attached with the operator's trust, whoever
//! registered the session. A policy that does not validate for this
//! session (a gate's cwd missing from its workspace, say) attaches nothing
//! and is said: a `session:policy-refused` event naming the rule's file (or
//! the standing policy's id) and the reason, and an error in the log. This module never reads the
//! workspace beyond what attach validation reads, and never attaches a rule
//! twice to one session while an earlier policy of it is live.

use super::attach::{AttachInput, parse_input, validate};
use super::{EngineResult, services::Settings};
use crate::config::Trust;
use crate::model::event::{Event, PolicyRefused, RefusedOrigin, SessionEvent};
use crate::store::{PolicyRow, SessionRow, Tx};
use std::path::Path;

/// Where a rule comes from: the configuration or a standing policy (named
/// in events and the log).
enum Origin<'a> {
    Config(&'a Path),
    Standing(&'a str),
}

impl Origin<'_> {
    fn said(&self) -> RefusedOrigin {
        match self {
            Origin::Config(file) => RefusedOrigin::File {
                file: file.display().to_string(),
            },
            Origin::Standing(id) => RefusedOrigin::Standing {
                standing_id: (*id).to_string(),
            },
        }
    }
}

impl Settings {
    /// Attaches, in `tx`, the policy of every session rule and every
    /// standing policy that applies to `s`, when no policy with `s` as a
    /// member is live. `why` names the occasion in the log (`registered`,
    /// `turn-start`).
    pub(super) fn attach_session_policies(
        &self,
        tx: &mut Tx<'_>,
        s: &SessionRow,
        why: &str,
    ) -> EngineResult<()> {
        let runner = self.engine().runner();
        let rules = &runner.config().daemon.session_policies;
        let standing = tx.standing_policies()?;
        // Only the operator's own live policies (a standing or session
        // policy, or one attached with the operator token) keep these from
        // attaching: a policy the agent attached, however silent, never
        // switches the operator's off.
        if (rules.is_empty() && standing.is_empty()) || self.operator_watches(&tx.live_with(&s.id)?)
        {
            return Ok(());
        }
        let workspace = Path::new(&s.workspace);
        for rule in rules {
            if rule.applies_to(&s.id, workspace) {
                let parsed = parse_input(rule.policy.clone());
                self.attach_rule(tx, s, parsed, Origin::Config(&rule.file), why)?;
            }
        }
        for t in &standing {
            let applies = super::standing::matches(
                &t.agents,
                &t.under,
                t.label.as_deref(),
                &s.id,
                workspace,
                s.label.as_deref(),
            );
            if !applies {
                continue;
            }
            let policy = match (&t.damage, &t.policy) {
                (None, Some(policy)) => policy,
                (damage, _) => {
                    // Its stored conditions may be wrong: it attaches nothing.
                    let why = damage.as_deref().unwrap_or("its stored policy is missing");
                    self.refuse_rule(tx, s, &Origin::Standing(&t.id), why)?;
                    continue;
                }
            };
            let parsed = Ok(AttachInput::clone(policy));
            self.attach_rule(tx, s, parsed, Origin::Standing(&t.id), why)?;
        }
        Ok(())
    }

    /// Whether one of a session's `live` policies (`Records::live_with`)
    /// is the operator's (attached with the operator token, or as a
    /// standing or session policy). A policy whose stored spec does not
    /// decode is no one's (it is blocked, said, on its next step).
    pub(super) fn operator_watches(&self, live: &[PolicyRow]) -> bool {
        live.iter()
            .any(|p| super::stored::spec(p).is_ok_and(|input| input.attached_by == Trust::Operator))
    }

    fn refuse_rule(
        &self,
        tx: &mut Tx<'_>,
        s: &SessionRow,
        origin: &Origin<'_>,
        reason: &str,
    ) -> EngineResult<()> {
        let origin = origin.said();
        tracing::error!(session = %s.id, from = ?origin, error = %reason, "a session policy was refused");
        let refused = PolicyRefused {
            session_id: s.id.clone(),
            origin,
            reason: reason.to_string(),
        };
        let event = Event::Session(SessionEvent::PolicyRefused(refused));
        self.engine().append(tx, &event, Some(&s.id), None)?;
        Ok(())
    }

    fn attach_rule(
        &self,
        tx: &mut Tx<'_>,
        s: &SessionRow,
        policy: Result<AttachInput, crate::model::Invalid>,
        origin: Origin<'_>,
        why: &str,
    ) -> EngineResult<()> {
        let engine = self.engine();
        let runner = engine.runner();
        let checked = policy
            .map_err(super::EngineError::from)
            .and_then(|mut input| {
                input.session_id = None;
                input.session_ids = Some(vec![s.id.clone()]);
                input.set_attached_by(Trust::Operator);
                validate(&mut input, &runner, &|sid| Ok(tx.session(sid)?))?;
                Ok(input)
            });
        let input = match checked {
            Ok(input) => input,
            Err(e) => return self.refuse_rule(tx, s, &origin, &e.to_string()),
        };
        let p = engine.policies().insert_policy(tx, &input, None)?;
        let from = match origin.said() {
            RefusedOrigin::File { file } => file,
            RefusedOrigin::Standing { standing_id } => standing_id,
        };
        tracing::info!(session = %s.id, policy = %p.id, from = %from, on = why, "a session policy was attached");
        if super::machine::drives(super::machine::Task::Slot, p.status) {
            // Not reached: the session has no turn-end after the
            // newest event. Scheduled after the commit all the same.
            let id = p.id.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                engine.policies().schedule_gate(&id);
            });
        }
        Ok(())
    }
}

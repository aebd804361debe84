//! Session policies at work: when a session registers or starts a turn
//! and no policy of it is live (not done, blocked or cancelled), each
//! `[[daemon.session_policies]]` rule that applies to it attaches its
//! policy, in the transaction that records the registration or the
//! turn-start, so a crash never leaves one without the other.
//!
//! A rule's policy is the operator's (it comes from the operator's
//! configuration): it is attached with the operator's trust, whoever
//! registered the session. A policy that does not validate for this
//! session (a gate's cwd missing from its workspace, say) attaches nothing
//! and is said: a `session:policy-refused` event naming the rule's file and
//! the reason, and an error in the log. This module never reads the
//! workspace beyond what attach validation reads, and never attaches a rule
//! twice to one session while an earlier policy of it is live.

use super::attach::{parse_input, validate};
use super::{Engine, EngineResult};
use crate::config::Trust;
use crate::store::{PolicyStatus, SessionRow, Tx};
use serde_json::json;
use std::path::Path;

impl Engine {
    /// Attaches, in `tx`, the policy of every session rule that applies
    /// to `s`, when no policy with `s` as a member is live. `why` names the
    /// occasion in the log (`registered`, `turn-start`).
    pub(super) fn attach_session_policies(
        &self,
        tx: &mut Tx<'_>,
        s: &SessionRow,
        why: &str,
    ) -> EngineResult<()> {
        let runner = self.runner();
        let rules = &runner.config().daemon.session_policies;
        if rules.is_empty() || !tx.live_with(&s.id)?.is_empty() {
            return Ok(());
        }
        for rule in rules {
            if !rule.applies_to(&s.id, Path::new(&s.workspace)) {
                continue;
            }
            let checked = parse_input(rule.policy.clone()).and_then(|mut input| {
                input.session_id = None;
                input.session_ids = Some(vec![s.id.clone()]);
                input.set_attached_by(Trust::Operator);
                validate(&mut input, &runner, &|sid| Ok(tx.session(sid)?))?;
                Ok(input)
            });
            let input = match checked {
                Ok(input) => input,
                Err(e) => {
                    tracing::error!(session = %s.id, file = %rule.file.display(), error = %e, "a session policy was refused");
                    tx.append_event(
                        "session:policy-refused",
                        Some(&s.id),
                        None,
                        &json!({
                            "sessionId": s.id,
                            "file": rule.file.display().to_string(),
                            "reason": e.to_string(),
                        }),
                        &self.webhooks("session:policy-refused"),
                    )?;
                    continue;
                }
            };
            let p = self.insert_policy(tx, &input, None)?;
            tracing::info!(session = %s.id, policy = %p.id, file = %rule.file.display(), on = why, "a session policy was attached");
            if p.status == PolicyStatus::Queued {
                // Not reached: the session has no turn-end after the
                // newest event. Scheduled after the commit all the same.
                let engine = self.clone();
                let id = p.id.clone();
                tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    engine.schedule_gate(&id);
                });
            }
        }
        Ok(())
    }
}

//! Who may read what: a session's record and messages, its policies (their
//! verdicts, gate outputs and diffs) and its events are the operator's and
//! that session's own. With the agent token, a read needs the key of the
//! session (for a policy: of one of its member sessions), the same
//! [`Caller`] check the writes make; the operator token reads everything.
//!
//! Listings with the agent token: sessions are all listed (an agent finds
//! its own by its working directory) but a session whose key is not
//! presented shows neither its last message nor its webhook; policies
//! are listed only when a member's key is presented; events are read only
//! naming sessions or policies whose keys are presented.
//!
//! It owns these checks; it must never widen them (no read of another
//! session's words with the agent token alone) nor change state.

use super::keys::Caller;
use super::{EngineError, EngineResult, services::Sessions};
use crate::config::Trust;
use crate::store::{EventFilter, PolicyRow, SessionRow};
use std::collections::HashMap;

/// The refusal of a read: whose key it needed.
fn refused(what: String) -> EngineError {
    EngineError::Forbidden {
        code: "session-key-required",
        message: format!(
            "{what}: with the agent token it is read only with the key of that session (the Gatehost-Session-Key header, answered when it was registered); the operator token reads everything"
        ),
    }
}

impl Sessions {
    /// Session `id`, for `caller`.
    pub(crate) fn session_for(&self, id: &str, caller: &Caller) -> EngineResult<SessionRow> {
        let s = self.engine().session(id)?;
        if !caller.covers(&s) {
            tracing::info!(
                session = id,
                "a read of a session without its key is refused"
            );
            return Err(refused(format!("session '{id}' (its record and messages)")));
        }
        Ok(s)
    }

    /// Whether `caller` may read policy `p`: the operator; the agent token
    /// with the key of one of its member sessions. `seen` caches the
    /// sessions looked up (a listing reads many policies).
    fn covers_policy(
        &self,
        p: &PolicyRow,
        caller: &Caller,
        seen: &mut HashMap<String, bool>,
    ) -> EngineResult<bool> {
        if caller.trust == Trust::Operator {
            return Ok(true);
        }
        for member in &p.sessions {
            let covered = match seen.get(member) {
                Some(c) => *c,
                None => {
                    let c = self
                        .engine()
                        .store()
                        .session(member)?
                        .is_some_and(|s| caller.covers(&s));
                    seen.insert(member.clone(), c);
                    c
                }
            };
            if covered {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Refuses `caller` a read of `p` (its record, verdict, outputs,
    /// diff) without a member's key.
    pub(crate) fn check_policy_read(&self, p: &PolicyRow, caller: &Caller) -> EngineResult<()> {
        if self.covers_policy(p, caller, &mut HashMap::new())? {
            return Ok(());
        }
        tracing::info!(policy = %p.id, "a read of a policy without a member's key is refused");
        Err(refused(format!(
            "policy '{}' watches session(s) {} (its verdict, outputs and diff)",
            p.id,
            p.sessions.join(", ")
        )))
    }

    /// Policy `id`, for `caller`.
    pub(crate) fn policy_for(&self, id: &str, caller: &Caller) -> EngineResult<PolicyRow> {
        let p = self.engine().policy(id)?;
        self.check_policy_read(&p, caller)?;
        Ok(p)
    }

    /// The policies of a listing `caller` may read.
    pub(crate) fn readable_policies(
        &self,
        list: Vec<PolicyRow>,
        caller: &Caller,
    ) -> EngineResult<Vec<PolicyRow>> {
        if caller.trust == Trust::Operator {
            return Ok(list);
        }
        let mut seen = HashMap::new();
        let mut out = Vec::with_capacity(list.len());
        for p in list {
            if self.covers_policy(&p, caller, &mut seen)? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// A listing's session as `caller` sees it: without its last message
    /// and webhook unless `caller` holds its key.
    pub(crate) fn listed_session(&self, mut s: SessionRow, caller: &Caller) -> SessionRow {
        if !caller.covers(&s) {
            s.last_message = None;
            s.notify_url = None;
        }
        s
    }

    /// The event filter `caller` reads with (the operator: `f` as is).
    /// With the agent token: every session and policy it names needs a
    /// key presented; naming none reads the events of the sessions whose
    /// keys are presented (and of their policies), and with none of those
    /// it is refused.
    pub(crate) fn check_event_read(
        &self,
        f: &mut EventFilter,
        caller: &Caller,
    ) -> EngineResult<()> {
        if caller.trust == Trust::Operator {
            return Ok(());
        }
        if f.session_ids.is_empty() && f.policy_ids.is_empty() {
            f.session_ids = self.engine().store().sessions_keyed(&caller.digests())?;
            if f.session_ids.is_empty() {
                return Err(EngineError::Forbidden {
                    code: "session-key-required",
                    message: "with the agent token, events are read only for the sessions whose keys are presented (the Gatehost-Session-Key header), and none is; the operator token reads every event".into(),
                });
            }
            return Ok(());
        }
        for id in &f.session_ids {
            self.session_for(id, caller)?;
        }
        for id in &f.policy_ids {
            self.policy_for(id, caller)?;
        }
        Ok(())
    }
}

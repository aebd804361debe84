//! Session keys: the per-session credential.
//!
//! Every session gets a key of its own when it is registered (or started):
//! a random secret answered once, to whoever registered it, and stored
//! only as its SHA-256 digest. With the agent token, only a caller that
//! presents a session's key may register it again, report on it, or attach
//! a policy to it (and so nudge it), or read its messages, its policies,
//! their diffs and outputs and its events (`reads`); the operator token
//! needs none. So one
//! agent holding the shared agent token cannot forge another's turn-end,
//! put words on its stdin or re-point its workspace.
//!
//! It owns making, digesting and checking keys; it must never store or
//! log a key itself, only its digest.

use super::{EngineError, EngineResult};
use crate::config::Trust;
use crate::session_key;
use crate::store::SessionRow;

/// Who makes a request: the token's trust and the session keys presented
/// with it (`Gatehost-Session-Key`, comma-separated).
#[derive(Debug, Clone)]
pub struct Caller {
    pub trust: Trust,
    keys: Vec<String>,
}

impl Caller {
    pub fn new(trust: Trust, keys: Vec<String>) -> Caller {
        Caller { trust, keys }
    }

    /// The operator, or the daemon acting for it (a session it follows).
    pub fn operator() -> Caller {
        Caller::new(Trust::Operator, Vec::new())
    }

    /// The agent token with these keys.
    pub fn agent(keys: Vec<String>) -> Caller {
        Caller::new(Trust::Agent, keys)
    }

    /// Whether this caller may act on `session`: the operator always; the
    /// agent token only with the session's key. A session stored before
    /// keys existed (no digest) is the operator's alone until it is
    /// registered again (see [`Caller::may_claim`]).
    pub fn check(&self, session: &SessionRow) -> EngineResult<()> {
        if self.trust == Trust::Operator {
            return Ok(());
        }
        let Some(want) = &session.key_digest else {
            return Err(EngineError::Forbidden {
                code: "session-key-required",
                message: format!(
                    "session '{}' has no key yet (registered before session keys): register it again to get one",
                    session.id
                ),
            });
        };
        if self.keys.iter().any(|k| same(&digest(k), want)) {
            return Ok(());
        }
        Err(EngineError::Forbidden {
            code: "session-key-required",
            message: format!(
                "session '{}' may be acted on with the agent token only with its key (the Gatehost-Session-Key header, answered when it was registered); the operator token needs none",
                session.id
            ),
        })
    }

    /// The digests of the keys presented (what the store keeps).
    pub fn digests(&self) -> Vec<String> {
        self.keys.iter().map(|k| digest(k)).collect()
    }

    /// Whether this caller may read `session` (see `reads`): as
    /// [`Caller::check`], without the error.
    pub fn covers(&self, session: &SessionRow) -> bool {
        self.check(session).is_ok()
    }

    /// Whether re-registering `session` may issue it a key: a session
    /// stored before keys existed, registered again by the agent token.
    pub fn may_claim(&self, session: &SessionRow) -> bool {
        self.trust == Trust::Agent && session.key_digest.is_none()
    }
}

/// A fresh key (`crate::session_key`'s form) and its digest.
pub fn issue() -> (String, String) {
    let key = session_key::new();
    let d = digest(&key);
    (key, d)
}

/// A key the caller made (see `RegisterInput::session_key`): one of the
/// form [`issue`] makes (`gsk_` and 64 lowercase hex digits, as random as
/// ours when made by `issue`), with its digest; anything else is refused.
pub fn proposed(key: &str) -> EngineResult<(String, String)> {
    if !session_key::well_formed(key) {
        return Err(EngineError::Invalid {
            field: "sessionKey".into(),
            message: "a session key is gsk_ and 64 lowercase hex digits (as gatehost makes them)"
                .into(),
        });
    }
    Ok((key.to_string(), digest(key)))
}

pub use crate::session_key::digest;

/// Equal in time independent of where the digests differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposed_key_is_taken_only_in_the_form_gatehost_makes() {
        let (made, _) = issue();
        let (k, d) = proposed(&made).expect("ours");
        assert_eq!((k.as_str(), d), (made.as_str(), digest(&made)));
        for bad in [
            "",
            "gsk_",
            "gsk_short",
            &made.to_uppercase(),
            &format!("{made}0"),
            &made.replace("gsk_", "key_"),
            &format!("gsk_{}", "g".repeat(64)),
        ] {
            assert!(proposed(bad).is_err(), "{bad}");
        }
    }
    fn session(key_digest: Option<String>) -> SessionRow {
        SessionRow {
            key_digest,
            ..SessionRow::sample("s1")
        }
    }

    #[test]
    fn only_the_sessions_own_key_or_the_operator_may_act_on_it() {
        let (key, d) = issue();
        let (other, _) = issue();
        let s = session(Some(d));
        assert!(Caller::operator().check(&s).is_ok());
        assert!(Caller::agent(vec![key.clone()]).check(&s).is_ok());
        assert!(Caller::agent(vec![other.clone(), key]).check(&s).is_ok());
        for keys in [vec![], vec![other], vec![String::new()]] {
            let e = Caller::agent(keys).check(&s).unwrap_err();
            assert!(matches!(
                e,
                EngineError::Forbidden {
                    code: "session-key-required",
                    ..
                }
            ));
        }
    }

    #[test]
    fn a_session_without_a_key_is_the_operators_until_claimed() {
        let s = session(None);
        assert!(Caller::operator().check(&s).is_ok());
        assert!(Caller::agent(vec!["gsk_x".into()]).check(&s).is_err());
        assert!(Caller::agent(Vec::new()).may_claim(&s));
        assert!(!Caller::operator().may_claim(&s));
        assert!(!Caller::agent(Vec::new()).may_claim(&session(Some(issue().1))));
    }

    #[test]
    fn keys_are_fresh_and_stored_only_as_digests() {
        let (a, da) = issue();
        let (b, _) = issue();
        assert_ne!(a, b);
        assert!(a.starts_with("gsk_") && a.len() == 68, "{a}");
        assert_eq!(da, digest(&a));
        assert!(!da.contains(&a[4..]));
    }
}

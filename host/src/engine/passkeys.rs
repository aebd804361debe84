//! The operator's passkeys as the engine keeps them: registered, used,
//! removed, each stored with its event (`passkey:registered`,
//! `passkey:removed`) in one transaction, and what an approval must be
//! bound to. It never verifies a ceremony (`crate::passkey` does, and
//! hands over a [`Proof`] or a [`NewPasskey`]), but it holds the rule of
//! who may add one where the passkey is stored, in the same transaction:
//! the first needs the enrolment code, every later one an assertion of a
//! passkey still registered.

use super::{EngineError, EngineResult, services::Settings, stored};
use crate::config::AckRequires;
use crate::model::event::{Event, Passkey, PasskeyEvent};
use crate::passkey::{Authority, NewPasskey, Proof, Purpose, Registered};
use crate::store::{PasskeyRow, PolicyRow, now_ms};

/// What an approval of `p` is bound to: its snapshot's tree, or, for a
/// policy gated on the workspace itself, the fingerprint of what its gate
/// judged (`fingerprint:<hex>`).
pub fn approval_subject(p: &PolicyRow) -> EngineResult<String> {
    let plan = stored::plan_required(p)?;
    Ok(match &plan.snapshot {
        Some(s) => s.tree.clone(),
        None => format!("fingerprint:{}", plan.fingerprint),
    })
}

fn forbidden(code: &'static str, message: impl Into<String>) -> EngineError {
    EngineError::Forbidden {
        code,
        message: message.into(),
    }
}

impl Settings {
    /// What approving takes now (`[daemon] ack_requires`, reloadable).
    pub(crate) fn ack_requires(&self) -> AckRequires {
        self.engine().runner().config().daemon.ack_requires
    }

    /// Every registered passkey, oldest first (a damaged one included,
    /// with why).
    pub(crate) fn passkeys(&self) -> EngineResult<Vec<PasskeyRow>> {
        Ok(self.engine().store().passkeys()?)
    }

    /// The passkeys a ceremony may use: the registered ones whose stored
    /// credential decodes (a damaged one is logged, and proves nothing).
    pub(crate) fn usable_passkeys(&self) -> EngineResult<Vec<Registered>> {
        let mut out = Vec::new();
        for row in self.passkeys()? {
            match row.passkey {
                Ok(passkey) => out.push(Registered {
                    id: row.id,
                    name: row.name,
                    passkey,
                }),
                Err(why) => {
                    tracing::error!(passkey = %row.id, %why, "a stored passkey cannot be used");
                }
            }
        }
        Ok(out)
    }

    /// The operator's WebAuthn user id (made at the first registration).
    pub(crate) fn passkey_user(&self) -> EngineResult<uuid::Uuid> {
        self.engine().write(|tx| Ok(tx.passkey_user()?))
    }

    /// Stores a passkey a registration made, with its event; a credential
    /// registered already is refused, and so is one whose registration was
    /// begun on what no longer allows it (checked in the transaction that
    /// stores it): on the enrolment code once any passkey is registered,
    /// on an assertion of a passkey no longer registered.
    pub(crate) fn add_passkey(&self, new: &NewPasskey) -> EngineResult<()> {
        let e = self.engine();
        e.write(|tx| {
            let registered = tx.passkeys()?;
            match &new.authority {
                Authority::EnrolCode(_) if !registered.is_empty() => {
                    tracing::warn!(passkey = %new.id, name = %new.name, "a registration begun on the enrolment code was refused: a passkey is registered already");
                    return Err(forbidden(
                        "passkey-required",
                        "a passkey is registered already: this registration was begun before it was, on the enrolment code, and adding another now needs an assertion of a registered passkey",
                    ));
                }
                Authority::EnrolCode(_) => {}
                Authority::Passkey { id } => {
                    if !registered.iter().any(|r| &r.id == id && r.passkey.is_ok()) {
                        tracing::warn!(passkey = %new.id, by = %id, "a registration was refused: the passkey whose assertion allowed it is no longer registered");
                        return Err(forbidden(
                            "passkey-required",
                            format!("the passkey {id} whose assertion allowed this registration is no longer registered"),
                        ));
                    }
                }
            }
            if !tx.insert_passkey(&new.id, &new.name, &new.passkey, now_ms())? {
                return Err(EngineError::Conflict {
                    code: "passkey-registered",
                    message: "this passkey is registered already".into(),
                });
            }
            let said = Passkey {
                passkey_id: new.id.clone(),
                name: new.name.clone(),
                by: new.by.clone(),
            };
            e.append(tx, &Event::Passkey(PasskeyEvent::Registered(said)), None, None)?;
            Ok(())
        })?;
        tracing::warn!(passkey = %new.id, name = %new.name, "a passkey was registered: it can approve changes");
        Ok(())
    }

    /// Records a proof's use: the passkey's new counter, and when.
    pub(crate) fn passkey_used(&self, proof: &Proof) -> EngineResult<()> {
        let Some(updated) = proof.updated() else {
            return Ok(());
        };
        self.engine()
            .write(|tx| Ok(tx.passkey_used(proof.passkey_id(), updated, now_ms())?))?;
        Ok(())
    }

    /// Gives passkey `id` another name (the operator's, `by`): no
    /// assertion (a name grants nothing), but an event says it.
    pub(crate) fn rename_passkey(
        &self,
        id: &str,
        name: &str,
        by: &str,
    ) -> EngineResult<PasskeyRow> {
        let engine = self.engine();
        let name = crate::passkey::checked_name(name).map_err(|e| EngineError::Invalid {
            field: "name".into(),
            message: e.to_string(),
        })?;
        let row = engine.write(|tx| {
            let Some(mut row) = tx.passkeys()?.into_iter().find(|r| r.id == id) else {
                return Err(EngineError::NotFound(format!("no passkey '{id}'")));
            };
            tx.rename_passkey(id, name)?;
            row.name = name.to_string();
            let said = Passkey {
                passkey_id: id.to_string(),
                name: name.to_string(),
                by: by.to_string(),
            };
            engine.append(tx, &Event::Passkey(PasskeyEvent::Renamed(said)), None, None)?;
            Ok(row)
        })?;
        tracing::info!(passkey = %id, "a passkey was renamed");
        Ok(row)
    }

    /// Removes passkey `id`, proved by a passkey's assertion for exactly
    /// that; the last one is kept while approvals need a passkey (set
    /// `ack_requires = "token"` first).
    pub(crate) fn remove_passkey(&self, id: &str, proof: &Proof) -> EngineResult<PasskeyRow> {
        let engine = self.engine();
        proof
            .require(&Purpose::RemovePasskey { id: id.to_string() })
            .map_err(|e| forbidden("passkey-mismatch", e.to_string()))?;
        let requires = self.ack_requires();
        let by = proof.by();
        let row = engine.write(|tx| {
            let all = tx.passkeys()?;
            let Some(row) = all.iter().find(|r| r.id == id).cloned() else {
                return Err(EngineError::NotFound(format!("no passkey '{id}'")));
            };
            if all.len() == 1 && requires == AckRequires::Passkey {
                return Err(EngineError::Conflict {
                    code: "last-passkey",
                    message: "the last passkey cannot be removed while approvals need one: set [daemon] ack_requires = \"token\" first".into(),
                });
            }
            tx.remove_passkey(id)?;
            let said = Passkey {
                passkey_id: id.to_string(),
                name: row.name.clone(),
                by: by.clone(),
            };
            engine.append(tx, &Event::Passkey(PasskeyEvent::Removed(said)), None, None)?;
            Ok(row)
        })?;
        tracing::warn!(passkey = %id, "a passkey was removed");
        Ok(row)
    }

    /// Whether an approval of `p` (given for `tree`) may go ahead on this
    /// daemon: with `ack_requires = "passkey"`, only with a proof for
    /// approving exactly `p` at its current subject ([`approval_subject`]).
    pub(super) fn check_approver(&self, p: &PolicyRow, proof: Option<&Proof>) -> EngineResult<()> {
        if self.ack_requires() != AckRequires::Passkey {
            return Ok(());
        }
        let Some(proof) = proof else {
            return Err(forbidden(
                "passkey-required",
                format!(
                    "this daemon's approvals need a passkey ([daemon] ack_requires = \"passkey\"): approve policy {} on the page (`gatehost ui` prints a login link); the operator token alone approves nothing",
                    p.id
                ),
            ));
        };
        let wanted = Purpose::Approve {
            policy: p.id.clone(),
            tree: approval_subject(p)?,
        };
        proof
            .require(&wanted)
            .map_err(|e| forbidden("passkey-mismatch", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::passkey::enrol::Checked;

    /// A passkey as a real registration stored it (Chromium's virtual
    /// authenticator, through the page), its credential id `ID`.
    const STORED: &str = r#"{"cred":{"cred_id":"ID","cred":{"type_":"ES256","key":{"EC_EC2":{"curve":"SECP256R1","x":"gCpwFMRKNpciyKZXzQM4H3SrsyKMfhRQQu7GH3M4b9Q","y":"y8jJ8C_FUtM0_kTBw9BsVySVaWAUHrVNwLl8lVW7mc0"}}},"counter":4,"transports":null,"user_verified":true,"backup_eligible":false,"backup_state":false,"registration_policy":"required","extensions":{"cred_protect":"Ignored","hmac_create_secret":"NotRequested","appid":"NotRequested","cred_props":{"Unsigned":{"rk":null}}},"attestation":{"data":"None","metadata":"None"},"attestation_format":"none"}}"#;

    fn new(id: &str, authority: Authority) -> NewPasskey {
        NewPasskey {
            id: id.to_string(),
            name: format!("key {id}"),
            passkey: serde_json::from_str(&STORED.replace("\"ID\"", &format!("\"{id}\"")))
                .expect("a stored passkey"),
            by: "the test".into(),
            authority,
        }
    }

    fn refused(e: EngineResult<()>) -> String {
        match e {
            Err(EngineError::Forbidden { code, message }) => {
                assert_eq!(code, "passkey-required");
                message
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    /// The rule is the store transaction's, whatever the ceremony was
    /// begun on: a registration begun on the code while none existed and
    /// finished after one was stored adds nothing, nor does one begun on
    /// the assertion of a passkey removed since.
    #[test]
    fn the_transaction_that_stores_a_passkey_holds_the_rule_of_who_may_add_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(dir.path()).expect("store");
        let engine = Engine::new(
            store,
            crate::gate::GateRunner::new(crate::config::HostConfig::default()),
        )
        .expect("engine");
        let code = || Authority::EnrolCode(Checked::for_tests("ABCDE"));
        let begun_early = new("BBBBBBBB", code());
        engine
            .settings()
            .add_passkey(&new("AAAAAAAA", code()))
            .expect("the first, on the code");
        let why = refused(engine.settings().add_passkey(&begun_early));
        assert!(why.contains("registered already"), "{why}");
        engine
            .settings()
            .add_passkey(&new(
                "CCCCCCCC",
                Authority::Passkey {
                    id: "AAAAAAAA".into(),
                },
            ))
            .expect("a second, on the first's assertion");
        let why = refused(engine.settings().add_passkey(&new(
            "DDDDDDDD",
            Authority::Passkey {
                id: "ZZZZZZZZ".into(),
            },
        )));
        assert!(why.contains("no longer registered"), "{why}");
        let ids: Vec<String> = engine
            .settings()
            .passkeys()
            .expect("passkeys")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, ["AAAAAAAA", "CCCCCCCC"]);
    }
}

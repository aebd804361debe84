//! The operator's passkeys (WebAuthn, through webauthn-rs): the relying
//! party of the page's origin, the ceremonies in flight and the proof an
//! assertion gives. With `[daemon] ack_requires = "passkey"` an approval
//! needs a [`Proof`] for exactly that policy and snapshot tree, which only
//! [`Passkeys::finish_assertion`] makes: a fresh assertion, user verified
//! (webauthn-rs' passkeys require it), from a registered passkey, answering
//! a challenge this daemon made for that purpose.
//!
//! webauthn-rs makes each challenge itself (random); what the challenge is
//! for is kept here beside its state, under a random ceremony id, with the
//! login that began it (the bearer token, or one page login): one use
//! (spent whatever the answer), answerable by that login only,
//! [`CEREMONY_TTL`], at most [`MAX_PER_LOGIN`] in flight per login (its
//! own oldest is dropped past it, never another login's) and
//! [`MAX_PENDING`] in all (past it a new one is refused). A proof for one
//! purpose is refused for any other.
//!
//! A registration is begun on an [`Authority`]: the enrolment code
//! ([`enrol`]) for the first passkey, a registered passkey's assertion for
//! every later one. The rule is checked again where the passkey is stored
//! (the engine's `add_passkey`, in the store's transaction), and the
//! ceremonies begun on a code die when a passkey is stored.
//!
//! It owns the verification and the ceremonies (in memory: a restart drops
//! them); it must never store a passkey or change a policy itself (the
//! engine does both, given what this returns), and never accept an
//! assertion without user verification.

pub mod enrol;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, RequestChallengeResponse, Url, Uuid,
    Webauthn, WebauthnBuilder,
};

/// How long a ceremony can be answered.
pub const CEREMONY_TTL: Duration = Duration::from_secs(120);
/// The most ceremonies one login has in flight (its oldest is dropped
/// past it).
pub const MAX_PER_LOGIN: usize = 16;
/// The most ceremonies in flight in all (past it a new one is refused:
/// no login's ceremony is dropped for another's).
pub const MAX_PENDING: usize = 1024;
/// The longest name a passkey may have.
pub const MAX_NAME: usize = 64;

/// What an assertion is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// Approving `policy` as gated on the snapshot whose tree is `tree`.
    Approve { policy: String, tree: String },
    /// Registering one more passkey (once one is registered, only a
    /// passkey adds another).
    AddPasskey,
    /// Removing the passkey `id`.
    RemovePasskey { id: String },
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Purpose::Approve { policy, tree } => {
                write!(f, "approving policy {policy} at tree {tree}")
            }
            Purpose::AddPasskey => f.write_str("adding a passkey"),
            Purpose::RemovePasskey { id } => write!(f, "removing passkey {id}"),
        }
    }
}

/// Why a ceremony failed; each a line for a person.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyError {
    #[error(
        "passkeys cannot be used at {origin}: {why} (open the page at http://localhost:PORT, or set [daemon] public_url to an address with a domain name)"
    )]
    Unavailable { origin: String, why: String },
    #[error("no passkey is registered: register one on the page first")]
    NoneRegistered,
    #[error(
        "this ceremony is unknown, already used or expired (each lasts {} s): start again",
        CEREMONY_TTL.as_secs()
    )]
    UnknownCeremony,
    #[error("this ceremony was for {made}, not for {wanted}")]
    WrongPurpose { made: String, wanted: String },
    #[error(
        "a passkey is registered already: adding another needs an assertion of a registered one"
    )]
    NeedsAssertion,
    #[error("the passkey's answer was not accepted: {0}")]
    Rejected(String),
    #[error("the name: {0}")]
    BadName(String),
    #[error(
        "too many passkey ceremonies are in flight ({MAX_PENDING}): try again within {} s",
        CEREMONY_TTL.as_secs()
    )]
    Busy,
    #[error(transparent)]
    Enrol(#[from] enrol::EnrolError),
}

/// What a verified assertion proves: that a person holding the registered
/// passkey `passkey_id`, verified by it, answered a challenge made for
/// `purpose`. Made only by [`Passkeys::finish_assertion`].
#[derive(Debug, Clone)]
pub struct Proof {
    passkey_id: String,
    name: String,
    purpose: Purpose,
    /// The passkey's new state (its counter), to be stored.
    updated: Option<Passkey>,
}

/// An approval proved by a passkey on another host of the cluster, as that
/// host sends it to the host owning the policy (`engine::forward`): the
/// assertion was verified there, and the passkey's use recorded in the
/// cluster's store. Trusted because it came through that store, which only
/// the cluster's hosts write.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardedApproval {
    passkey_id: String,
    name: String,
    policy: String,
    tree: String,
}

impl Proof {
    /// This proof as another host receives it: an approval only.
    pub fn forwarded(&self) -> Option<ForwardedApproval> {
        match &self.purpose {
            Purpose::Approve { policy, tree } => Some(ForwardedApproval {
                passkey_id: self.passkey_id.clone(),
                name: self.name.clone(),
                policy: policy.clone(),
                tree: tree.clone(),
            }),
            _ => None,
        }
    }

    /// The proof of an approval verified on the host that sent `f` (its
    /// passkey's use is recorded already).
    pub fn from_forwarded(f: ForwardedApproval) -> Proof {
        Proof {
            passkey_id: f.passkey_id,
            name: f.name,
            purpose: Purpose::Approve {
                policy: f.policy,
                tree: f.tree,
            },
            updated: None,
        }
    }

    pub fn purpose(&self) -> &Purpose {
        &self.purpose
    }

    pub fn passkey_id(&self) -> &str {
        &self.passkey_id
    }

    /// Who acted, for events and logs.
    pub fn by(&self) -> String {
        format!("the operator (passkey '{}')", self.name)
    }

    /// The passkey's new counter and flags, when the assertion changed
    /// them: to be stored with the use.
    pub fn updated(&self) -> Option<&Passkey> {
        self.updated.as_ref()
    }

    /// Refuses this proof for anything but `wanted`.
    pub fn require(&self, wanted: &Purpose) -> Result<(), PasskeyError> {
        if &self.purpose == wanted {
            Ok(())
        } else {
            Err(PasskeyError::WrongPurpose {
                made: self.purpose.to_string(),
                wanted: wanted.to_string(),
            })
        }
    }
}

/// A registered passkey, as the ceremonies need it.
#[derive(Debug, Clone)]
pub struct Registered {
    pub id: String,
    pub name: String,
    pub passkey: Passkey,
}

/// What a registration was begun on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authority {
    /// The enrolment code (the first passkey only).
    EnrolCode(enrol::Checked),
    /// An assertion of the registered passkey `id` for adding one.
    Passkey { id: String },
}

/// What a registration is begun on, as its caller has it.
pub enum Grant<'a> {
    /// An enrolment code, checked against its file.
    Code(enrol::Checked),
    /// A registered passkey's assertion.
    Proof(&'a Proof),
}

/// A passkey a registration made, to be stored.
#[derive(Debug, Clone)]
pub struct NewPasskey {
    pub id: String,
    pub name: String,
    pub passkey: Passkey,
    /// Who registered it: the page's login with the enrolment code for the
    /// first, else the passkey whose assertion allowed it.
    pub by: String,
    /// What the registration was begun on: checked again where it is
    /// stored.
    pub authority: Authority,
}

enum State {
    Register {
        reg: PasskeyRegistration,
        name: String,
        by: String,
        authority: Authority,
    },
    Assert {
        auth: PasskeyAuthentication,
        purpose: Purpose,
        /// The passkeys the challenge allowed, by credential id.
        allowed: HashMap<String, Registered>,
    },
}

struct Pending {
    state: State,
    expires: Instant,
    /// The login that began it (see [`Passkeys::begin_assertion`]).
    login: String,
}

/// The relying party and its ceremonies in flight. Cheap to clone.
#[derive(Clone)]
pub struct Passkeys {
    inner: Arc<Inner>,
}

struct Inner {
    rp: Result<Webauthn, String>,
    origin: String,
    rp_id: String,
    pending: Mutex<HashMap<String, Pending>>,
    /// Where the enrolment code's file is (the data directory); without
    /// one, no code is ever accepted.
    enrol_dir: Option<std::path::PathBuf>,
}

/// A passkey's name as kept: trimmed, 1 to [`MAX_NAME`] bytes, no control
/// characters.
pub fn checked_name(name: &str) -> Result<&str, PasskeyError> {
    let name = name.trim();
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(PasskeyError::BadName(format!(
            "1 to {MAX_NAME} bytes, no control characters"
        )));
    }
    Ok(name)
}

/// The credential id of `p`, as the page and the store name it.
pub fn credential_id(p: &Passkey) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(p.cred_id().as_slice())
}

impl Passkeys {
    /// The relying party of `origin` (the page's: `http://localhost:PORT`,
    /// or `[daemon] public_url`): its RP ID is the origin's domain, and an
    /// assertion from any other origin (another port included) is refused.
    /// An origin with no domain name (an IP address: browsers refuse
    /// WebAuthn there) makes a relying party that refuses every ceremony,
    /// saying why.
    pub fn new(origin: &str) -> Passkeys {
        Passkeys::with_enrolment(origin, None)
    }

    /// As [`Passkeys::new`], with the enrolment code's file in `data_dir`
    /// (see [`enrol`]).
    pub fn with_enrolment(origin: &str, data_dir: Option<&std::path::Path>) -> Passkeys {
        let parsed = Url::parse(origin).map_err(|e| e.to_string());
        let rp_id = parsed
            .as_ref()
            .ok()
            .and_then(|u| u.domain().map(str::to_string))
            .unwrap_or_default();
        let rp = parsed.and_then(|url| {
            if rp_id.is_empty() {
                return Err("an IP address cannot be a WebAuthn relying party".to_string());
            }
            WebauthnBuilder::new(&rp_id, &url)
                .and_then(|b| b.rp_name("gatehost").build())
                .map_err(|e| e.to_string())
        });
        Passkeys {
            inner: Arc::new(Inner {
                rp,
                origin: origin.trim_end_matches('/').to_string(),
                rp_id,
                pending: Mutex::new(HashMap::new()),
                enrol_dir: data_dir.map(std::path::Path::to_path_buf),
            }),
        }
    }

    /// The page's origin.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// The RP ID (the origin's domain), empty when it has none.
    pub fn rp_id(&self) -> &str {
        &self.inner.rp_id
    }

    /// Checks an enrolment code against its file.
    pub fn check_code(&self, code: &str) -> Result<enrol::Checked, PasskeyError> {
        match &self.inner.enrol_dir {
            Some(dir) => Ok(enrol::check(dir, code)?),
            None => Err(enrol::EnrolError::Refused.into()),
        }
    }

    /// Whether `checked` is still the code in force.
    pub fn code_still(&self, checked: &enrol::Checked) -> bool {
        self.inner
            .enrol_dir
            .as_deref()
            .is_some_and(|dir| enrol::still(dir, checked))
    }

    /// Spends the code in force (the first passkey is stored).
    pub fn spend_code(&self) {
        if let Some(dir) = &self.inner.enrol_dir {
            enrol::spend(dir);
        }
    }

    /// Why no ceremony can run here, if none can.
    pub fn unavailable(&self) -> Option<&str> {
        self.inner.rp.as_ref().err().map(String::as_str)
    }

    fn rp(&self) -> Result<&Webauthn, PasskeyError> {
        self.inner
            .rp
            .as_ref()
            .map_err(|why| PasskeyError::Unavailable {
                origin: self.inner.origin.clone(),
                why: why.clone(),
            })
    }

    /// Holds `state` for `login`: past [`MAX_PER_LOGIN`] that login's own
    /// oldest is dropped; past [`MAX_PENDING`] in all, refused.
    fn hold(&self, login: &str, state: State) -> Result<String, PasskeyError> {
        let id = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
        let mut map = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, p| p.expires > now);
        let mine = map.values().filter(|p| p.login == login).count();
        if mine >= MAX_PER_LOGIN {
            if let Some(oldest) = map
                .iter()
                .filter(|(_, p)| p.login == login)
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        } else if map.len() >= MAX_PENDING {
            tracing::warn!(
                pending = map.len(),
                "a passkey ceremony was refused: too many in flight"
            );
            return Err(PasskeyError::Busy);
        }
        map.insert(
            id.clone(),
            Pending {
                state,
                expires: now + CEREMONY_TTL,
                login: login.to_string(),
            },
        );
        Ok(id)
    }

    /// Takes ceremony `id` of `login` out (spent, whatever comes next);
    /// unknown, expired or another login's is refused (and another
    /// login's is left alone).
    fn take(&self, login: &str, id: &str) -> Result<State, PasskeyError> {
        let mut map = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(id).is_some_and(|p| p.login != login) {
            return Err(PasskeyError::UnknownCeremony);
        }
        match map.remove(id) {
            Some(p) if p.expires > Instant::now() => Ok(p.state),
            _ => Err(PasskeyError::UnknownCeremony),
        }
    }

    /// Drops every registration begun on an enrolment code: called once
    /// a passkey is stored, when no code registers anything any more.
    /// Returns how many.
    pub fn drop_unproven(&self) -> usize {
        let mut map = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        let before = map.len();
        map.retain(|_, p| {
            !matches!(
                p.state,
                State::Register {
                    authority: Authority::EnrolCode(_),
                    ..
                }
            )
        });
        before - map.len()
    }

    /// A challenge for `purpose`, answerable by any of `registered`, held
    /// for `login` (who asks: `bearer`, or a page login's digest): the
    /// ceremony's id and the options for `navigator.credentials.get`.
    pub fn begin_assertion(
        &self,
        login: &str,
        purpose: Purpose,
        registered: &[Registered],
    ) -> Result<(String, RequestChallengeResponse), PasskeyError> {
        let rp = self.rp()?;
        if registered.is_empty() {
            return Err(PasskeyError::NoneRegistered);
        }
        let keys: Vec<Passkey> = registered.iter().map(|r| r.passkey.clone()).collect();
        let (options, auth) = rp
            .start_passkey_authentication(&keys)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let allowed = registered
            .iter()
            .map(|r| (r.id.clone(), r.clone()))
            .collect();
        let id = self.hold(
            login,
            State::Assert {
                auth,
                purpose,
                allowed,
            },
        )?;
        Ok((id, options))
    }

    /// Verifies the answer to ceremony `id` for `wanted`: the proof, or
    /// why not (the ceremony is spent either way).
    pub fn finish_assertion(
        &self,
        login: &str,
        id: &str,
        wanted: &Purpose,
        answer: &PublicKeyCredential,
    ) -> Result<Proof, PasskeyError> {
        let rp = self.rp()?;
        let State::Assert {
            auth,
            purpose,
            allowed,
        } = self.take(login, id)?
        else {
            return Err(PasskeyError::UnknownCeremony);
        };
        if &purpose != wanted {
            return Err(PasskeyError::WrongPurpose {
                made: purpose.to_string(),
                wanted: wanted.to_string(),
            });
        }
        let result = rp
            .finish_passkey_authentication(answer, &auth)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        // webauthn-rs refuses an assertion without user verification for
        // passkeys; checked again here, since this is what the proof means.
        if !result.user_verified() {
            return Err(PasskeyError::Rejected(
                "the authenticator did not verify the user".into(),
            ));
        }
        use base64::Engine as _;
        let passkey_id =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(result.cred_id().as_slice());
        let Some(used) = allowed.get(&passkey_id) else {
            return Err(PasskeyError::Rejected("an unregistered credential".into()));
        };
        let mut passkey = used.passkey.clone();
        let updated = passkey
            .update_credential(&result)
            .is_some_and(|changed| changed);
        Ok(Proof {
            passkey_id,
            name: used.name.clone(),
            purpose,
            updated: updated.then_some(passkey),
        })
    }

    /// A registration ceremony of `login` for a passkey named `name`, for
    /// the operator `user`: the ceremony's id and the options for
    /// `navigator.credentials.create`. With none registered, `grant` must
    /// be the enrolment code; once one is, a registered one's assertion
    /// for [`Purpose::AddPasskey`].
    pub fn begin_registration(
        &self,
        login: &str,
        user: Uuid,
        name: &str,
        registered: &[Registered],
        grant: Option<Grant<'_>>,
    ) -> Result<(String, CreationChallengeResponse), PasskeyError> {
        let rp = self.rp()?;
        let name = checked_name(name)?;
        let (authority, by) = match (registered.is_empty(), grant) {
            (true, Some(Grant::Code(checked))) => (
                Authority::EnrolCode(checked),
                "the operator (the page's login, with the enrolment code)".to_string(),
            ),
            (true, _) => return Err(enrol::EnrolError::Missing.into()),
            (false, Some(Grant::Proof(p))) => {
                p.require(&Purpose::AddPasskey)?;
                (
                    Authority::Passkey {
                        id: p.passkey_id().to_string(),
                    },
                    p.by(),
                )
            }
            (false, _) => return Err(PasskeyError::NeedsAssertion),
        };
        let exclude = registered
            .iter()
            .map(|r| r.passkey.cred_id().clone())
            .collect();
        let (options, reg) = rp
            .start_passkey_registration(user, "operator", "gatehost operator", Some(exclude))
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        let id = self.hold(
            login,
            State::Register {
                reg,
                name: name.to_string(),
                by,
                authority,
            },
        )?;
        Ok((id, options))
    }

    /// Verifies the answer to registration ceremony `id` of `login`: the
    /// passkey to store, with what it was begun on.
    pub fn finish_registration(
        &self,
        login: &str,
        id: &str,
        answer: &RegisterPublicKeyCredential,
    ) -> Result<NewPasskey, PasskeyError> {
        let rp = self.rp()?;
        let State::Register {
            reg,
            name,
            by,
            authority,
        } = self.take(login, id)?
        else {
            return Err(PasskeyError::UnknownCeremony);
        };
        let passkey = rp
            .finish_passkey_registration(answer, &reg)
            .map_err(|e| PasskeyError::Rejected(e.to_string()))?;
        Ok(NewPasskey {
            id: credential_id(&passkey),
            name,
            passkey,
            by,
            authority,
        })
    }
}

#[cfg(test)]
mod tests;

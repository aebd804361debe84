//! The passkeys' routes: list, challenge, register (from the page only),
//! remove, and the passkey half of an approval. Registration needs the
//! page's login (a person's browser: the bearer token is refused) and the
//! enrolment code (`gatehost passkey enrol-code`, for the first passkey)
//! or an assertion of a registered one (every later one). Removing takes
//! an assertion for exactly that passkey. Every ceremony is held for the
//! login that began it ([`Login`]). It maps the relying party's and the
//! engine's answers to the wire; it must never store a passkey or change a
//! policy itself.

use super::{ApiError, ApiResult, AppState, JsonBody, Operator, ok};
use crate::engine::passkeys::approval_subject;
use crate::passkey::enrol::EnrolError;
use crate::passkey::{Authority, Grant, PasskeyError, Proof, Purpose};
use crate::store::PolicyStatus;
use crate::wire;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;

impl From<PasskeyError> for ApiError {
    fn from(e: PasskeyError) -> Self {
        let (status, code) = match &e {
            PasskeyError::Unavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "passkeys-unavailable")
            }
            PasskeyError::NoneRegistered => (StatusCode::CONFLICT, "no-passkey"),
            PasskeyError::UnknownCeremony => (StatusCode::CONFLICT, "ceremony-unknown"),
            PasskeyError::WrongPurpose { .. } => (StatusCode::FORBIDDEN, "passkey-mismatch"),
            PasskeyError::NeedsAssertion => (StatusCode::FORBIDDEN, "passkey-required"),
            PasskeyError::Rejected(_) => (StatusCode::FORBIDDEN, "passkey-rejected"),
            PasskeyError::BadName(_) => return ApiError::bad_request("name", e.to_string()),
            PasskeyError::Busy => (StatusCode::TOO_MANY_REQUESTS, "passkeys-busy"),
            PasskeyError::Enrol(EnrolError::Missing) => {
                (StatusCode::FORBIDDEN, "enrol-code-required")
            }
            PasskeyError::Enrol(EnrolError::Refused) => {
                (StatusCode::FORBIDDEN, "enrol-code-refused")
            }
            PasskeyError::Enrol(EnrolError::Write { .. }) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
        };
        tracing::warn!(code, error = %e, "a passkey ceremony was refused");
        ApiError::new(status, code, e.to_string())
    }
}

/// The operator through the page's login only (its cookie with the CSRF
/// token, and the page's origin on writes): a bearer token is refused.
pub(super) struct PageOperator;

impl FromRequestParts<AppState> for PageOperator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        let page_only = || {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "page-only",
                "passkeys are registered on the page, in a person's browser, not with a token",
            )
        };
        if parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return Err(page_only());
        }
        match st.ui.role(&parts.method, &parts.headers) {
            Some(r) => r.map(|_| PageOperator),
            None => Err(page_only()),
        }
    }
}

/// Who began a ceremony: `bearer` (the operator token) or a page login
/// (`page:` and its cookie's digest). Each login's ceremonies are its own:
/// another's cannot answer them, nor push them out.
pub(super) struct Login(pub String);

impl FromRequestParts<AppState> for Login {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        use sha2::{Digest, Sha256};
        if parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return Ok(Login("bearer".into()));
        }
        Ok(Login(
            match super::ui::cookie_value(&parts.headers, super::ui::COOKIE) {
                Some(c) => format!("page:{}", hex::encode(Sha256::digest(c.as_bytes()))),
                None => "bearer".into(),
            },
        ))
    }
}

fn info(row: crate::store::PasskeyRow) -> wire::PasskeyInfo {
    wire::PasskeyInfo {
        id: row.id,
        name: row.name,
        created_at: row.created_at,
        last_used_at: row.last_used_at,
        damage: row.passkey.err(),
    }
}

/// `GET /v1/passkeys` (operator).
pub(super) async fn list(State(st): State<AppState>, _: Operator) -> ApiResult {
    let requires = match st.engine.ack_requires() {
        crate::config::AckRequires::Token => "token",
        crate::config::AckRequires::Passkey => "passkey",
    };
    ok(wire::Passkeys {
        ack_requires: requires.to_string(),
        origin: st.passkeys.origin().to_string(),
        rp_id: st.passkeys.rp_id().to_string(),
        unavailable: st.passkeys.unavailable().map(str::to_string),
        passkeys: st.engine.passkeys()?.into_iter().map(info).collect(),
    })
}

/// What a challenge `f` is for, checked against the state now: an
/// approval only of a policy awaiting its ack, at its current tree.
fn purpose(st: &AppState, f: wire::ChallengeFor) -> Result<Purpose, ApiError> {
    Ok(match f {
        wire::ChallengeFor::Approve { policy, tree } => {
            let p = st.engine.policy(&policy)?;
            if p.status != PolicyStatus::AwaitingAck {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "not-awaiting-ack",
                    format!(
                        "policy {policy} is {}, not awaiting-ack: nothing to approve",
                        p.status.as_str()
                    ),
                ));
            }
            let now = approval_subject(&p)?;
            if now != tree.trim() {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "tree-changed",
                    format!(
                        "the change was updated, review it again: policy {policy} is now at {now}, the review was of {tree}"
                    ),
                ));
            }
            Purpose::Approve { policy, tree: now }
        }
        wire::ChallengeFor::AddPasskey => Purpose::AddPasskey,
        wire::ChallengeFor::RemovePasskey { passkey } => Purpose::RemovePasskey { id: passkey },
    })
}

/// `POST /v1/passkeys/challenge` (operator): a challenge for one purpose.
pub(super) async fn challenge(
    State(st): State<AppState>,
    _: Operator,
    Login(login): Login,
    JsonBody(f): JsonBody<wire::ChallengeFor>,
) -> ApiResult {
    let purpose = purpose(&st, f)?;
    let registered = st.engine.usable_passkeys()?;
    let (ceremony, options) = st.passkeys.begin_assertion(&login, purpose, &registered)?;
    ok(wire::PasskeyChallenge { ceremony, options })
}

/// Verifies `a` for `wanted`, and records the passkey's use.
pub(super) fn prove(
    st: &AppState,
    login: &str,
    a: &wire::PasskeyAssertion,
    wanted: &Purpose,
) -> Result<Proof, ApiError> {
    let proof = st
        .passkeys
        .finish_assertion(login, &a.ceremony, wanted, &a.credential)?;
    st.engine.passkey_used(&proof)?;
    Ok(proof)
}

/// The purpose an approval of `policy` given for `tree` proves.
pub(super) fn approval(
    st: &AppState,
    policy: &str,
    tree: Option<&str>,
) -> Result<Purpose, ApiError> {
    let tree = match tree {
        Some(t) => t.trim().to_string(),
        None => approval_subject(&st.engine.policy(policy)?)?,
    };
    Ok(Purpose::Approve {
        policy: policy.to_string(),
        tree,
    })
}

/// `POST /v1/passkeys/register` (the page): a registration's options.
pub(super) async fn register(
    State(st): State<AppState>,
    _: PageOperator,
    Login(login): Login,
    JsonBody(b): JsonBody<wire::PasskeyRegister>,
) -> ApiResult {
    let registered = st.engine.usable_passkeys()?;
    let proof = match &b.assertion {
        Some(a) => Some(prove(&st, &login, a, &Purpose::AddPasskey)?),
        None if registered.is_empty() && !st.engine.passkeys()?.is_empty() => {
            // Registered but none usable (damaged): only the operator's
            // files can mend that.
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "passkeys-damaged",
                "the registered passkeys cannot be read: see the daemon's log",
            ));
        }
        None => None,
    };
    // The code is looked at only while none is registered (a later one
    // needs an assertion, whatever code comes with it).
    let grant = match (&proof, b.code.as_deref()) {
        (Some(p), _) => Some(Grant::Proof(p)),
        (None, Some(code)) if registered.is_empty() => {
            Some(Grant::Code(st.passkeys.check_code(code)?))
        }
        (None, _) => None,
    };
    let user = st.engine.passkey_user()?;
    let (ceremony, options) =
        st.passkeys
            .begin_registration(&login, user, &b.name, &registered, grant)?;
    ok(wire::PasskeyChallenge { ceremony, options })
}

/// `POST /v1/passkeys/register/finish` (the page): the new passkey.
pub(super) async fn register_finish(
    State(st): State<AppState>,
    _: PageOperator,
    Login(login): Login,
    JsonBody(b): JsonBody<wire::PasskeyRegisterFinish>,
) -> ApiResult {
    let new = st
        .passkeys
        .finish_registration(&login, &b.ceremony, &b.credential)?;
    // A code spent, replaced or expired since the ceremony began allows
    // nothing; whether a passkey is registered already is the store's to
    // say, in the transaction that would add this one.
    if let Authority::EnrolCode(checked) = &new.authority
        && !st.passkeys.code_still(checked)
    {
        return Err(PasskeyError::Enrol(EnrolError::Refused).into());
    }
    st.engine.add_passkey(&new)?;
    // A passkey exists now: no code registers anything any more.
    if matches!(new.authority, Authority::EnrolCode(_)) {
        st.passkeys.spend_code();
    }
    let dropped = st.passkeys.drop_unproven();
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "registrations begun on the enrolment code were ended: a passkey is registered"
        );
    }
    let row = st
        .engine
        .passkeys()?
        .into_iter()
        .find(|r| r.id == new.id)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the passkey was stored but cannot be read back",
            )
        })?;
    ok(info(row))
}

/// `POST /v1/passkeys/{id}/rename {name}` (operator): another name.
pub(super) async fn rename(
    State(st): State<AppState>,
    _: Operator,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::PasskeyRename>,
) -> ApiResult {
    ok(info(st.engine.rename_passkey(
        &id,
        &b.name,
        "the operator",
    )?))
}

/// `POST /v1/passkeys/{id}/remove` (operator, with an assertion for it).
pub(super) async fn remove(
    State(st): State<AppState>,
    _: Operator,
    Login(login): Login,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::PasskeyRemove>,
) -> ApiResult {
    let proof = prove(
        &st,
        &login,
        &b.assertion,
        &Purpose::RemovePasskey { id: id.clone() },
    )?;
    ok(info(st.engine.remove_passkey(&id, &proof)?))
}

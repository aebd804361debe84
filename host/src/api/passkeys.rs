//! The passkeys' routes: list, challenge, register (from the page only),
//! remove, and the passkey half of an approval. Registration needs the
//! page's login (a person's browser: the bearer token is refused) and,
//! once one passkey is registered, an assertion of a registered one.
//! Removing takes an assertion for exactly that passkey. It maps the
//! relying party's and the engine's answers to the wire; it must never
//! store a passkey or change a policy itself.

use super::{ApiError, ApiResult, AppState, JsonBody, Operator, ok};
use crate::engine::passkeys::approval_subject;
use crate::passkey::{PasskeyError, Proof, Purpose};
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
    JsonBody(f): JsonBody<wire::ChallengeFor>,
) -> ApiResult {
    let purpose = purpose(&st, f)?;
    let registered = st.engine.usable_passkeys()?;
    let (ceremony, options) = st.passkeys.begin_assertion(purpose, &registered)?;
    ok(wire::PasskeyChallenge { ceremony, options })
}

/// Verifies `a` for `wanted`, and records the passkey's use.
pub(super) fn prove(
    st: &AppState,
    a: &wire::PasskeyAssertion,
    wanted: &Purpose,
) -> Result<Proof, ApiError> {
    let proof = st
        .passkeys
        .finish_assertion(&a.ceremony, wanted, &a.credential)?;
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
    JsonBody(b): JsonBody<wire::PasskeyRegister>,
) -> ApiResult {
    let registered = st.engine.usable_passkeys()?;
    let proof = match &b.assertion {
        Some(a) => Some(prove(&st, a, &Purpose::AddPasskey)?),
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
    let user = st.engine.passkey_user()?;
    let (ceremony, options) =
        st.passkeys
            .begin_registration(user, &b.name, &registered, proof.as_ref())?;
    ok(wire::PasskeyChallenge { ceremony, options })
}

/// `POST /v1/passkeys/register/finish` (the page): the new passkey.
pub(super) async fn register_finish(
    State(st): State<AppState>,
    _: PageOperator,
    JsonBody(b): JsonBody<wire::PasskeyRegisterFinish>,
) -> ApiResult {
    let new = st
        .passkeys
        .finish_registration(&b.ceremony, &b.credential)?;
    st.engine.add_passkey(&new)?;
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

/// `POST /v1/passkeys/{id}/remove` (operator, with an assertion for it).
pub(super) async fn remove(
    State(st): State<AppState>,
    _: Operator,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<wire::PasskeyRemove>,
) -> ApiResult {
    let proof = prove(
        &st,
        &b.assertion,
        &Purpose::RemovePasskey { id: id.clone() },
    )?;
    ok(info(st.engine.remove_passkey(&id, &proof)?))
}

//! Attach idempotency keys: the client's key (a header or the body's
//! `idempotencyKey`), checked and scoped to the credential that sent it,
//! with a digest of the request to tell a retry from another request. It
//! must never let two credentials share a key.

use super::super::EngineError;
use crate::config::Trust;
use serde_json::Value;

/// An idempotency key as stored: scoped to the credential that sent it.
pub(in crate::engine) fn scoped_key(trust: Trust, key: &str) -> String {
    format!("{trust:?}:{key}")
}

/// A digest of an attach request, to tell a retry from another request.
fn request_digest(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(body.to_string().as_bytes()))
}

/// The request's key (`key`, else the body's `idempotencyKey`, taken out
/// of the body), scoped to `trust`, with the digest of the rest of the
/// request; `None` without one. A key that is not 1 to 200 printable
/// ASCII characters is refused.
pub(super) fn client_key(
    key: Option<String>,
    body: &mut Value,
    trust: Trust,
) -> Result<Option<(String, String)>, EngineError> {
    let key = match (
        key,
        body.as_object_mut()
            .and_then(|m| m.remove("idempotencyKey")),
    ) {
        (Some(k), _) => Some(k),
        (None, Some(Value::String(k))) => Some(k),
        (None, Some(_)) => {
            return Err(EngineError::Invalid {
                field: "idempotencyKey".into(),
                message: "must be a string".into(),
            });
        }
        (None, None) => None,
    };
    match key {
        Some(k)
            if k.is_empty() || k.len() > 200 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) =>
        {
            Err(EngineError::Invalid {
                field: "idempotencyKey".into(),
                message: "must be 1 to 200 printable ASCII characters, no spaces".into(),
            })
        }
        Some(k) => Ok(Some((scoped_key(trust, &k), request_digest(body)))),
        None => Ok(None),
    }
}

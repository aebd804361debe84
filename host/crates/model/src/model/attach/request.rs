//! An attach request as it arrives: the client's idempotency key (a
//! header or the body's `idempotencyKey`) taken out of the body, with a
//! digest of the rest of the request to tell a retry from another
//! request. It owns the key's rules and the digest; it must never scope a
//! key to a credential (the engine does) or look at the store.

use super::{Invalid, invalid};
use serde_json::Value;

/// The client's idempotency key (unscoped) and the digest of the request
/// it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    /// The key as the client sent it (1 to 200 printable ASCII characters).
    pub key: String,
    /// The SHA-256 digest (hex) of the request without its key.
    pub digest: String,
}

/// A digest of an attach request (its JSON without `idempotencyKey`, keys
/// in order), to tell a retry from another request.
pub fn request_digest(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(body.to_string().as_bytes()))
}

/// The request's key (`header`, else the body's `idempotencyKey`; the
/// body's is taken out of it either way) with the digest of the rest of
/// the request; `None` without one. A key that is not 1 to 200 printable
/// ASCII characters is refused.
pub fn client_key(header: Option<String>, body: &mut Value) -> Result<Option<ClientKey>, Invalid> {
    let key = match (
        header,
        body.as_object_mut()
            .and_then(|m| m.remove("idempotencyKey")),
    ) {
        (Some(k), _) => Some(k),
        (None, Some(Value::String(k))) => Some(k),
        (None, Some(_)) => return Err(invalid("idempotencyKey", "must be a string")),
        (None, None) => None,
    };
    match key {
        Some(k)
            if k.is_empty() || k.len() > 200 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) =>
        {
            Err(invalid(
                "idempotencyKey",
                "must be 1 to 200 printable ASCII characters, no spaces",
            ))
        }
        Some(key) => Ok(Some(ClientKey {
            key,
            digest: request_digest(body),
        })),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_key_leaves_the_body_and_the_digest_is_of_the_rest() {
        let mut body = json!({"sessionId": "s", "idempotencyKey": "k1"});
        let k = client_key(None, &mut body).expect("ok").expect("a key");
        assert_eq!(body, json!({"sessionId": "s"}));
        assert_eq!(k.key, "k1");
        assert_eq!(k.digest, request_digest(&json!({"sessionId": "s"})));
        // The header wins; the body's key still leaves the body.
        let mut body = json!({"sessionId": "s", "idempotencyKey": 3});
        let k = client_key(Some("h".into()), &mut body)
            .expect("ok")
            .expect("a key");
        assert_eq!((k.key.as_str(), body), ("h", json!({"sessionId": "s"})));
        // Another request, another digest.
        assert_ne!(k.digest, request_digest(&json!({"sessionId": "t"})));
        assert_eq!(client_key(None, &mut json!({})).expect("ok"), None);
        let e = client_key(None, &mut json!({"idempotencyKey": 1})).expect_err("refused");
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("idempotencyKey", "must be a string")
        );
        for bad in ["", "a b", &"x".repeat(201)] {
            let e = client_key(Some(bad.into()), &mut json!({})).expect_err("refused");
            assert_eq!(e.field, "idempotencyKey", "{bad:?}");
        }
    }
}

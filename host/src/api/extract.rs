//! What every handler takes from a request before it acts: the bearer's
//! credential (checked first, so a request without a valid token learns
//! nothing about its body) and the JSON body, decoded into the route's
//! type with the failing field named. It must never read state.

use super::{ApiError, AppState, MAX_BODY, Role};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// The caller's role: the bearer token when an Authorization header is
/// sent, else the web page's login cookie (with its CSRF token on every
/// method and the origin check on writes, see `ui`), else 401 as for a
/// missing token.
fn role_of(parts: &Parts, st: &AppState, needed: Role) -> Result<Role, ApiError> {
    if parts
        .headers
        .contains_key(axum::http::header::AUTHORIZATION)
    {
        return st.tokens.require(&parts.headers, needed);
    }
    match st.ui.role(&parts.method, &parts.headers) {
        Some(r) => r,
        None => st.tokens.require(&parts.headers, needed),
    }
}

/// Any valid token (agent or operator), and which one it was.
pub struct Bearer(pub Role);

impl FromRequestParts<AppState> for Bearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        role_of(parts, st, Role::Agent).map(Bearer)
    }
}

/// Any valid token, with the session keys presented beside it (the
/// `Gatehost-Session-Key` header, comma-separated, repeatable): what the
/// engine checks before a report, a re-registration or an attach
/// (`engine::keys`).
pub struct Credential(pub crate::engine::Caller);

/// The header carrying session keys.
pub const SESSION_KEY_HEADER: &str = crate::session_key::HEADER;

impl FromRequestParts<AppState> for Credential {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        let role = role_of(parts, st, Role::Agent)?;
        let mut keys = Vec::new();
        for value in parts.headers.get_all(SESSION_KEY_HEADER) {
            let text = value.to_str().map_err(|_| {
                ApiError::bad_request("Gatehost-Session-Key", "must be printable ASCII")
            })?;
            keys.extend(
                text.split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_string),
            );
        }
        if keys.len() > 64 {
            return Err(ApiError::bad_request(
                "Gatehost-Session-Key",
                "at most 64 session keys per request",
            ));
        }
        Ok(Credential(crate::engine::Caller::new(role.trust(), keys)))
    }
}

/// The operator's token: 401 without a valid token, 403 with the agent's.
pub struct Operator;

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        role_of(parts, st, Role::Operator).map(|_| Operator)
    }
}

/// A JSON body decoded as `T`: 413 past [`MAX_BODY`], 400 naming the
/// field (`body` for the whole) when it does not decode.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        decode(&body_bytes(req, state).await?).map(JsonBody)
    }
}

/// The request's body: 413 past [`MAX_BODY`], 400 when it cannot be read.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_BODY)
        } else {
            ApiError::bad_request("body", format!("cannot read the body: {r}"))
        }
    })
}

/// A JSON body that may be left out: an empty body (or `null`) is `None`,
/// anything else is decoded as [`JsonBody`] decodes it.
pub(super) struct OptionalJsonBody<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.trim_ascii().is_empty() {
            return Ok(OptionalJsonBody(None));
        }
        decode(&bytes).map(OptionalJsonBody)
    }
}

/// The body of `POST /v1/policies`, read once into what the attach needs:
/// the client's idempotency key (the `Idempotency-Key` header, else the
/// body's `idempotencyKey`, which leaves the body either way) with the
/// digest of the rest of the request, and the attach input parsed from
/// that rest (its error names the field). The input's error is kept, not
/// answered here: a reused key answers its policy before the body's checks.
///
/// The body is read as JSON before it is typed because the key is taken
/// out of it and the digest is of the JSON as sent; the typed parse
/// (`model::attach::parse_input`) names the failing field by its path.
pub struct AttachBody {
    pub key: Option<crate::model::attach::ClientKey>,
    pub input: Result<crate::model::attach::AttachInput, crate::model::Invalid>,
}

impl<S: Send + Sync> FromRequest<S> for AttachBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let header = req.headers().get("idempotency-key").cloned();
        let JsonBody(mut body) = JsonBody::<serde_json::Value>::from_request(req, state).await?;
        let header = match header {
            Some(k) => Some(
                k.to_str()
                    .map_err(|_| ApiError::bad_request("Idempotency-Key", "must be ASCII"))?
                    .to_string(),
            ),
            None => None,
        };
        let key = crate::model::attach::client_key(header, &mut body)
            .map_err(|e| ApiError::bad_request(&e.field, e.message))?;
        Ok(AttachBody {
            key,
            input: crate::model::attach::parse_input(body),
        })
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.is_empty() {
        return Err(ApiError::bad_request("body", "a JSON body is required"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        ApiError::bad_request(&field, e.into_inner().to_string())
    })?;
    // One JSON value and nothing after it but whitespace: a second object
    // or anything else appended is refused, never silently dropped (a
    // proxy or a logger could read the body otherwise than the daemon).
    de.end().map_err(|e| {
        ApiError::bad_request(
            "body",
            format!("the body must be one JSON value, with nothing after it but whitespace ({e})"),
        )
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        a: Option<u32>,
    }

    #[test]
    fn bytes_after_the_json_body_are_refused() {
        for body in [
            &b"{\"a\":1}{\"b\":2}"[..],
            b"{\"a\":1} garbage",
            b"{\"a\":1}\n{\"a\":2}\n",
            b"{\"a\":1},",
            b"{\"a\":1}\0",
        ] {
            let e = decode::<Body>(body).expect_err("trailing bytes");
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body:?}");
            assert!(
                e.message.contains("one JSON value"),
                "{body:?}: {}",
                e.message
            );
        }
    }

    async fn attach_body(header: Option<&[u8]>, body: &str) -> Result<AttachBody, ApiError> {
        let mut req = axum::http::Request::builder().method("POST");
        if let Some(h) = header {
            req = req.header(
                "idempotency-key",
                axum::http::HeaderValue::from_bytes(h).expect("a header value"),
            );
        }
        let req = req
            .body(axum::body::Body::from(body.to_string()))
            .expect("a request");
        AttachBody::from_request(req, &()).await
    }

    #[tokio::test]
    async fn an_attach_body_gives_its_key_and_its_input_apart() {
        let body = r#"{"sessionId": "s1", "gate": {"command": "true"}, "idempotencyKey": "k1"}"#;
        let got = attach_body(None, body).await.expect("read");
        let key = got.key.expect("the body's key");
        assert_eq!(key.key, "k1");
        // The digest is of the body without its key.
        let rest = serde_json::json!({"sessionId": "s1", "gate": {"command": "true"}});
        assert_eq!(key.digest, crate::model::attach::request_digest(&rest));
        assert_eq!(
            got.input.expect("an input").session_id.as_deref(),
            Some("s1")
        );
        // The header's key wins.
        let got = attach_body(Some(b"h1"), body).await.expect("read");
        assert_eq!(got.key.expect("a key").key, "h1");
        // A body the attach refuses keeps its key (a replay answers first).
        let got = attach_body(Some(b"h2"), r#"{"then": "nope"}"#)
            .await
            .expect("read");
        assert_eq!(got.key.expect("a key").key, "h2");
        assert_eq!(got.input.expect_err("refused").field, "then");
        // Without a key, none.
        let got = attach_body(None, r#"{"sessionId": "s1"}"#)
            .await
            .expect("read");
        assert!(got.key.is_none());
    }

    #[tokio::test]
    async fn an_attach_body_refuses_a_bad_key_or_a_bad_body_first() {
        let e = attach_body(Some(b"caf\xc3\xa9"), "{}")
            .await
            .err()
            .expect("refused");
        assert_eq!(
            (e.status, e.field.as_deref(), e.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                Some("Idempotency-Key"),
                "Idempotency-Key: must be ASCII"
            )
        );
        let e = attach_body(None, r#"{"idempotencyKey": 1}"#)
            .await
            .err()
            .expect("refused");
        assert_eq!(e.field.as_deref(), Some("idempotencyKey"));
        // The body is read before the header is looked at.
        let e = attach_body(Some(b"caf\xc3\xa9"), "[] []")
            .await
            .err()
            .expect("refused");
        assert_eq!(e.field.as_deref(), Some("body"));
        assert!(e.message.contains("one JSON value"), "{}", e.message);
        let e = attach_body(None, "").await.err().expect("refused");
        assert_eq!(e.message, "body: a JSON body is required");
    }

    #[test]
    fn trailing_whitespace_is_fine() {
        let b: Body = decode(b" {\"a\":1} \r\n\t").expect("one object");
        assert_eq!(b.a, Some(1));
    }
}

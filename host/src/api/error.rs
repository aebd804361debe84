//! Machine-readable API errors: `{"error": {"code", "message", "field"?}}`.

use crate::engine::EngineError;
use crate::store::StoreError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// A fixed code, or one another host of the cluster answered with
    /// (`api::forwarded`).
    pub code: std::borrow::Cow<'static, str>,
    pub message: String,
    pub field: Option<String>,
    /// Seconds a client should wait before it tries again: sent as
    /// `Retry-After`, with `Connection: close` (a refused client does not
    /// keep its connection, a descriptor, open).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        code: impl Into<std::borrow::Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            code: code.into(),
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    /// With `Retry-After: secs` (and `Connection: close`).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// 400 naming `field`; a misspelt name gets a "did you mean".
    pub fn bad_request(field: &str, message: impl Into<String>) -> Self {
        let message = crate::suggest::with_suggestion(&message.into());
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "invalid".into(),
            message: format!("{field}: {message}"),
            field: Some(field.to_string()),
            retry_after: None,
        }
    }

    pub fn too_large(max: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            format!("the body is larger than {max} bytes"),
        )
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid { field, message } => ApiError::bad_request(&field, message),
            EngineError::NotFound(m) => ApiError::new(StatusCode::NOT_FOUND, "not-found", m),
            EngineError::Forbidden { code, message } => {
                ApiError::new(StatusCode::FORBIDDEN, code, message)
            }
            EngineError::Conflict { code, message } => {
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
            EngineError::Unavailable { code, message } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
            }
            EngineError::Corrupt { .. } | EngineError::SessionCorrupt { .. } => {
                tracing::error!(error = %e, "a stored row does not decode");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "store-corrupt",
                    e.to_string(),
                )
            }
            EngineError::Internal(message) => {
                tracing::error!(error = %message, "an internal error answered to a client");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
            EngineError::Store(s) => s.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            // An outage is logged once, at its start and its end, by the
            // engine (`engine::outage`), not at every request it refuses.
            tracing::debug!(error = %e, "store unavailable answered to a client");
            // A full disk, a read-only directory, an unreachable database:
            // nothing was written; a retry in a second may succeed.
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                e.to_string(),
            )
            .retry_after(1)
        } else if matches!(e, StoreError::NotOwner(_)) {
            // Another host's session or policy: that host changes it.
            ApiError::new(StatusCode::CONFLICT, "other-host", e.to_string())
        } else if matches!(e, StoreError::Fenced(_)) {
            // This daemon lost its host claim and is stopping: another
            // daemon holds its work now.
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "host-fenced",
                e.to_string(),
            )
        } else {
            tracing::error!(error = %e, "store error answered to a client");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "store-error",
                e.to_string(),
            )
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(f) = &self.field {
            body["field"] = json!(f);
        }
        let mut response = (self.status, axum::Json(json!({ "error": body }))).into_response();
        if let Some(secs) = self.retry_after {
            let headers = response.headers_mut();
            headers.insert(axum::http::header::RETRY_AFTER, secs.into());
            headers.insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: EngineError) -> (StatusCode, &'static str) {
        let a = ApiError::from(e);
        match a.code {
            std::borrow::Cow::Borrowed(code) => (a.status, code),
            std::borrow::Cow::Owned(code) => panic!("a fixed code expected, not {code}"),
        }
    }

    /// The one mapping of engine errors to HTTP: a failure inside the
    /// daemon (a blocking task that panicked) is a 500, never the 409 of
    /// a request that does not fit the state.
    #[tokio::test]
    async fn engine_errors_map_to_their_status_and_code() {
        let join = tokio::spawn(async { panic!("a blocking task fails") })
            .await
            .expect_err("it panicked");
        let internal = EngineError::task_failed("the commit task", join);
        assert!(
            internal.to_string().starts_with("the commit task failed: "),
            "{internal}"
        );
        assert_eq!(
            answer(internal),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        );
        let conflict = EngineError::Conflict {
            code: "settled",
            message: "policy p is already done".into(),
        };
        assert_eq!(answer(conflict), (StatusCode::CONFLICT, "settled"));
        let unavailable = EngineError::Unavailable {
            code: "busy",
            message: "later".into(),
        };
        assert_eq!(
            answer(unavailable),
            (StatusCode::SERVICE_UNAVAILABLE, "busy")
        );
        let invalid = EngineError::Invalid {
            field: "cwd".into(),
            message: "must be an absolute path".into(),
        };
        assert_eq!(answer(invalid), (StatusCode::BAD_REQUEST, "invalid"));
        assert_eq!(
            answer(EngineError::NotFound("no policy 'p'".into())),
            (StatusCode::NOT_FOUND, "not-found")
        );
        let forbidden = EngineError::Forbidden {
            code: "session-owned-by-operator",
            message: "no".into(),
        };
        assert_eq!(
            answer(forbidden),
            (StatusCode::FORBIDDEN, "session-owned-by-operator")
        );
        let corrupt = EngineError::Corrupt {
            policy: "p".into(),
            column: "spec".into(),
            message: "expected value".into(),
        };
        assert_eq!(
            answer(corrupt),
            (StatusCode::INTERNAL_SERVER_ERROR, "store-corrupt")
        );
        assert_eq!(
            answer(EngineError::Store(StoreError::Full("disk".into()))),
            (StatusCode::SERVICE_UNAVAILABLE, "store-unavailable")
        );
        let outage = ApiError::from(EngineError::Store(StoreError::Unreachable(
            "connection refused".into(),
        )));
        assert_eq!(
            (outage.status, outage.code.as_ref(), outage.retry_after),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                Some(1)
            )
        );
        assert_eq!(
            answer(EngineError::Store(StoreError::RolledBack)),
            (StatusCode::INTERNAL_SERVER_ERROR, "store-error")
        );
    }
}

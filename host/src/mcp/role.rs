//! The startup check that the token is the agent's, never the operator's.
//!
//! Two tests, either of which refuses: the token equals the operator token
//! file the caller names (where it is readable: the default data
//! directory's `operator.token`), and the daemon itself answering a probe
//! of an operator-only route. The probe is `POST /v1/sessions/start` with
//! no body: the daemon checks the credential before anything else and
//! answers the agent token 403 `operator-only`; the operator's passes that
//! check and is refused for the missing body (400), so nothing is started
//! either way. Only a 403 `operator-only` lets the server start: any other
//! answer, or no answer, refuses (it could be the operator's).

use super::McpError;
use crate::client::Client;
use crate::wire::ErrorBody;
use reqwest::Method;
use std::path::Path;

/// The operator-only route the probe asks.
pub const PROBE_ROUTE: &str = "/v1/sessions/start";

/// Ok when `token` is the agent's: it is not the one in `operator_file`
/// (when given and readable), and the daemon behind `client` refuses it an
/// operator-only route.
pub async fn check_agent_token(
    client: &Client,
    token: &str,
    operator_file: Option<&Path>,
) -> Result<(), McpError> {
    if let Some(path) = operator_file {
        match std::fs::read_to_string(path) {
            Ok(operator) if operator.trim() == token.trim() => {
                return Err(McpError::OperatorToken {
                    how: format!("it is the one in {}", path.display()),
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "operator token file not read");
            }
        }
    }
    let (status, body) = client
        .send(Method::POST, PROBE_ROUTE, Some(token), None)
        .await
        .map_err(|e| McpError::CannotVerify {
            message: e.to_string(),
        })?;
    role_from_probe(status, &body)
}

/// The probe's answer read: only 403 `operator-only` is the agent's token.
pub fn role_from_probe(status: u16, body: &[u8]) -> Result<(), McpError> {
    let error = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|b| b.error);
    let code = error.as_ref().map(|e| e.code.as_str());
    match (status, code) {
        (403, Some("operator-only")) => Ok(()),
        (401, _) => Err(McpError::WrongToken {
            message: error.map(|e| e.message).unwrap_or_default(),
        }),
        (200..=299, _) | (400, Some("invalid")) => Err(McpError::OperatorToken {
            how: format!("the daemon let it use the operator-only route {PROBE_ROUTE}"),
        }),
        _ => Err(McpError::CannotVerify {
            message: format!(
                "{PROBE_ROUTE} answered HTTP {status} ({}), neither the agent's 403 operator-only nor the operator's 400",
                code.unwrap_or("no API error")
            ),
        }),
    }
}

//! What a tool call answers: its result, or a tool error (`isError:
//! true`) in the API's error shape, `{"error": {"code", "message",
//! "field"?, "hint"?}}`, whether the arguments did not decode or the
//! daemon refused; and the decoding of arguments into a tool's input type.

use crate::client::ClientError;
use crate::wire::{ErrorBody, ErrorDetail};
use rmcp::model::{CallToolResult, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The longest string a tool result carries: longer ones (a gate's
/// output, a session's exit output) keep their last this many bytes.
pub const MAX_STRING: usize = 8 * 1024;

pub(super) type ToolResult = Result<Value, ErrorDetail>;

/// A tool result: `v`, its long strings cut (see [`cap_strings`]).
pub(super) fn ok_result(mut v: Value) -> CallToolResult {
    cap_strings(&mut v);
    CallToolResult::structured(v)
}

/// A tool error in the API's error shape.
pub(super) fn error_result(detail: ErrorDetail) -> CallToolResult {
    match serde_json::to_value(ErrorBody { error: detail }) {
        Ok(body) => CallToolResult::structured_error(body),
        // Said, never a `null` error: the tool error is its text then.
        Err(e) => {
            tracing::error!(error = %e, "a tool error does not encode as JSON");
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "the error does not encode as JSON: {e}"
            ))])
        }
    }
}

/// A bad argument, named as the API names a bad field.
pub(super) fn invalid(field: &str, message: impl std::fmt::Display) -> ErrorDetail {
    ErrorDetail {
        code: "invalid".into(),
        message: format!("{field}: {message}"),
        field: Some(field.to_string()),
        hint: None,
    }
}

/// The arguments decoded as `T`; an error names the argument at fault
/// and, when it is misspelt, the name it is nearest to.
pub(super) fn decode<T: DeserializeOwned>(args: JsonObject) -> Result<T, ErrorDetail> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "arguments".to_string()
        } else {
            path
        };
        invalid(
            &field,
            crate::suggest::with_suggestion(&e.into_inner().to_string()),
        )
    })
}

/// The daemon's error as a tool error: its code, message and field as
/// the API gave them, and what to do where that is clear.
pub(super) fn from_client(e: ClientError) -> ErrorDetail {
    match e {
        ClientError::Api {
            status,
            code,
            message,
            field,
        } => {
            let hint = match status {
                401 => Some(
                    "the daemon no longer accepts this token: restart gatehost mcp with the daemon's agent.token"
                        .to_string(),
                ),
                _ => None,
            };
            ErrorDetail {
                code,
                message,
                field,
                hint,
            }
        }
        other => {
            let hint = matches!(other, ClientError::Unreachable { .. }).then(|| {
                "is `gatehost serve` running? gatehost mcp talks to the daemon it was started with"
                    .to_string()
            });
            ErrorDetail {
                code: other.code().to_string(),
                message: other.to_string(),
                field: None,
                hint,
            }
        }
    }
}

pub(super) fn to_value(v: &impl Serialize) -> ToolResult {
    serde_json::to_value(v).map_err(|e| ErrorDetail {
        code: "encode".into(),
        message: format!("cannot encode the answer: {e}"),
        field: None,
        hint: None,
    })
}

/// A list argument as the API's comma-separated query value (none for an
/// empty list, as the API reads an empty value). An item that is empty or
/// holds a comma could not be told apart there: it is refused.
pub(super) fn joined(
    field: &str,
    list: Option<Vec<String>>,
) -> Result<Option<String>, ErrorDetail> {
    let Some(list) = list else {
        return Ok(None);
    };
    for (i, item) in list.iter().enumerate() {
        if item.trim().is_empty() || item.contains(',') {
            return Err(invalid(
                &format!("{field}[{i}]"),
                format!("'{item}' is empty or holds a comma"),
            ));
        }
    }
    Ok((!list.is_empty()).then(|| list.join(",")))
}

/// Cuts every string longer than [`MAX_STRING`] bytes to its last
/// [`MAX_STRING`] bytes (on a character boundary), saying how much went.
pub(super) fn cap_strings(v: &mut Value) {
    match v {
        Value::String(s) if s.len() > MAX_STRING => {
            let mut start = s.len() - MAX_STRING;
            while !s.is_char_boundary(start) {
                start += 1;
            }
            *s = format!("…({start} bytes cut) {}", &s[start..]);
        }
        Value::Array(items) => items.iter_mut().for_each(cap_strings),
        Value::Object(map) => map.values_mut().for_each(cap_strings),
        _ => {}
    }
}

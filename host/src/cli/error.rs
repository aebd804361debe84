//! The command line's errors, and the one place they become output and an
//! exit code ([`report`]): once, on stderr, plain text (`gatehost: error:
//! …` and a `hint:` line saying what to do); with `--json`, one object on
//! stdout in the API's error shape (`{"error": {"code", "message",
//! "field"?, "hint"?}}`). Every error is exit 2: "could not run" is never
//! confused with a gate's "no" (exit 1).
//!
//! It must never be bypassed: commands return a [`CliError`] instead of
//! printing one.

use crate::client::ClientError;
use crate::wire::{ErrorBody, ErrorDetail};

/// The exit code of every error.
pub const EXIT_ERROR: i32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// A stable, kebab-case name (`bad-input`, `config`, `unreachable`, or
    /// the API's code).
    pub code: String,
    pub message: String,
    /// The option, file or configuration key at fault.
    pub field: Option<String>,
    /// What to do about it.
    pub hint: Option<String>,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        CliError {
            code: code.to_string(),
            message: message.into(),
            field: None,
            hint: None,
        }
    }

    /// Bad input on the command line or in a file it names.
    pub fn input(message: impl Into<String>) -> Self {
        CliError::new("bad-input", message)
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The API's error shape.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.clone(),
                message: self.message.clone(),
                field: self.field.clone(),
                hint: self.hint.clone(),
            },
        }
    }
}

impl From<crate::hook::plan::PlaceError> for CliError {
    fn from(e: crate::hook::plan::PlaceError) -> Self {
        let err = CliError::new(e.code, e.message);
        match e.field {
            Some(f) => err.field(f),
            None => err,
        }
    }
}

impl From<crate::config::ConfigError> for CliError {
    fn from(e: crate::config::ConfigError) -> Self {
        use crate::config::ConfigError;
        if let ConfigError::Unknown {
            path, kind, name, ..
        } = &e
        {
            return CliError::new("config", e.to_string())
                .field(name.clone())
                .hint(format!(
                    "rename or remove the {kind} `{name}` in {path} (the README's Configuration section lists every table and key)"
                ));
        }
        let (file, key) = match &e {
            ConfigError::Read { path, .. } => (path, None),
            ConfigError::Parse { path, key, .. } => (path, key.clone()),
            ConfigError::Invalid { path, key, .. } => (path, Some(key.clone())),
            ConfigError::Unknown { path, name, .. } => (path, Some(name.clone())),
        };
        let hint = match &key {
            Some(k) => format!("edit {k} in {file}"),
            None => format!(
                "edit {file} (`gatehost docs readme` lists every key in its Configuration section)"
            ),
        };
        CliError::new("config", e.to_string())
            .field(key.unwrap_or_else(|| file.clone()))
            .hint(hint)
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        let hint = match &e {
            ClientError::Unreachable { .. } => Some(
                "is `gatehost serve` running? It writes its URL to server.url in its data directory; \
                 pass it with --server or GATEHOST_SERVER",
            ),
            ClientError::Api { status: 401, .. } => Some(
                "pass the daemon's agent.token or operator.token (in its data directory) with --token or GATEHOST_TOKEN",
            ),
            ClientError::Api {
                status: 403, code, ..
            } if code == "operator-only" => {
                Some("this needs the operator token: operator.token in the daemon's data directory")
            }
            _ => None,
        };
        let field = match &e {
            ClientError::Api { field, .. } => field.clone(),
            _ => None,
        };
        CliError {
            code: e.code().to_string(),
            message: e.to_string(),
            field,
            hint: hint.map(str::to_string),
        }
    }
}

/// Prints `err` once (see the module's doc) and returns its exit code.
/// `extra` fields join the JSON object (`check` keeps its report's
/// `outcome` and `reason` beside `error`).
pub fn report(err: &CliError, json: bool, extra: Option<serde_json::Value>) -> i32 {
    if json {
        match json_text(err, extra) {
            Ok(text) => {
                println!("{text}");
                return EXIT_ERROR;
            }
            // Said, and the error shown as text below.
            Err(e) => tracing::error!(error = %e, "the error does not encode as JSON"),
        }
    }
    eprintln!("gatehost: error: {}", err.message);
    if let Some(h) = &err.hint {
        eprintln!("  hint: {h}");
    }
    EXIT_ERROR
}

/// The line `--json` prints for `err`: `{"error": {…}}`, then the fields
/// of `extra` (an object; anything else adds nothing).
fn json_text(err: &CliError, extra: Option<serde_json::Value>) -> serde_json::Result<String> {
    serde_json::to_string(&Printed {
        body: err.body(),
        extra: match extra {
            Some(serde_json::Value::Object(more)) => more,
            _ => serde_json::Map::new(),
        },
    })
}

/// What `--json` prints for an error: its body, then the extra fields.
#[derive(serde::Serialize)]
struct Printed {
    #[serde(flatten)]
    body: ErrorBody,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_keep_their_code_and_field_and_get_a_hint() {
        let e: CliError = ClientError::Api {
            status: 403,
            code: "operator-only".into(),
            message: "this route needs the operator token".into(),
            field: None,
        }
        .into();
        assert_eq!(e.code, "operator-only");
        assert!(
            e.hint
                .as_deref()
                .is_some_and(|h| h.contains("operator.token"))
        );
        let e: CliError = ClientError::Api {
            status: 400,
            code: "invalid".into(),
            message: "then: nope".into(),
            field: Some("then".into()),
        }
        .into();
        assert_eq!(e.field.as_deref(), Some("then"));
        let body = serde_json::to_value(e.body()).expect("json");
        assert_eq!(body["error"]["code"], "invalid");
        assert_eq!(body["error"]["field"], "then");
        assert!(body["error"].get("hint").is_none());
    }

    #[test]
    fn the_json_line_is_the_body_then_the_extra_fields() {
        let e = CliError::new("gate-failed", "the gate failed").field("gate");
        let extra = serde_json::json!({"outcome": "fail", "reason": "exit 1"});
        assert_eq!(
            json_text(&e, Some(extra)).expect("encodes"),
            r#"{"error":{"code":"gate-failed","message":"the gate failed","field":"gate"},"outcome":"fail","reason":"exit 1"}"#
        );
        for extra in [None, Some(serde_json::json!("not an object"))] {
            assert_eq!(
                json_text(&e, extra).expect("encodes"),
                r#"{"error":{"code":"gate-failed","message":"the gate failed","field":"gate"}}"#
            );
        }
    }

    #[test]
    fn config_errors_name_the_file_and_key_to_edit() {
        let e: CliError = crate::config::ConfigError::Invalid {
            path: "/etc/g.toml".into(),
            key: "shell.allow[0]".into(),
            message: "bad".into(),
        }
        .into();
        assert_eq!(e.code, "config");
        assert_eq!(e.field.as_deref(), Some("shell.allow[0]"));
        assert_eq!(
            e.hint.as_deref(),
            Some("edit shell.allow[0] in /etc/g.toml")
        );
    }
}

//! The `policy attach` input (the agentproto `policy_attach` JSON): its
//! types and the checks that need nothing but the input, made at attach
//! and again on every read of a stored spec (a spec of the wrong shape is
//! a decode error, never a default). It must never look at a session, the
//! runner or a file (the engine's `attach` does, once).

use super::Invalid;
use super::as_given::{AsGiven, FromJson, tagged};
use crate::config::Trust;
use crate::gate::spec::{GateSpec, parse_gate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod request;
mod review;
mod shape;
mod template;
pub use request::{ClientKey, client_key, request_digest};
pub use review::{
    DEFAULT_MAX_CYCLES, DEFAULT_RUBRIC, MAX_RUBRIC, ReviewInput, Reviewer, SessionReviewer,
    check_depth,
};
pub use shape::{check_shape, check_stored, check_template, not_an_object};
pub use template::Template;

/// Nudges a failed gate sends before the policy is blocked, when
/// `onFail.maxRetries` is not given.
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The most `onFail.maxRetries` may be.
pub const MAX_RETRIES_LIMIT: u32 = 10;
/// How deep `next` chains may nest in one attach.
const MAX_CHAIN: usize = 16;
/// The most bytes of a label (policy or session); it is copied into events.
pub const MAX_LABEL: usize = 256;
/// The longest `deadline`.
pub const MAX_DEADLINE: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);
/// The most bytes of a nudge template (`onFail.nudge`).
pub const MAX_NUDGE: usize = 8 * 1024;
/// The most bytes of a commit message.
pub const MAX_COMMIT_MESSAGE: usize = 16 * 1024;

/// What a policy does once its gates pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Then {
    /// Publish the verdict (`policy:passed`, `policy:done`) and nothing else.
    #[default]
    Emit,
    /// Commit the paths of `commit` (after the operator's ack, unless
    /// `requireHumanAck` is false).
    Commit,
}

/// What a commit policy's gates run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateOn {
    /// A snapshot of the commit paths taken before the gates run, checked
    /// out in a host-owned worktree; the commit is exactly that snapshot.
    Snapshot,
    /// The live workspace, fingerprinted before and after the run (the
    /// operator's opt-out, for gates that need the whole workspace).
    Workspace,
}

/// A commit policy's `commit`: what its green gate commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommitInput {
    /// Workspace-relative paths (files or directories) the commit holds.
    pub paths: Vec<String>,
    /// The commit message.
    pub message: String,
    /// Wait for the operator's ack before committing (the agent token
    /// cannot turn it off).
    #[serde(default = "yes")]
    pub require_human_ack: bool,
}

fn yes() -> bool {
    true
}

/// What a failed gate does: the nudge sent to the members and how many times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OnFail {
    /// The nudge template: `{code}`, `{reason}`, `{findings}`, `{output}`
    /// and `{gate}` are filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudge: Option<String>,
    /// Nudges before the policy is blocked (0 to 10, default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_RETRIES_LIMIT))]
    pub max_retries: Option<u32>,
}

/// From which point a policy watches its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum WatchFrom {
    /// `"latest"` (default): a member that has already ended its turn (idle
    /// after a turn-end, or exited) counts as ended, so a policy attached
    /// just after the agent finished still gates that turn. `"now"`: only
    /// turn-ends after the attach count.
    Named(WatchName),
    /// Only session events after this cursor count.
    Cursor(i64),
}

/// `latest` or `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WatchName {
    /// A member that has already ended its turn counts as ended.
    Latest,
    /// Only turn-ends after the attach count.
    Now,
}

impl<'de> Deserialize<'de> for WatchFrom {
    /// A name or a cursor; any other string is refused naming the choices
    /// (as the attach's checks always did), a number that is no `i64` as
    /// serde words it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Cursor(i64),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("data did not match any variant of untagged enum WatchFrom")
        })? {
            Raw::Text(n) if n == "latest" => Ok(WatchFrom::Named(WatchName::Latest)),
            Raw::Text(n) if n == "now" => Ok(WatchFrom::Named(WatchName::Now)),
            Raw::Text(n) => Err(serde::de::Error::custom(tagged(
                "watchFrom",
                &format!("'{n}' is neither \"now\", \"latest\" nor an event cursor"),
            ))),
            Raw::Cursor(c) => Ok(WatchFrom::Cursor(c)),
        }
    }
}

/// The attach input. Field names and defaults are agentproto's. Its JSON
/// schema (`schemars`) is what `gatehost mcp` shows agents as
/// `policy_attach`'s input: `gate` is described by
/// the gate parser's types (one object or a list), `attachedBy` is left out (the host
/// sets it from the credential).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachInput {
    /// The session to watch (or `sessionIds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The sessions to watch (fan-in: the gate runs once all ended their
    /// turn); wins over `sessionId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_ids: Option<Vec<String>>,
    /// A name for people (at most 256 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The gate run at turn-end: a shell, judge or wasm gate object, or a
    /// list of them (run cheapest first); none passes at turn-end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<AsGiven<Vec<GateSpec>>>,
    /// What a green gate does: `emit` an event (default) or `commit`.
    #[serde(default)]
    pub then: Then,
    /// With `then: "commit"`: the paths to commit and the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitInput>,
    /// The nudge sent to the agent when the gate fails, and how many times.
    #[serde(default)]
    pub on_fail: OnFail,
    /// A policy attached once this one is done (its sessions default to
    /// this one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Box<AttachInput>>,
    /// Which turn-ends count: `latest` (default: a turn that already ended
    /// counts), `now` (only later ones), or an event cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_from: Option<WatchFrom>,
    /// What the gates of a commit policy judge (default: a snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_on: Option<GateOn>,
    /// How long the policy may take from its attach ("30m", "2h"; at
    /// least 1s, at most 365 days): past it, it is `expired` and
    /// `blocked`, whatever it waits on. None: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// A review chain: once the gate passes, `reviewer` reviews the change
    /// (SHIP goes on to `then`; BLOCK nudges `repairer` with the findings,
    /// and its next turn is gated and reviewed again), at most
    /// `maxCycles` times before the policy is blocked and a person told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewInput>,
    /// Who attached the policy: set by the host from the credential (a
    /// value in the body is overwritten). The gates of an agent's policy
    /// are held to the allowlist's argument rules, at attach and at every
    /// run.
    #[serde(default)]
    #[schemars(skip)]
    pub attached_by: Trust,
}

impl AttachInput {
    /// What the gates judge: a snapshot for a commit policy unless the
    /// operator said otherwise; the workspace for any other.
    pub fn gate_on(&self) -> GateOn {
        match (self.then, self.gate_on) {
            (Then::Commit, Some(g)) => g,
            (Then::Commit, None) => GateOn::Snapshot,
            (Then::Emit, _) => GateOn::Workspace,
        }
    }

    /// Records who attached this policy and its whole `next` chain.
    pub fn set_attached_by(&mut self, trust: Trust) {
        self.attached_by = trust;
        if let Some(next) = self.next.as_deref_mut() {
            next.set_attached_by(trust);
        }
    }

    /// The members, in order, the list winning over the single id.
    pub fn members(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let given: Vec<&String> = match &self.session_ids {
            Some(list) => list.iter().collect(),
            None => self.session_id.iter().collect(),
        };
        for id in given {
            if !out.contains(id) {
                out.push(id.clone());
            }
        }
        out
    }

    /// The `deadline` as a duration; an error is the message.
    pub fn deadline_duration(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(text) = &self.deadline else {
            return Ok(None);
        };
        let d = humantime::parse_duration(text.trim())
            .map_err(|e| format!("'{text}' is not a duration ({e}); try \"30m\", \"2h\""))?;
        if d < std::time::Duration::from_secs(1) || d > MAX_DEADLINE {
            return Err(format!("'{text}' must be between 1s and 365days"));
        }
        Ok(Some(d))
    }

    /// `onFail.maxRetries`, else [`DEFAULT_MAX_RETRIES`].
    pub fn max_retries(&self) -> u32 {
        self.on_fail.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    /// The gates to run (parsed and checked when the input was read).
    pub fn gates(&self) -> &[GateSpec] {
        self.gate.as_ref().map_or(&[], |g| g.as_slice())
    }

    /// The name of gate `i` in errors: `gate` for a single gate object,
    /// `gate[i]` in a list.
    pub fn gate_field(&self, i: usize) -> String {
        match &self.gate {
            Some(g) if !g.json().is_array() => "gate".into(),
            _ => format!("gate[{i}]"),
        }
    }
}

/// Parses the JSON body of an attach.
pub fn parse_input(value: Value) -> Result<AttachInput, Invalid> {
    if let Some(at) = not_an_object(&value) {
        return Err(invalid(at, "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        if let Some(named) = super::as_given::untag(&path, &message) {
            return named;
        }
        invalid(
            if path == "." {
                "policy".to_string()
            } else {
                path
            },
            message,
        )
    })
}

impl FromJson for AttachInput {
    /// As an attach's body is parsed ([`parse_input`]).
    fn from_json(v: &Value) -> Result<Self, Invalid> {
        parse_input(v.clone())
    }
}

/// One gate object: its schema is the gate parser's own type's.
impl JsonSchema for GateSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        crate::gate::spec::GateObject::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::gate::spec::GateObject::json_schema(g)
    }
}

/// One gate object, or a list of them: the gate parser's own type's.
impl JsonSchema for AsGiven<Vec<GateSpec>> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        crate::gate::spec::GateSchema::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::gate::spec::GateSchema::json_schema(g)
    }
}

pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

impl FromJson for Vec<GateSpec> {
    /// One gate object or a non-empty list of them; errors name `gate`.
    fn from_json(v: &Value) -> Result<Self, Invalid> {
        let at = "gate";
        let to_err = |e: crate::gate::SpecError| invalid(e.field, e.message);
        match v {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(invalid(
                        at,
                        "an empty list holds no gate (omit `gate` to pass at turn-end)",
                    ));
                }
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| parse_gate(v.clone(), &format!("{at}[{i}]")).map_err(to_err))
                    .collect()
            }
            v => parse_gate(v.clone(), at).map(|g| vec![g]).map_err(to_err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(body: Value) -> Invalid {
        parse_input(body).expect_err("refused")
    }

    /// A gate, a reviewer or a `watchFrom` refused while the input is read
    /// is named from the input's root, as the attach's checks named it.
    #[test]
    fn errors_inside_parsed_fields_name_the_field_from_the_root() {
        let e = refused(
            json!({"sessionId": "s", "next": {"gate": [{"command": "true"}, {"command": ""}]}}),
        );
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("next.gate[1].command", "must not be empty")
        );
        let e = refused(json!({"sessionId": "s", "gate": {"comand": "true"}}));
        assert_eq!(e.field, "gate.comand", "{e}");
        assert!(e.message.contains("did you mean `command`?"), "{e}");
        let e = refused(json!({"sessionId": "s", "gate": []}));
        assert_eq!(e.field, "gate");
        let e = refused(
            json!({"sessionId": "s", "next": {"review": {"reviewer": {"session": "r", "x": 1}}}}),
        );
        assert_eq!(e.field, "next.review.reviewer.x");
        let e = refused(json!({"sessionId": "s", "watchFrom": "soon"}));
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            (
                "watchFrom",
                "'soon' is neither \"now\", \"latest\" nor an event cursor"
            )
        );
        // The tag never reaches a person: a stored spec's damage reads.
        let text = r#"{"sessionId": "s", "gate": {"command": ""}}"#;
        let e = serde_json::from_str::<AttachInput>(text).expect_err("refused");
        let shown = crate::model::as_given::readable(&e.to_string());
        assert!(
            shown.starts_with("gate.command: must not be empty"),
            "{shown}"
        );
    }

    #[test]
    fn a_gate_is_kept_as_given_one_object_or_a_list() {
        let one = parse_input(json!({"sessionId": "s", "gate": {"command": "true"}})).expect("ok");
        assert_eq!(one.gates().len(), 1);
        assert_eq!(one.gate_field(0), "gate");
        let list =
            parse_input(json!({"sessionId": "s", "gate": [{"command": "true"}]})).expect("ok");
        assert_eq!(list.gate_field(0), "gate[0]");
        assert_eq!(
            serde_json::to_value(&list).expect("encodes")["gate"],
            json!([{"command": "true"}])
        );
        assert_eq!(
            parse_input(json!({"sessionId": "s", "watchFrom": 7}))
                .expect("ok")
                .watch_from,
            Some(WatchFrom::Cursor(7))
        );
    }
}

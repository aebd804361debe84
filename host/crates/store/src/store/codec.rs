//! The typed JSON columns of the store: each is decoded once, when its row
//! is read, into its `model` type, and encoded in the same place when the
//! row is written. The plain JSON columns (a list of ids, a session's
//! argv, an event's payload) and an event row's published JSON are read
//! here too: this is the store's one place that reads JSON.
//!
//! It owns the strictness of a decode: the JSON must be valid, an object
//! where the type is one (serde would read `[]` as a struct of its
//! defaults: a spec with no gate), and then whatever the type adds (a
//! stored spec is checked as strictly as an attach checks one; a plan of a
//! newer version is refused). A column that does not decode is an error
//! naming why, which the row's reader records as its `RowDamage`: never a
//! default. An encode that fails is an error, never `null`. It must never
//! read or write SQL itself.

use super::rows::{EventRow, RowDamage};
use super::{StoreError, StoreResult};
use crate::model::as_given::AsGiven;
use crate::model::attach::{AttachInput, check_stored, not_an_object};
use crate::model::chain::ChainRecord;
use crate::model::event::Event;
use crate::model::plan::{CommitPlan, PLAN_VERSION, Prepared};
use crate::model::report::RunReport;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A type stored as a JSON column.
pub(crate) trait Column: Serialize + DeserializeOwned {
    /// What the JSON must be before it is read as this type: an object
    /// unless the type says otherwise.
    fn check_json(json: &Value) -> Result<(), String> {
        if json.is_object() {
            Ok(())
        } else {
            Err("the wrong shape: not a JSON object".into())
        }
    }

    /// What the value must be once read (beyond its serde shape).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl Column for AttachInput {
    fn check_json(json: &Value) -> Result<(), String> {
        match not_an_object(json) {
            Some(at) => Err(format!("the wrong shape: {at} is not a JSON object")),
            None => Ok(()),
        }
    }

    fn check(&self) -> Result<(), String> {
        check_stored(self).map_err(|e| format!("the wrong shape: {e}"))
    }
}

impl Column for CommitPlan {
    fn check(&self) -> Result<(), String> {
        if self.version > PLAN_VERSION {
            return Err(format!(
                "version {} was written by a newer gatehost (this one knows {PLAN_VERSION})",
                self.version
            ));
        }
        Ok(())
    }
}

impl Column for AsGiven<AttachInput> {}
impl Column for RunReport {}
impl Column for crate::model::routine::RoutineSpec {}
impl Column for crate::model::routine::RunState {}
impl Column for crate::model::routine::RunReason {
    /// A name or a person's words: a JSON string.
    fn check_json(json: &Value) -> Result<(), String> {
        if json.is_string() {
            Ok(())
        } else {
            Err("the wrong shape: not a JSON string".into())
        }
    }
}
impl Column for Prepared {}
impl Column for ChainRecord {}

/// Decodes a column's text as a `T`, strictly; the error says why.
pub(crate) fn decode<T: Column>(text: &str) -> Result<T, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    T::check_json(&json)?;
    let v = T::deserialize(&json).map_err(|e| {
        format!(
            "the wrong shape: {}",
            crate::model::as_given::readable(&e.to_string())
        )
    })?;
    v.check()?;
    Ok(v)
}

/// Decodes a nullable column: SQL NULL and JSON `null` are `None`.
pub(crate) fn decode_opt<T: Column>(text: Option<&str>) -> Result<Option<T>, String> {
    match text {
        None => Ok(None),
        Some(t) if t.trim() == "null" => Ok(None),
        Some(t) => decode(t).map(Some),
    }
}

/// Encodes a column; a value that does not encode is an error.
pub(crate) fn encode<T: Column>(column: &'static str, v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Encode {
        column,
        message: e.to_string(),
    })
}

/// Encodes a nullable column (`None` is SQL NULL).
pub(crate) fn encode_opt<T: Column>(
    column: &'static str,
    v: Option<&T>,
) -> StoreResult<Option<String>> {
    v.map(|v| encode(column, v)).transpose()
}

/// Encodes a column holding plain JSON (a list of session ids, an argv);
/// a value that does not encode is an error, never an empty text.
pub(super) fn encode_plain<T: Serialize + ?Sized>(
    column: &'static str,
    v: &T,
) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Encode {
        column,
        message: e.to_string(),
    })
}

/// Decodes a column holding plain JSON of type `T` (a list of session
/// ids), NULL being missing; the error says why.
pub(super) fn decode_plain<T: DeserializeOwned>(text: Option<&str>) -> Result<T, String> {
    let json: Value =
        serde_json::from_str(text.ok_or("missing")?).map_err(|e| format!("not valid JSON: {e}"))?;
    T::deserialize(&json).map_err(|e| format!("the wrong shape: {e}"))
}

/// Decodes a session's `command` (an argv; NULL or `null`: none, an
/// empty list is refused).
pub(super) fn decode_argv(text: Option<&str>) -> Result<Option<Vec<String>>, String> {
    let Some(text) = text else { return Ok(None) };
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    if json.is_null() {
        return Ok(None);
    }
    match Vec::<String>::deserialize(&json) {
        Ok(argv) if !argv.is_empty() => Ok(Some(argv)),
        Ok(_) => Err("the wrong shape: an empty argv".into()),
        Err(e) => Err(format!("the wrong shape: {e}")),
    }
}

/// An event row's payload, read as a JSON object (not yet its event).
pub(super) struct Payload(Value);

/// Reads an event row's `payload`: a JSON object, else why not.
pub(super) fn decode_payload(text: Option<&str>) -> Result<Payload, String> {
    let json: Value =
        serde_json::from_str(text.ok_or("missing")?).map_err(|e| format!("not valid JSON: {e}"))?;
    if json.is_object() {
        Ok(Payload(json))
    } else {
        Err("the wrong shape: not a JSON object".into())
    }
}

/// The event of kind `kind` with `payload`: an event whose row is
/// `damaged` (or whose payload did not read, `null` then) is kept as
/// `Unknown`, not decoded.
pub(super) fn decode_event(kind: String, payload: Option<Payload>, damaged: bool) -> Event {
    match payload {
        Some(Payload(p)) if !damaged => Event::decode(&kind, p),
        Some(Payload(payload)) => Event::Unknown { kind, payload },
        None => Event::Unknown {
            kind,
            payload: Value::Null,
        },
    }
}

/// An [`EventRow`] as published.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventWire<K, P> {
    cursor: i64,
    at: i64,
    #[serde(rename = "type")]
    kind: K,
    session_id: Option<String>,
    policy_id: Option<String>,
    payload: P,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    damage: Option<RowDamage>,
}

impl Serialize for EventRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let payload = self.event.payload().map_err(serde::ser::Error::custom)?;
        EventWire {
            cursor: self.cursor,
            at: self.at,
            kind: self.kind(),
            session_id: self.session_id.clone(),
            policy_id: self.policy_id.clone(),
            payload,
            host: self.host.clone(),
            damage: self.damage.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for EventRow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = EventWire::<String, Value>::deserialize(d)?;
        Ok(EventRow {
            cursor: w.cursor,
            at: w.at,
            // A damaged row's payload is `null`: kept, not decoded.
            event: if w.damage.is_some() {
                Event::Unknown {
                    kind: w.kind,
                    payload: w.payload,
                }
            } else {
                Event::decode(&w.kind, w.payload)
            },
            session_id: w.session_id,
            policy_id: w.policy_id,
            host: w.host,
            damage: w.damage,
        })
    }
}

/// The decodes of each row's columns (`row`: the reads of the row), for
/// tests that count them: a read decodes each stored column once, and
/// nothing decodes one again. Keyed by row id: tests run in parallel,
/// each with rows of its own.
#[cfg(any(test, feature = "test-support"))]
pub mod counter {
    use std::collections::HashMap;
    use std::sync::Mutex;

    type Counts = HashMap<(String, &'static str), usize>;
    static DECODES: Mutex<Option<Counts>> = Mutex::new(None);

    pub(crate) fn note(row: &str, column: &'static str) {
        let mut d = DECODES.lock().unwrap_or_else(|p| p.into_inner());
        *d.get_or_insert_with(HashMap::new)
            .entry((row.to_string(), column))
            .or_default() += 1;
    }

    /// The decodes of `row`'s `column` so far.
    pub fn decodes(row: &str, column: &'static str) -> usize {
        let d = DECODES.lock().unwrap_or_else(|p| p.into_inner());
        d.as_ref()
            .and_then(|d| d.get(&(row.to_string(), column)).copied())
            .unwrap_or(0)
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;

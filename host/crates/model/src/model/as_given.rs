//! A value parsed from JSON that keeps the JSON as it was given: the
//! parsed value is what the host acts on, the JSON is what it stores and
//! shows (a gate object stays an object, a list a list, a field given at
//! its default stays given). It owns the rule that a field parsed this way
//! names its own errors; it must never decide what a value means.

use super::Invalid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a type is read from the JSON it keeps: an error names the field
/// from the object that holds it (`gate[0].command`).
pub trait FromJson: Sized {
    /// `Self` read from `v`; an error names the field from `v`'s object down.
    fn from_json(v: &Value) -> Result<Self, Invalid>;
}

/// `T` parsed from `json`, which it serialises back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct AsGiven<T> {
    parsed: T,
    json: Value,
}

impl<T: FromJson> AsGiven<T> {
    /// Parses `json`.
    pub fn parse(json: Value) -> Result<Self, Invalid> {
        Ok(AsGiven {
            parsed: T::from_json(&json)?,
            json,
        })
    }
}

impl<T> AsGiven<T> {
    /// The JSON as given.
    pub fn json(&self) -> &Value {
        &self.json
    }
}

impl<T> std::ops::Deref for AsGiven<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.parsed
    }
}

impl<T> Serialize for AsGiven<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<'de, T: FromJson> Deserialize<'de> for AsGiven<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = Value::deserialize(d)?;
        AsGiven::parse(json).map_err(|e| serde::de::Error::custom(tagged(&e.field, &e.message)))
    }
}

const TAG: char = '\u{1f}';

/// A serde error message that carries the field it names, relative to the
/// object holding the value that failed: [`untag`] reads it back.
pub(super) fn tagged(field: &str, message: &str) -> String {
    format!("{TAG}{field}{TAG}{message}")
}

/// The field and message of a `tagged` serde error at `path` (the
/// value's own path, `next.gate`): the field is put under the object that
/// holds it (`next.` + `gate[0].command`). `None` for any other error.
pub fn untag(path: &str, message: &str) -> Option<Invalid> {
    let rest = message.strip_prefix(TAG)?;
    let (field, message) = rest.split_once(TAG)?;
    let holder = path.rsplit_once('.').map_or("", |(h, _)| h);
    Some(Invalid {
        field: if holder.is_empty() {
            field.to_string()
        } else {
            format!("{holder}.{field}")
        },
        message: message.to_string(),
    })
}

/// `message` for a person: a `tagged` field shown as `field: why`.
pub fn readable(message: &str) -> String {
    match message.strip_prefix(TAG).and_then(|r| r.split_once(TAG)) {
        Some((field, why)) => format!("{field}: {why}"),
        None => message.to_string(),
    }
}

//! The one codec between an [`Event`] and its stored and published form:
//! a kind and a JSON object payload.

use super::{
    ConfigEvent, HookEvent, HostEvent, PasskeyEvent, SessionEvent, StandingEvent, TokenEvent,
    WatchdogEvent,
};
use super::{Event, PolicyChange, PolicyEvent, PolicyHead, ReviewChange, ReviewEvent};
use super::{RoutineEvent, RoutineKind, RoutinePayload};
use serde::Deserialize;
use serde_json::Value;

/// A family of events whose kinds each carry one payload struct: the
/// enum, its `KINDS` (in order) and `kind()`, from one list, so the names
/// and the variants cannot drift apart.
macro_rules! family {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident($payload:ty) = $kind:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $($(#[$vm])* $variant($payload),)*
        }

        impl $name {
            /// Every kind of the family, in order.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];

            /// Its kind, as stored and published.
            pub fn kind(&self) -> &'static str {
                match self {
                    $($name::$variant(_) => $kind,)*
                }
            }

            pub(super) fn encode(&self) -> Result<serde_json::Value, serde_json::Error> {
                match self {
                    $($name::$variant(p) => serde_json::to_value(p),)*
                }
            }

            /// `None`: not a kind of this family.
            pub(super) fn decode(
                kind: &str,
                v: &serde_json::Value,
            ) -> Option<Result<Self, serde_json::Error>> {
                use serde::Deserialize;
                match kind {
                    $($kind => Some(<$payload>::deserialize(v).map($name::$variant)),)*
                    _ => None,
                }
            }
        }
    };
}

/// An event that cannot be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The stored payload of `kind` is not JSON at all.
    #[error("the payload of a {kind} event is not JSON: {source}")]
    NotJson {
        /// The event's kind, as stored.
        kind: String,
        /// The JSON parser's error.
        source: serde_json::Error,
    },
    /// The payload could not be encoded (a payload struct that does not
    /// serialise to an object).
    #[error("the payload of a {kind} event does not encode: {message}")]
    Encode {
        /// The event's kind.
        kind: String,
        /// The serialiser's error.
        message: String,
    },
}

impl Event {
    /// Its payload, as stored and published (a JSON object).
    pub fn payload(&self) -> Result<Value, EventError> {
        let err = |e: serde_json::Error| EventError::Encode {
            kind: self.kind().to_string(),
            message: e.to_string(),
        };
        match self {
            Event::Session(e) => e.encode().map_err(err),
            Event::Watchdog(e) => e.encode().map_err(err),
            Event::Policy(e) => self.with_head(&e.head, e.change.encode().map_err(err)?),
            Event::Review(e) => self.with_head(&e.head, e.change.encode().map_err(err)?),
            Event::Routine(e) => serde_json::to_value(&e.payload).map_err(err),
            Event::Standing(e) => e.encode().map_err(err),
            Event::Passkey(e) => e.encode().map_err(err),
            Event::Config(e) => e.encode().map_err(err),
            Event::Host(e) => e.encode().map_err(err),
            Event::Tokens(e) => e.encode().map_err(err),
            Event::Hook(e) => e.encode().map_err(err),
            Event::Unknown { payload, .. } => Ok(payload.clone()),
        }
    }

    /// [`Event::payload`] as the text the store keeps.
    pub fn payload_text(&self) -> Result<String, EventError> {
        Ok(self.payload()?.to_string())
    }

    /// The head's fields, then the kind's own (which never name the same).
    fn with_head(&self, head: &PolicyHead, own: Value) -> Result<Value, EventError> {
        let encode = |message: String| EventError::Encode {
            kind: self.kind().to_string(),
            message,
        };
        let Value::Object(mut out) =
            serde_json::to_value(head).map_err(|e| encode(e.to_string()))?
        else {
            return Err(encode("the policy head is not an object".into()));
        };
        let Value::Object(own) = own else {
            return Err(encode("the payload is not an object".into()));
        };
        out.extend(own);
        Ok(Value::Object(out))
    }

    /// The event stored as `kind` with the payload `text`; an error only
    /// when `text` is not JSON (the store's damaged row).
    pub fn decode_text(kind: &str, text: &str) -> Result<Event, EventError> {
        let payload: Value = serde_json::from_str(text).map_err(|source| EventError::NotJson {
            kind: kind.to_string(),
            source,
        })?;
        Ok(Event::decode(kind, payload))
    }

    /// The event stored as `kind` with `payload`. A kind this build does
    /// not know, or a payload that does not decode into its kind's struct
    /// exactly (what would be published again must be what was stored),
    /// is [`Event::Unknown`], logged.
    pub fn decode(kind: &str, payload: Value) -> Event {
        let typed = match typed(kind, &payload) {
            None => {
                tracing::debug!(kind, "an event of a kind this build does not know");
                return unknown(kind, payload);
            }
            Some(Err(e)) => {
                tracing::warn!(kind, error = %e, "an event's payload does not decode; kept as stored");
                return unknown(kind, payload);
            }
            Some(Ok(event)) => event,
        };
        match typed.payload() {
            Ok(back) if back == payload => typed,
            Ok(_) => {
                tracing::warn!(
                    kind,
                    "an event's payload has fields its type does not know; kept as stored"
                );
                unknown(kind, payload)
            }
            Err(e) => {
                tracing::warn!(kind, error = %e, "an event's payload does not encode again; kept as stored");
                unknown(kind, payload)
            }
        }
    }
}

impl Event {
    /// The string fields among `keys` its published payload holds, in the
    /// order of `keys`: what a one-line view of any event (a kind it does
    /// not know too) shows. Display only: a reader that acts on an event
    /// matches its type.
    pub fn said<'k>(&self, keys: &[&'k str]) -> Vec<(&'k str, String)> {
        let payload = match self.payload() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(kind = self.kind(), error = %e, "an event does not encode");
                return Vec::new();
            }
        };
        keys.iter()
            .filter_map(|k| {
                payload
                    .get(*k)
                    .and_then(Value::as_str)
                    .map(|v| (*k, v.to_string()))
            })
            .collect()
    }
}

fn unknown(kind: &str, payload: Value) -> Event {
    Event::Unknown {
        kind: kind.to_string(),
        payload,
    }
}

/// The typed event, `None` for a kind no family has.
fn typed(kind: &str, v: &Value) -> Option<Result<Event, serde_json::Error>> {
    if let Some(r) = SessionEvent::decode(kind, v) {
        return Some(r.map(Event::Session));
    }
    if let Some(r) = WatchdogEvent::decode(kind, v) {
        return Some(r.map(Event::Watchdog));
    }
    if let Some(r) = PolicyChange::decode(kind, v) {
        return Some(r.and_then(|change| {
            let head = PolicyHead::deserialize(v)?;
            Ok(Event::Policy(PolicyEvent { head, change }))
        }));
    }
    if let Some(r) = ReviewChange::decode(kind, v) {
        return Some(r.and_then(|change| {
            let head = PolicyHead::deserialize(v)?;
            Ok(Event::Review(ReviewEvent { head, change }))
        }));
    }
    if let Some(kind) = RoutineKind::parse(kind) {
        return Some(
            RoutinePayload::deserialize(v)
                .map(|payload| Event::Routine(RoutineEvent { kind, payload })),
        );
    }
    if let Some(r) = StandingEvent::decode(kind, v) {
        return Some(r.map(Event::Standing));
    }
    if let Some(r) = PasskeyEvent::decode(kind, v) {
        return Some(r.map(Event::Passkey));
    }
    if let Some(r) = HookEvent::decode(kind, v) {
        return Some(r.map(Event::Hook));
    }
    if let Some(r) = HostEvent::decode(kind, v) {
        return Some(r.map(Event::Host));
    }
    if let Some(r) = TokenEvent::decode(kind, v) {
        return Some(r.map(Event::Tokens));
    }
    ConfigEvent::decode(kind, v).map(|r| r.map(Event::Config))
}

/// A field that is absent, present as `null`, or present with a value
/// (`Option<Option<T>>`, with `skip_serializing_if = "Option::is_none"`
/// and `default`).
pub(super) mod present {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

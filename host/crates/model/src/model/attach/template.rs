//! An attach body without its session, kept as given: a routine step's
//! `policy` and a standing policy's template as submitted. It is parsed
//! where it is checked (a routine's start, a standing policy's add) and
//! where it attaches, so a bad one is refused there, naming its field. It
//! owns how a session is put into it; it must never check anything a
//! session, the runner or the store decides.

use super::{AttachInput, Invalid, parse_input, request_digest};
use crate::model::as_given::AsGiven;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A `POST /v1/policies` body naming no session, as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Template(Value);

/// Any JSON, as its schema says (it is checked where it is parsed).
impl JsonSchema for Template {
    fn inline_schema() -> bool {
        Value::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        Value::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        Value::schema_id()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Value::json_schema(g)
    }
}

impl From<Value> for Template {
    fn from(json: Value) -> Self {
        Template(json)
    }
}

impl Template {
    /// The JSON as given.
    pub fn json(&self) -> &Value {
        &self.0
    }

    /// Whether it is a JSON object (a body of any other kind is refused
    /// when it is parsed).
    pub fn is_object(&self) -> bool {
        self.0.is_object()
    }

    /// The session field it names itself (`sessionId`, `sessionIds`),
    /// when it is an object that names one.
    pub fn named_session(&self) -> Option<&'static str> {
        let o = self.0.as_object()?;
        ["sessionId", "sessionIds"]
            .into_iter()
            .find(|f| o.contains_key(*f))
    }

    /// Parsed as it is given, kept as given (errors name the field).
    pub fn parse(&self) -> Result<AsGiven<AttachInput>, Invalid> {
        AsGiven::parse(self.0.clone())
    }

    /// The attach input of this body on `session` (errors name the field,
    /// as an attach's do), with the digest of that request.
    pub fn for_session(&self, session: &str) -> Result<(AttachInput, String), Invalid> {
        let mut body = self.0.clone();
        if let Some(o) = body.as_object_mut() {
            o.insert("sessionId".into(), session.into());
        }
        let digest = request_digest(&body);
        Ok((parse_input(body)?, digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_takes_its_session_where_it_attaches() {
        let t = Template::from(json!({"gate": {"command": "true"}}));
        assert_eq!(t.named_session(), None);
        let (input, digest) = t.for_session("s1").expect("parses");
        assert_eq!(input.members(), ["s1"]);
        // The digest is of the body with its session: one per session.
        assert_eq!(t.for_session("s1").expect("parses").1, digest);
        assert_ne!(t.for_session("s2").expect("parses").1, digest);
        assert_eq!(
            serde_json::to_value(&t).expect("encodes"),
            json!({"gate": {"command": "true"}})
        );
        let named = Template::from(json!({"sessionIds": ["x"]}));
        assert_eq!(named.named_session(), Some("sessionIds"));
        let e = Template::from(json!({"gate": {"command": ""}}))
            .for_session("s1")
            .expect_err("refused");
        assert_eq!(e.field, "gate.command");
        let list = Template::from(json!([1]));
        assert_eq!((list.is_object(), list.named_session()), (false, None));
    }
}

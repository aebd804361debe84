//! The `review` field of an attach (a review chain: `{reviewer,
//! repairer?, maxCycles}`) and its checks. It owns the field's shape and
//! what the reviewer parses to; it must never run a reviewer or decide a
//! chain (`engine::chain`, `engine::review`).

use super::{AttachInput, Invalid, invalid};
use crate::gate::spec::{GateSpec, Kind, parse_gate};
use crate::model::as_given::{AsGiven, FromJson, tagged};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Reviews before a chain escalates, when `maxCycles` is not given.
pub const DEFAULT_MAX_CYCLES: u32 = 5;

/// A review chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReviewInput {
    /// Who reviews a change that passed the gate: a judge gate object
    /// (`{"judge": {…}}`, SHIP for PASS) or a registered session
    /// (`{"session": ID, "prompt"?: RUBRIC}`, prompted with the rubric and
    /// the diff; its last `VERDICT: SHIP|BLOCK` line decides).
    pub reviewer: Reviewer,
    /// The session nudged with a BLOCK's findings (one of the policy's
    /// sessions; default: its first, the author).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repairer: Option<String>,
    /// BLOCKs before the chain escalates (default 5; at most `[daemon]
    /// max_chain_depth`, counted with `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_cycles: Option<u32>,
}

/// The rubric of a session reviewer given none.
pub const DEFAULT_RUBRIC: &str =
    "Review this change for correctness, tests and clarity. List what must be fixed, if anything.";

/// The most bytes of a session reviewer's rubric.
pub const MAX_RUBRIC: usize = 16 * 1024;

/// A reviewer: `{"judge": {…}}` or `{"session": ID, "prompt"?: RUBRIC}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Reviewer {
    /// A judge gate: its verdict PASS is SHIP, FAIL (or no verdict) BLOCK.
    Judge(#[schemars(with = "crate::gate::spec::JudgeWrapper")] Box<AsGiven<GateSpec>>),
    /// A session, prompted with the rubric and the diff.
    Session(SessionReviewer),
}

/// A session reviewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionReviewer {
    /// The reviewer's session id.
    pub session: String,
    /// The rubric (a default one asks for a review of the change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

impl SessionReviewer {
    /// The rubric it is prompted with.
    pub fn rubric(&self) -> &str {
        self.prompt.as_deref().unwrap_or(DEFAULT_RUBRIC)
    }
}

impl FromJson for GateSpec {
    fn from_json(v: &Value) -> Result<Self, Invalid> {
        parse_gate(v.clone(), "reviewer").map_err(|e| invalid(e.field, e.message))
    }
}

impl FromJson for Reviewer {
    /// Errors name `reviewer` (the field of the review object).
    fn from_json(v: &Value) -> Result<Self, Invalid> {
        let field = "reviewer";
        match v {
            Value::Object(map) if map.contains_key("session") => {
                if let Some(k) = map.keys().find(|k| *k != "session" && *k != "prompt") {
                    return Err(invalid(
                        format!("{field}.{k}"),
                        "a session reviewer is {\"session\": ID, \"prompt\"?: RUBRIC}",
                    ));
                }
                let prompt = match map.get("prompt") {
                    None => None,
                    Some(Value::String(p)) if p.len() <= MAX_RUBRIC => Some(p.clone()),
                    Some(Value::String(p)) => {
                        return Err(invalid(
                            format!("{field}.prompt"),
                            format!("{} bytes: at most {MAX_RUBRIC} are accepted", p.len()),
                        ));
                    }
                    Some(_) => return Err(invalid(format!("{field}.prompt"), "must be a string")),
                };
                match map.get("session") {
                    Some(Value::String(id)) if !id.is_empty() => {
                        Ok(Reviewer::Session(SessionReviewer {
                            session: id.clone(),
                            prompt,
                        }))
                    }
                    _ => Err(invalid(format!("{field}.session"), "must be a session id")),
                }
            }
            Value::Object(map) if map.contains_key("judge") => {
                let gate = AsGiven::<GateSpec>::parse(v.clone())?;
                match &gate.kind {
                    Kind::Judge(_) => Ok(Reviewer::Judge(Box::new(gate))),
                    _ => Err(invalid(field, "must be a judge gate object or a session")),
                }
            }
            _ => Err(invalid(
                field,
                "must be a judge gate object ({\"judge\": {…}}) or {\"session\": ID}",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Reviewer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Reviewer::from_json(&v).map_err(|e| serde::de::Error::custom(tagged(&e.field, &e.message)))
    }
}

impl ReviewInput {
    /// The review's `maxCycles`, else [`DEFAULT_MAX_CYCLES`].
    pub fn max_cycles(&self) -> u32 {
        self.max_cycles.unwrap_or(DEFAULT_MAX_CYCLES)
    }

    /// The repairer: the one named, or the policy's first member.
    pub fn repairer_of(&self, members: &[String]) -> Option<String> {
        self.repairer.clone().or_else(|| members.first().cloned())
    }
}

/// The checks of `input.review` that need nothing but the input: the
/// reviewer parses, `maxCycles` is at least 1, the repairer is one of the
/// members (when the members are named).
pub(super) fn check_review(input: &AttachInput, at: &str) -> Result<(), Invalid> {
    let Some(r) = &input.review else {
        return Ok(());
    };
    let reviewer = &r.reviewer;
    if r.max_cycles == Some(0) {
        return Err(invalid(
            format!("{at}review.maxCycles"),
            "at least 1 (the number of reviews before the chain escalates)",
        ));
    }
    let members = input.members();
    if let Some(rep) = &r.repairer
        && !members.is_empty()
        && !members.contains(rep)
    {
        return Err(invalid(
            format!("{at}review.repairer"),
            format!(
                "'{rep}' is not one of the policy's sessions (the repairer's turn-end is gated: it must be a member)"
            ),
        ));
    }
    if let Reviewer::Session(SessionReviewer { session: id, .. }) = reviewer
        && members.contains(id)
    {
        return Err(invalid(
            format!("{at}review.reviewer.session"),
            format!(
                "'{id}' is one of the policy's sessions: an author does not review its own work"
            ),
        ));
    }
    Ok(())
}

/// What one attach may lead to without a person: its `next` links and
/// every `review.maxCycles` of its chain, counted together; refused past
/// `max` (`[daemon] max_chain_depth`), naming the field where the count
/// crossed it.
pub fn check_depth(input: &AttachInput, max: u32) -> Result<(), Invalid> {
    let mut count: u64 = 0;
    let mut at = String::new();
    let mut cur = Some(input);
    let mut first = true;
    while let Some(i) = cur {
        if !first {
            count += 1;
            if count > u64::from(max) {
                return Err(invalid(
                    at.trim_end_matches('.').to_string(),
                    format!(
                        "the chain's `next` links and review cycles come to more than [daemon] max_chain_depth = {max}"
                    ),
                ));
            }
        }
        if let Some(r) = &i.review {
            count += u64::from(r.max_cycles());
            if count > u64::from(max) {
                return Err(invalid(
                    format!("{at}review.maxCycles"),
                    format!(
                        "{} cycles bring the chain's `next` links and review cycles to {count}: more than [daemon] max_chain_depth = {max}",
                        r.max_cycles()
                    ),
                ));
            }
        }
        first = false;
        at.push_str("next.");
        cur = i.next.as_deref();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> AttachInput {
        super::super::parse_input(v).expect("parses")
    }

    #[test]
    fn reviewers_parse_and_bad_ones_name_the_field() {
        let i = input(json!({"sessionId": "a", "review": {"reviewer": {"session": "r"}}}));
        let r = i.review.as_ref().expect("review");
        assert_eq!(
            r.reviewer,
            Reviewer::Session(SessionReviewer {
                session: "r".into(),
                prompt: None
            })
        );
        assert!(matches!(&r.reviewer, Reviewer::Session(s) if s.rubric() == DEFAULT_RUBRIC));
        // Shown as given.
        assert_eq!(
            serde_json::to_value(r).expect("encodes"),
            json!({"reviewer": {"session": "r"}})
        );
        assert_eq!(r.max_cycles(), 5);
        assert_eq!(r.repairer_of(&["a".into()]), Some("a".into()));
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"judge": {"adapter": "j", "prompt": "p"}}, "maxCycles": 2}}),
        );
        assert!(matches!(
            i.review.as_ref().map(|r| &r.reviewer),
            Some(Reviewer::Judge(_))
        ));
        for (bad, field) in [
            (json!({"command": "true"}), "review.reviewer"),
            (json!({"session": 3}), "review.reviewer.session"),
            (json!({"session": "r", "x": 1}), "review.reviewer.x"),
            (
                json!({"session": "r", "prompt": 1}),
                "review.reviewer.prompt",
            ),
            (json!("r"), "review.reviewer"),
        ] {
            match super::super::parse_input(json!({"sessionId": "a", "review": {"reviewer": bad}}))
            {
                Err(Invalid { field: f, .. }) => assert_eq!(f, field, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let i = input(json!({"sessionId": "a", "review": {"reviewer": {"session": "a"}}}));
        assert!(
            matches!(check_review(&i, ""), Err(Invalid { field, .. }) if field == "review.reviewer.session")
        );
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"session": "r"}, "repairer": "b"}}),
        );
        assert!(
            matches!(check_review(&i, ""), Err(Invalid { field, .. }) if field == "review.repairer")
        );
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"session": "r"}, "maxCycles": 0}}),
        );
        assert!(
            matches!(check_review(&i, ""), Err(Invalid { field, .. }) if field == "review.maxCycles")
        );
    }

    #[test]
    fn next_links_and_review_cycles_count_together_against_the_cap() {
        let review = json!({"reviewer": {"session": "r"}, "maxCycles": 3});
        let i = input(
            json!({"sessionId": "a", "review": review, "next": {"review": review, "next": {}}}),
        );
        // 3 + 1 + 3 + 1 = 8.
        assert!(check_depth(&i, 8).is_ok());
        match check_depth(&i, 7) {
            Err(Invalid { field, .. }) => assert_eq!(field, "next.next"),
            other => panic!("{other:?}"),
        }
        match check_depth(&i, 6) {
            Err(Invalid { field, .. }) => assert_eq!(field, "next.review.maxCycles"),
            other => panic!("{other:?}"),
        }
        match check_depth(&i, 2) {
            Err(Invalid { field, .. }) => assert_eq!(field, "review.maxCycles"),
            other => panic!("{other:?}"),
        }
    }
}

//! The `review` field of an attach (a review chain: `{reviewer,
//! repairer?, maxCycles}`) and its checks. It owns the field's shape and
//! what the reviewer parses to; it must never run a reviewer or decide a
//! chain (`engine::chain`, `engine::review`).

use super::{AttachInput, invalid};
use crate::engine::EngineError;
use crate::gate::spec::{GateSpec, Kind, parse_gate};
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
    #[schemars(with = "ReviewerSchema")]
    pub reviewer: Value,
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

/// `{"judge": {…}}` or `{"session": ID}`, for the schema only.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ReviewerSchema {
    Judge(crate::gate::spec::JudgeWrapper),
    Session(SessionReviewer),
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SessionReviewer {
    session: String,
    /// The rubric (a default one asks for a review of the change).
    prompt: Option<String>,
}

/// The rubric of a session reviewer given none.
pub const DEFAULT_RUBRIC: &str =
    "Review this change for correctness, tests and clarity. List what must be fixed, if anything.";

/// The most bytes of a session reviewer's rubric.
pub const MAX_RUBRIC: usize = 16 * 1024;

/// A reviewer, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reviewer {
    /// A judge gate: its verdict PASS is SHIP, FAIL (or no verdict) BLOCK.
    Judge(Box<GateSpec>),
    /// A session, prompted with the rubric and the diff.
    Session { id: String, rubric: String },
}

impl ReviewInput {
    pub fn max_cycles(&self) -> u32 {
        self.max_cycles.unwrap_or(DEFAULT_MAX_CYCLES)
    }

    /// The reviewer; an error names `at` + `review.reviewer`.
    pub fn reviewer(&self, at: &str) -> Result<Reviewer, EngineError> {
        let field = format!("{at}review.reviewer");
        match &self.reviewer {
            Value::Object(map) if map.contains_key("session") => {
                if let Some(k) = map.keys().find(|k| *k != "session" && *k != "prompt") {
                    return Err(invalid(
                        format!("{field}.{k}"),
                        "a session reviewer is {\"session\": ID, \"prompt\"?: RUBRIC}",
                    ));
                }
                let rubric = match map.get("prompt") {
                    None => DEFAULT_RUBRIC.to_string(),
                    Some(Value::String(p)) if p.len() <= MAX_RUBRIC => p.clone(),
                    Some(Value::String(p)) => {
                        return Err(invalid(
                            format!("{field}.prompt"),
                            format!("{} bytes: at most {MAX_RUBRIC} are accepted", p.len()),
                        ));
                    }
                    Some(_) => return Err(invalid(format!("{field}.prompt"), "must be a string")),
                };
                match map.get("session") {
                    Some(Value::String(id)) if !id.is_empty() => Ok(Reviewer::Session {
                        id: id.clone(),
                        rubric,
                    }),
                    _ => Err(invalid(format!("{field}.session"), "must be a session id")),
                }
            }
            Value::Object(map) if map.contains_key("judge") => {
                match parse_gate(self.reviewer.clone(), &field)
                    .map_err(|e| invalid(e.field, e.message))?
                {
                    g @ GateSpec {
                        kind: Kind::Judge(_),
                        ..
                    } => Ok(Reviewer::Judge(Box::new(g))),
                    _ => Err(invalid(field, "must be a judge gate object or a session")),
                }
            }
            _ => Err(invalid(
                field,
                "must be a judge gate object ({\"judge\": {…}}) or {\"session\": ID}",
            )),
        }
    }

    /// The repairer: the one named, or the policy's first member.
    pub fn repairer_of(&self, members: &[String]) -> Option<String> {
        self.repairer.clone().or_else(|| members.first().cloned())
    }
}

/// The checks of `input.review` that need nothing but the input: the
/// reviewer parses, `maxCycles` is at least 1, the repairer is one of the
/// members (when the members are named).
pub(super) fn check_review(input: &AttachInput, at: &str) -> Result<(), EngineError> {
    let Some(r) = &input.review else {
        return Ok(());
    };
    let reviewer = r.reviewer(at)?;
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
    if let Reviewer::Session { id, .. } = &reviewer
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
pub(super) fn check_depth(input: &AttachInput, max: u32) -> Result<(), EngineError> {
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
            r.reviewer("").ok(),
            Some(Reviewer::Session {
                id: "r".into(),
                rubric: DEFAULT_RUBRIC.into()
            })
        );
        assert_eq!(r.max_cycles(), 5);
        assert_eq!(r.repairer_of(&["a".into()]), Some("a".into()));
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"judge": {"adapter": "j", "prompt": "p"}}, "maxCycles": 2}}),
        );
        assert!(matches!(
            i.review.as_ref().map(|r| r.reviewer("")),
            Some(Ok(Reviewer::Judge(_)))
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
            let i = input(json!({"sessionId": "a", "review": {"reviewer": bad}}));
            match check_review(&i, "") {
                Err(EngineError::Invalid { field: f, .. }) => assert_eq!(f, field, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let i = input(json!({"sessionId": "a", "review": {"reviewer": {"session": "a"}}}));
        assert!(
            matches!(check_review(&i, ""), Err(EngineError::Invalid { field, .. }) if field == "review.reviewer.session")
        );
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"session": "r"}, "repairer": "b"}}),
        );
        assert!(
            matches!(check_review(&i, ""), Err(EngineError::Invalid { field, .. }) if field == "review.repairer")
        );
        let i = input(
            json!({"sessionId": "a", "review": {"reviewer": {"session": "r"}, "maxCycles": 0}}),
        );
        assert!(
            matches!(check_review(&i, ""), Err(EngineError::Invalid { field, .. }) if field == "review.maxCycles")
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
            Err(EngineError::Invalid { field, .. }) => assert_eq!(field, "next.next"),
            other => panic!("{other:?}"),
        }
        match check_depth(&i, 6) {
            Err(EngineError::Invalid { field, .. }) => assert_eq!(field, "next.review.maxCycles"),
            other => panic!("{other:?}"),
        }
        match check_depth(&i, 2) {
            Err(EngineError::Invalid { field, .. }) => assert_eq!(field, "review.maxCycles"),
            other => panic!("{other:?}"),
        }
    }
}

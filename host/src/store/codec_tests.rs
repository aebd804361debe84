//! The codec's strictness, column by column: a value of the wrong shape is
//! damage naming the column (read through the store, one damaged row among
//! clean ones), never a default; values round-trip as they are shown.

use super::{decode, decode_opt, encode};
use crate::model::plan::{CommitPlan, DiffSummary, PLAN_VERSION};
use crate::store::decode::tests::damaged_policy_column as check;
use serde_json::json;

#[test]
fn a_plan_round_trips_with_its_version_and_old_plans_still_read() {
    let plan = CommitPlan {
        version: PLAN_VERSION,
        paths: vec!["a.txt".into()],
        message: "m".into(),
        fingerprint: "f".into(),
        require_human_ack: true,
        diff_summary: Some(DiffSummary::Failed { error: "e".into() }),
        snapshot: None,
        changed_after_snapshot: None,
    };
    let text = encode("plan", &plan).expect("encodes");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["version"], 1);
    assert_eq!(json["diffSummary"], json!({"error": "e"}));
    assert_eq!(decode::<CommitPlan>(&text), Ok(plan));
    // As session 6 stored it: no version.
    let old = r#"{"paths": ["a"], "message": "m", "fingerprint": "f", "requireHumanAck": false, "diffSummary": null}"#;
    let plan = decode::<CommitPlan>(old).expect("reads");
    assert_eq!(plan.version, 0);
    // Shown as stored: a null summary stays null.
    assert_eq!(
        serde_json::to_value(&plan).expect("encodes")["diffSummary"],
        serde_json::Value::Null
    );
    assert_eq!(decode_opt::<CommitPlan>(Some("null")), Ok(None));
    assert_eq!(decode_opt::<CommitPlan>(None), Ok(None));
}

#[test]
fn a_spec_is_stored_and_shown_as_given() {
    for given in [
        json!({"sessionId": "s1", "sessionIds": ["s1"], "gate": {"command": "true", "args": []}, "then": "emit", "onFail": {}, "attachedBy": "operator"}),
        json!({"sessionId": "s1", "sessionIds": ["s1"], "gate": [{"command": "true"}, {"judge": {"adapter": "a", "prompt": "p", "nonce": false}}], "then": "emit", "onFail": {}, "attachedBy": "agent", "watchFrom": "now"}),
        json!({"sessionId": "s1", "sessionIds": ["s1"], "then": "emit", "onFail": {}, "attachedBy": "operator", "watchFrom": 3,
               "review": {"reviewer": {"session": "r", "prompt": "look"}, "maxCycles": 2}}),
    ] {
        let input =
            decode::<crate::model::attach::AttachInput>(&given.to_string()).expect("decodes");
        let text = encode("spec", &input).expect("encodes");
        let shown: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(shown, given);
    }
}

#[test]
fn a_list_for_a_spec_is_damage_not_a_policy_of_defaults() {
    check("spec", "[]");
}

#[test]
fn a_spec_whose_next_or_commit_is_a_list_is_damage() {
    check(
        "spec",
        r#"{"sessionId": "s1", "sessionIds": ["s1"], "next": []}"#,
    );
    check(
        "spec",
        r#"{"sessionId": "s1", "sessionIds": ["s1"], "onFail": []}"#,
    );
}

#[test]
fn a_stored_spec_that_attach_would_refuse_is_damage() {
    for spec in [
        r#"{"sessionId": "s1", "sessionIds": ["s1"], "gate": []}"#,
        r#"{}"#,
        r#"{"sessionIds": []}"#,
        r#"{"sessionId": "s1", "then": "commit"}"#,
        r#"{"sessionId": "s1", "then": "commit", "gate": {"command": "true"}, "commit": {"paths": ["../x"], "message": "m"}}"#,
        r#"{"sessionId": "s1", "then": "commit", "commit": {"paths": ["a"], "message": "m"}}"#,
        r#"{"sessionId": "s1", "onFail": {"maxRetries": 99}}"#,
        r#"{"sessionId": "s1", "next": {"gate": []}}"#,
        r#"{"sessionId": "s1", "unknown": 1}"#,
        r#"{"sessionId": "s1", "watchFrom": "then"}"#,
        r#"{"sessionId": "s1", "review": {"reviewer": {"session": 3}}}"#,
    ] {
        check("spec", spec);
    }
}

#[test]
fn a_verdict_of_the_wrong_shape_or_invalid_json_is_damage() {
    check("verdict", "[]");
    check("verdict", r#"{"outcome": "pass"}"#);
    check("verdict", r#"{"outcome": "#);
}

#[test]
fn a_plan_of_the_wrong_shape_missing_or_invalid_json_is_damage() {
    check("plan", "[]");
    check("plan", "null");
    check("plan", r#"{"paths": 3}"#);
    check("plan", "{nope");
    check(
        "plan",
        r#"{"paths": [], "message": "m", "fingerprint": "f", "requireHumanAck": true, "version": 9}"#,
    );
}

#[test]
fn a_prepared_commit_of_the_wrong_shape_or_invalid_json_is_damage() {
    check("prepared", "[]");
    check("prepared", r#"{"commit": 3}"#);
    check("prepared", "{nope");
}

#[test]
fn a_chain_of_the_wrong_shape_is_damage() {
    check("review", "[]");
    check("review", r#"{"phase": "sleeping"}"#);
}

//! The codec's strictness, column by column: a value of the wrong shape is
//! damage naming the column (read through the store, one damaged row among
//! clean ones), never a default; values round-trip as they are shown.

use super::{decode, decode_opt, encode};
use crate::model::plan::{CommitPlan, DiffSummary, PLAN_VERSION};
use crate::store::sqlite::decode::tests::damaged_policy_column as check;
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

/// What the API shows of a policy's JSON columns is what is stored: each
/// typed column, written and read back, serialises to the JSON its column
/// holds (a gate list stays a list, a judge reviewer keeps its fields).
#[test]
fn a_policy_is_shown_as_its_columns_hold_it() {
    use crate::store::{PolicyRow, PolicyStatus, Store};
    fn typed<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("a sample of the type")
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("open");
    let mut p = PolicyRow::sample("shown", PolicyStatus::Reviewing, &["s1"]);
    p.spec = typed(json!({"sessionId": "s1", "sessionIds": ["s1"],
        "gate": [{"command": "true", "args": []}, {"wasm": {"plugin": "p"}}],
        "then": "commit", "commit": {"paths": ["a"], "message": "m", "requireHumanAck": true},
        "onFail": {"maxRetries": 1}, "attachedBy": "operator", "gateOn": "snapshot",
        "review": {"reviewer": {"judge": {"adapter": "a", "prompt": "p"}, "name": "j"}, "maxCycles": 2},
        "watchFrom": "latest", "deadline": "1h"}));
    p.plan = Some(typed(
        json!({"version": 1, "paths": ["a"], "message": "m", "fingerprint": "f",
        "requireHumanAck": true,
        "diffSummary": {"files": [{"path": "a", "kind": "modified", "added": 1, "removed": 0, "binary": false}],
                        "added": 1, "removed": 0},
        "changedAfterSnapshot": {"error": "gone"}}),
    ));
    p.verdict = Some(typed(json!({"outcome": "pass", "reason": "ok",
        "durations": {"queuedMs": 0, "runMs": 1}, "gates": []})));
    p.review = Some(typed(
        json!({"phase": "reviewing", "cycle": 1, "maxCycles": 2,
        "shipTo": "await-ack", "startedAfter": 3, "nonce": "rv-0123456789ab"}),
    ));
    store.write(|tx| tx.insert_policy(&mut p)).expect("insert");
    let read = store.policy("shown").expect("read").expect("there");
    assert_eq!(read.damage, None);
    let shown = serde_json::to_value(&read).expect("encodes");
    for column in ["spec", "plan", "verdict", "review"] {
        let text = store
            .stored_text("policies", column, "shown")
            .expect("column")
            .expect("there");
        let stored: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(shown[column], stored, "{column}");
    }
    // The gate list and the reviewer as given.
    assert_eq!(
        shown["spec"]["gate"],
        json!([{"command": "true", "args": []}, {"wasm": {"plugin": "p"}}])
    );
    assert_eq!(shown["spec"]["review"]["reviewer"]["name"], "j");
}

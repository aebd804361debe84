//! The tools' schemas against the types the daemon decodes with, the
//! operator-token refusal, and what a tool error carries.

use super::McpError;
use super::answer::{cap_strings, decode, joined};
use super::calls::poll_query;
use super::tools::{EventsPollInput, PolicyStatusInput, SESSION_MONITOR};
use crate::client::Client;
use crate::engine::attach::parse_input;
use crate::gate::spec::parse_gate;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The names serde lists as expected for an unknown field of `message`.
fn expected_names(message: &str) -> BTreeSet<String> {
    let rest = message
        .split_once("expected")
        .map_or("", |(_, rest)| rest)
        .split(" (did you mean")
        .next()
        .unwrap_or("");
    rest.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn keys(schema: &Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_attach_schema_has_exactly_the_fields_the_daemon_decodes() {
    let schema = Value::Object(super::attach_schema().expect("schema").as_ref().clone());
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    // What the daemon's decoder accepts, read from its own "unknown field"
    // error: the schema shows all of it but the host-set `attachedBy`,
    // plus the API's `idempotencyKey`.
    let err = parse_input(json!({"zzz": 1})).expect_err("unknown field");
    let crate::model::Invalid { message, .. } = err;
    let mut accepted = expected_names(&message);
    assert!(accepted.remove("attachedBy"), "{message}");
    accepted.insert("idempotencyKey".into());
    assert_eq!(keys(&schema), accepted);
    for name in [
        "sessionId",
        "sessionIds",
        "gate",
        "then",
        "commit",
        "onFail",
        "next",
        "watchFrom",
    ] {
        assert!(accepted.contains(name), "{name}");
    }
    // The gate objects' fields are the gate parser's.
    let defs = &schema["$defs"];
    let err = parse_gate(json!({"command": "true", "zzz": 1}), "").expect_err("shell");
    assert_eq!(keys(&defs["ShellGate"]), expected_names(&err.message));
    let err = parse_gate(
        json!({"judge": {"adapter": "a", "prompt": "p", "zzz": 1}}),
        "",
    )
    .expect_err("judge");
    assert_eq!(keys(&defs["JudgeGate"]), expected_names(&err.message));
    let err = parse_gate(json!({"wasm": {"plugin": "p", "zzz": 1}}), "").expect_err("wasm");
    assert_eq!(keys(&defs["WasmGate"]), expected_names(&err.message));
    assert_eq!(defs["CommitInput"]["required"], json!(["paths", "message"]));
    assert_eq!(
        defs["OnFail"]["properties"]["maxRetries"]["maximum"],
        crate::engine::attach::MAX_RETRIES_LIMIT
    );
}

#[test]
fn there_are_ten_tools_and_no_ack_policy_cancel_or_resolve() {
    let tools = super::tools().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, super::TOOL_NAMES);
    assert_eq!(names.len(), 10);
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        assert!(!t.name.contains("ack") && !t.name.contains("resolve"));
        assert!(!t.name.contains("cancel") || t.name == super::tools::ROUTINE_CANCEL);
    }
    let monitor = tools
        .iter()
        .find(|t| t.name == SESSION_MONITOR)
        .expect("monitor");
    assert_eq!(monitor.input_schema["required"], json!(["sessionId"]));
}

#[test]
fn only_the_agents_403_lets_the_server_start() {
    let body = |code: &str| json!({"error": {"code": code, "message": "m"}}).to_string();
    assert!(super::role_from_probe(403, body("operator-only").as_bytes()).is_ok());
    // The operator's token passes the operator check and is refused for
    // the missing body.
    assert!(matches!(
        super::role_from_probe(400, body("invalid").as_bytes()),
        Err(McpError::OperatorToken { .. })
    ));
    assert!(matches!(
        super::role_from_probe(201, b"{}"),
        Err(McpError::OperatorToken { .. })
    ));
    assert!(matches!(
        super::role_from_probe(401, body("unauthorized").as_bytes()),
        Err(McpError::WrongToken { .. })
    ));
    // Anything else: cannot tell, so no start.
    for (status, text) in [
        (404, body("not-found")),
        (403, body("workspace-not-allowed")),
        (502, "<html>".to_string()),
    ] {
        assert!(
            matches!(
                super::role_from_probe(status, text.as_bytes()),
                Err(McpError::CannotVerify { .. })
            ),
            "{status} {text}"
        );
    }
}

#[tokio::test]
async fn the_operator_token_file_refuses_before_any_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("operator.token");
    std::fs::write(&file, "operator-secret-0123456789\n").expect("write");
    // Nothing listens there: the refusal must come from the file alone.
    let client = Client::new("http://127.0.0.1:9", "x").expect("client");
    let err = super::check_agent_token(&client, "operator-secret-0123456789", Some(&file))
        .await
        .expect_err("refused");
    assert!(matches!(err, McpError::OperatorToken { .. }), "{err}");
    assert!(err.to_string().contains("operator"), "{err}");
    // Another token goes on to the probe, which cannot reach the daemon:
    // refused too, as unverifiable.
    let err = super::check_agent_token(&client, "agent-secret-0123456789", Some(&file))
        .await
        .expect_err("unverifiable");
    assert!(matches!(err, McpError::CannotVerify { .. }), "{err}");
}

#[test]
fn bad_arguments_name_the_field_and_the_nearest_name() {
    let args = json!({"policyID": "pol_1"});
    let Value::Object(args) = args else { panic!() };
    let err = decode::<PolicyStatusInput>(args).expect_err("misspelt");
    assert_eq!(err.code, "invalid");
    assert_eq!(err.field.as_deref(), Some("policyID"));
    assert!(err.message.contains("did you mean `policyId`"), "{err:?}");
    let err = joined("sessionIds", Some(vec!["a".into(), "b,c".into()])).expect_err("comma");
    assert_eq!(err.field.as_deref(), Some("sessionIds[1]"));
    assert_eq!(
        joined("types", Some(vec!["turn-end".into(), "passed".into()])).expect("joined"),
        Some("turn-end,passed".to_string())
    );
}

#[test]
fn long_strings_keep_their_tail() {
    let long = format!("{}END", "é".repeat(super::MAX_STRING));
    let mut v = json!({"a": [long], "b": "short"});
    cap_strings(&mut v);
    let cut = v["a"][0].as_str().expect("string");
    assert!(
        cut.starts_with('…') && cut.ends_with("END"),
        "{}",
        &cut[..40]
    );
    assert!(cut.len() < super::MAX_STRING + 40);
    assert_eq!(v["b"], "short");
}

#[test]
fn a_poll_waits_at_most_twenty_seconds_and_pages_at_most_200() {
    let q = poll_query(EventsPollInput {
        wait_ms: Some(600_000),
        session_ids: Some(vec!["s1".into(), "s2".into()]),
        ..Default::default()
    })
    .expect("query");
    assert_eq!(q.wait.as_deref(), Some("20000"));
    assert_eq!((q.since, q.limit), (Some(0), Some(50)));
    assert_eq!(q.session.as_deref(), Some("s1,s2"));
    let q = poll_query(EventsPollInput::default()).expect("query");
    assert_eq!(q.wait, None);
    for limit in [0, super::MAX_POLL_LIMIT + 1] {
        let e = poll_query(EventsPollInput {
            limit: Some(limit),
            ..Default::default()
        })
        .expect_err("out of bounds");
        assert_eq!(e.field.as_deref(), Some("limit"));
    }
}

//! Bad input to `gatehost mcp`'s tools is a tool error naming the field.

use super::*;

/// The tool error `e` names `field` and suggests `right` instead.
#[track_caller]
fn suggests(e: &Value, field: &str, right: &str) {
    assert_eq!(e["field"], field, "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("did you mean `{right}`")), "{e}");
}

#[test]
fn bad_input_is_a_tool_error_naming_the_field() {
    let (s, m, d) = setup("mcp-errors");
    git_repo(&s.ws);
    d.register("s1", &s.ws);
    let mut c = McpClient::for_agent(&s, &m, &d, None, &[]);
    c.ready();
    // A misspelt gate field: named, and the right one suggested.
    let e = c.err(
        "policy_attach",
        json!({"sessionId": "s1", "gate": {"comand": "true"}}),
    );
    assert_eq!(e["code"], "invalid", "{e}");
    suggests(&e, "gate.comand", "command");
    // A misspelt attach field.
    let e = c.err(
        "policy_attach",
        json!({"sesionId": "s1", "gate": {"command": "true"}}),
    );
    suggests(&e, "sesionId", "sessionId");
    // What only the operator may do stays refused: the token is the agent's.
    let e = c.err(
        "policy_attach",
        json!({"sessionId": "s1", "gate": {"command": "true"}, "then": "commit",
               "commit": {"paths": ["README"], "message": "m", "requireHumanAck": false}}),
    );
    assert_eq!(e["field"], "commit.requireHumanAck", "{e}");
    // A refused attach stored nothing.
    let list = c.ok("policy_list", json!({}));
    assert_eq!(list["policies"], json!([]), "{list}");
    // The other tools' arguments, and the daemon's other refusals.
    let e = c.err("policy_status", json!({"policyID": "pol_x"}));
    suggests(&e, "policyID", "policyId");
    let e = c.err("policy_status", json!({"policyId": "pol_nope"}));
    assert_eq!(e["code"], "not-found", "{e}");
    let e = c.err("session_events_poll", json!({"limit": 500}));
    assert_eq!(e["field"], "limit", "{e}");
    let e = c.err("session_events_poll", json!({"types": ["turn-ended"]}));
    assert_eq!(e["field"], "types", "{e}");
    let e = c.err("policy_list", json!({"status": ["finished"]}));
    assert_eq!(e["field"], "status", "{e}");
    let e = c.err("session_monitor", json!({"sessionId": "nobody"}));
    assert_eq!(e["code"], "not-found", "{e}");
    finish(c, d, &m);
}

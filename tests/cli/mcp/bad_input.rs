//! Bad input to `gatehost mcp`'s tools is a tool error naming the field.

use super::*;

#[test]
fn bad_input_is_a_tool_error_naming_the_field() {
    let m = marker("mcp-errors");
    let s = Scratch::new();
    git_repo(&s.ws);
    let d = daemon(&s, &s.etc.join("data"), &m);
    d.register("s1", &s.ws);
    let mut c = McpClient::start(
        &s.out,
        &m,
        &[
            ("GATEHOST_SERVER", &d.url),
            ("GATEHOST_TOKEN", &d.agent),
            (
                "GATEHOST_SESSION_KEYS",
                &d.keyring().dir().display().to_string(),
            ),
        ],
    );
    c.ready();
    // A misspelt gate field: named, and the right one suggested.
    let e = c.err(
        "policy_attach",
        json!({"sessionId": "s1", "gate": {"comand": "true"}}),
    );
    assert_eq!(e["code"], "invalid", "{e}");
    assert_eq!(e["field"], "gate.comand", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean `command`")),
        "{e}"
    );
    // A misspelt attach field.
    let e = c.err(
        "policy_attach",
        json!({"sesionId": "s1", "gate": {"command": "true"}}),
    );
    assert_eq!(e["field"], "sesionId", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean `sessionId`")),
        "{e}"
    );
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
    assert_eq!(e["field"], "policyID", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean `policyId`")),
        "{e}"
    );
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
    assert_eq!(c.close(), 0);
    drop(d);
    assert_none_left(&m);
}

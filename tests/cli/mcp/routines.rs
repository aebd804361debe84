//! Routines through `gatehost mcp`: an agent starts and cancels routines\non its own sessions only.

use super::*;

#[test]
fn an_agent_starts_and_cancels_routines_on_its_own_sessions_only() {
    let (s, m, d) = setup("mcp-routines");
    // The agent's own session (registered with its keyring), and one that
    // is not its own (registered without keeping its key).
    d.register("claude:mine", &s.ws);
    let (code, other) = d.http_keyless(
        "POST",
        "/v1/sessions",
        Some(&d.operator),
        Some(json!({"id": "someone-else", "cwd": s.ws})),
    );
    assert_eq!(code, 200, "{other}");
    let mut c = McpClient::for_agent(&s, &m, &d, Some(&s.ws), &[]);
    c.ready();
    let mine = json!({"label": "fan", "steps": [{"label": "tidy", "session": {"existing": "claude:mine"},
        "prompt": "tidy up", "onInput": {"mode": "fail"}}]});
    let run = c.ok("routine_start", mine);
    let id = run["id"].as_str().expect("id").to_string();
    assert_eq!(run["phase"], "running", "{run}");
    assert_eq!(run["steps"][0]["sessionId"], "claude:mine", "{run}");
    // Its prompt is the step-started event's message, in its session.
    let started = d
        .all_events("&types=routine:step-started")
        .into_iter()
        .find(|e| e["payload"]["routineId"] == id.as_str())
        .expect("step started");
    assert_eq!(started["sessionId"], "claude:mine", "{started}");
    let got = c.ok("routine_status", json!({"routineId": id}));
    assert_eq!(got["phase"], "running", "{got}");
    let list = c.ok("routine_list", json!({}));
    assert_eq!(list["routines"][0]["id"], id.as_str(), "{list}");
    let cancelled = c.ok("routine_cancel", json!({"routineId": id}));
    assert_eq!(cancelled["phase"], "cancelled", "{cancelled}");

    // Refused: another's session, an agent to start, a step policy; a
    // run the operator started on another's session cannot be cancelled.
    let theirs = json!({"steps": [{"label": "x", "session": {"existing": "someone-else"}}]});
    let e = c.err("routine_start", theirs.clone());
    assert_eq!(e["code"], "session-key-required", "{e}");
    let acp =
        json!({"steps": [{"label": "x", "session": {"acp": {"command": ["sh"], "cwd": s.ws}}}]});
    let e = c.err("routine_start", acp);
    assert_eq!(e["code"], "operator-only", "{e}");
    let gated = json!({"steps": [{"label": "x", "session": {"existing": "claude:mine"},
        "waitFor": "policy", "policy": {"gate": {"command": "true"}}}]});
    let e = c.err("routine_start", gated);
    assert_eq!(e["code"], "operator-only", "{e}");
    let e = c.err("routine_start", json!({"steps": [], "evil": 1}));
    assert_eq!(e["code"], "invalid", "{e}");
    let (code, run) = d.http("POST", "/v1/routines", Some(&d.operator), Some(theirs));
    assert_eq!(code, 200, "{run}");
    let theirs_id = run["id"].as_str().expect("id").to_string();
    let e = c.err("routine_cancel", json!({"routineId": theirs_id}));
    assert_eq!(e["code"], "session-key-required", "{e}");
    let (_, still) = d.http(
        "GET",
        &format!("/v1/routines/{theirs_id}"),
        Some(&d.operator),
        None,
    );
    assert_eq!(still["phase"], "running", "{still}");
    let e = c.err("routine_status", json!({"routineId": "rt_none"}));
    assert_eq!(e["code"], "not-found", "{e}");
    let e = c.err("routine_list", json!({"cancel": true}));
    assert_eq!(e["code"], "invalid", "{e}");
    finish(c, d, &m);
}

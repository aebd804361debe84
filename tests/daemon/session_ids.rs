//! Session ids an agent cannot squat, and whose hand answers a started
//! agent's permission requests, with a real daemon and the scripted ACP
//! agent (tests/support/acp-agent/agent.py). The agent holds the agent token and
//! its own sessions' keys: registering an id before the operator starts an
//! agent under it must not hand it that agent (its turn-ends, its prompts,
//! its permissions), neither for an id the operator chooses (`--id
//! reviewer`) nor for a routine step's (`<run>.s<step>.r<n>`). (That a
//! routine's answer is recorded as the routine's, never the operator's,
//! is held by `daemon_routines`' permission test.)

use crate::common::daemon::Daemon;
use crate::common::shorthand::{assert_has, assert_lacks, str_of};
use crate::common::{self, Scratch};
use crate::daemon::acp::{agent_dir, python, setup};
use crate::daemon::routines::{acp_step, escalate, no_agent_left, setup_marked, start, wait_event};
use serde_json::{Value, json};

/// The session as the operator reads it.
fn session(d: &Daemon, id: &str) -> Value {
    let (code, v) = d.get(&format!("/v1/sessions/{id}"), &d.operator);
    assert_eq!(code, 200, "{v}");
    v
}

#[test]
fn a_start_under_an_id_the_agent_registered_first_is_refused_and_adopts_nothing() {
    let (s, d, m) = setup_marked("squat-start");
    let script = agent_dir().join("agent.py").display().to_string();
    let ws = s.ws.display().to_string();
    // The agent registers the ids the operator is about to use.
    for id in ["reviewer", "bot"] {
        let squatted = d.register(id, &s.ws);
        assert_eq!(squatted["owner"], "agent", "{squatted}");
    }
    let marker = format!("gatehost-test-{m}");
    let agent = ["--", python(), &script, &marker];
    // `session start ARGS -- AGENT` as the operator.
    let start = |args: &[&str]| {
        let args = [&["session", "start"][..], args, &["--cwd", &ws], &agent].concat();
        d.cli(&args, &d.operator)
    };
    // An operator-chosen id, a plain started session.
    let plain = start(&["--id", "reviewer"]);
    // The same for an ACP session.
    let acp = start(&["--acp", "--id", "bot", "--prompt", "hello"]);
    for (what, run) in [("plain", &plain), ("acp", &acp)] {
        assert_ne!(
            run.code, 0,
            "{what}: a start over a squatted id: {}",
            run.stdout
        );
        for said in ["session-id-taken", "already registered"] {
            assert!(run.stderr.contains(said), "{what}: {}", run.stderr);
        }
    }
    // The squatted sessions are still the agent's, with no command: no
    // started agent answers to the agent's key.
    for id in ["reviewer", "bot"] {
        let row = session(&d, id);
        assert_eq!(row["owner"], "agent", "{row}");
        assert!(row["command"].is_null(), "{row}");
    }
    // The refused starts' processes are gone.
    common::assert_no_survivors(&m);
    // Under an id nobody holds, the operator's start works.
    let ok = start(&["--id", "reviewer-2"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(session(&d, "reviewer-2")["owner"], "operator");
    drop(d);
    common::assert_no_survivors(&m);
}

#[test]
fn a_routine_steps_session_id_cannot_be_registered_by_the_agent_token() {
    let (s, d, m) = setup_marked("squat-routine");
    let plan = acp_step(&s, "plan", "--ask-first", &m, escalate(120));
    let build = acp_step(&s, "build", "--done", &m, json!({"mode": "fail"}));
    let id = start(&d, &s, json!({"steps": [plan, build]}));
    wait_event(&d, &id, "routine:escalated");
    // The run id is readable with the agent token; the ids its steps'
    // sessions will take are not the agent's to register.
    for squat in [
        format!("{id}.s1.r0"),
        format!("{id}.s0.r1"),
        format!("{id}.s0.r0"),
    ] {
        let (code, body) = d.post(
            "/v1/sessions",
            &d.agent,
            Some(json!({"id": squat, "cwd": s.ws.display().to_string()})),
        );
        assert_eq!(code, 403, "{squat}: {body}");
        assert_eq!(body["error"]["code"], "session-id-reserved", "{body}");
    }
    d.cli_ok(
        &["routine", "resolve", &id, "plan", "--response", "go on"],
        &d.operator,
    );
    wait_event(&d, &id, "routine:done");
    // The second step ran in a session of the operator's, which the agent
    // never held a key to.
    let second = session(&d, &format!("{id}.s1.r0"));
    assert_eq!(second["owner"], "operator", "{second}");
    assert!(
        d.keyring().get(&format!("{id}.s1.r0")).is_empty(),
        "nobody kept a key for the step's session"
    );
    no_agent_left(&m);
}

#[test]
fn the_agent_tokens_routine_never_runs_in_a_session_of_the_operators() {
    let (s, d) = setup();
    // The operator registers a session; its key lands in the keyring the
    // tests share, so the agent here holds it (as a same-user agent may).
    d.register_cli("ops", &s.ws, &d.operator);
    let key = d.key("ops");
    let spec = json!({"steps": [{"label": "tidy", "prompt": "go",
        "session": {"existing": "ops"},
        "onInput": {"mode": "auto-allow", "prompt": "yes"}}]});
    let client = d.client();
    let (code, body) = d
        .block(client.send_with_keys(
            reqwest::Method::POST,
            "/v1/routines",
            Some(&d.agent),
            Some(spec.to_string().into_bytes()),
            &[key],
        ))
        .expect("the daemon answers");
    let body: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["error"]["code"], "session-owned-by-operator", "{body}");
    // The operator's own routine may.
    let file = s.write("r.json", &spec.to_string());
    d.cli_ok(
        &["routine", "start", &file.display().to_string()],
        &d.operator,
    );
}

/// Scratch, a daemon, and two agents' sessions `a` and `b`, each with its
/// key (registered as two agents would: each keeps its own).
fn two_agents() -> (Scratch, Daemon, String, String) {
    let (s, d) = crate::common::daemon::with_s1();
    let keys: Vec<String> = ["a", "b"]
        .iter()
        .map(|id| {
            let (code, v) = d.http_keyless(
                "POST",
                "/v1/sessions",
                Some(&d.agent),
                Some(json!({"id": id, "cwd": s.ws.display().to_string()})),
            );
            assert_eq!(code, 200, "{v}");
            v["sessionKey"].as_str().expect("a key").to_string()
        })
        .collect();
    (s, d, keys[0].clone(), keys[1].clone())
}

/// A GET with the agent token and exactly `keys`.
fn read(d: &Daemon, path: &str, keys: &[&str]) -> (u16, Value) {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let client = d.client();
    let (code, bytes) = d
        .block(client.send_with_keys(reqwest::Method::GET, path, Some(&d.agent), None, &keys))
        .expect("the daemon answers");
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, v)
}

#[test]
fn an_agent_reads_its_own_sessions_work_and_not_anothers() {
    let (_s, d, a, b) = two_agents();
    // B's policy (a gate whose output is its verdict), and B's turn-end
    // with its message.
    let (code, p) = d.http_keyless(
        "POST",
        "/v1/policies",
        Some(&d.agent),
        Some(json!({"sessionId": "b", "gate": {"command": "true"}})),
    );
    assert_eq!(code, 403, "attaching needs b's key: {p}");
    let client = d.client();
    // POST `path` as the agent presenting b's key; the status and body.
    let as_b = |path: &str, body: Value| {
        let body = Some(body.to_string().into_bytes());
        let keys = std::slice::from_ref(&b);
        let sent = client.send_with_keys(reqwest::Method::POST, path, Some(&d.agent), body, keys);
        d.block(sent).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let (code, bytes) = as_b(
        "/v1/policies",
        json!({"sessionId": "b", "gate": {"command": "true"}}),
    );
    let p: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(code, 201, "{p}");
    let pid = p["policyId"].as_str().expect("policyId").to_string();
    let report = json!({"kind": "turn-end", "message": "b's secret plan"});
    let (code, v) = as_b("/v1/sessions/b/report", report);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&v));
    d.wait_status(&pid, "done", std::time::Duration::from_secs(60));

    // A, with its own key, reads none of B's work: the session (its last
    // message), its next event, the policy (its verdict and outputs), its
    // diff, its wait, its events.
    let refused = [
        "/v1/sessions/b".to_string(),
        "/v1/sessions/b/next-event?timeout=0".to_string(),
        format!("/v1/policies/{pid}"),
        format!("/v1/policies/{pid}/diff"),
        format!("/v1/policies/{pid}/wait?timeout=0"),
        "/v1/events?session=b".to_string(),
        format!("/v1/events?policy={pid}"),
        "/v1/events/stream?session=b".to_string(),
    ];
    for path in &refused {
        let (code, v) = read(&d, path, &[&a]);
        assert_eq!(code, 403, "{path} with a's key: {v}");
        assert_eq!(v["error"]["code"], "session-key-required", "{path}: {v}");
        assert!(
            str_of(&v["error"]["message"]).contains("key"),
            "{path}: {v}"
        );
        // Without any key, the same.
        let (code, _) = read(&d, path, &[]);
        assert_eq!(code, 403, "{path} with no key");
    }
    // Listings show A only what its key covers.
    let (code, list) = read(&d, "/v1/policies?limit=1000", &[&a]);
    assert_eq!(code, 200, "{list}");
    assert!(
        list["policies"].as_array().expect("policies").is_empty(),
        "{list}"
    );
    let (code, list) = read(&d, "/v1/sessions?limit=1000", &[&a]);
    assert_eq!(code, 200, "{list}");
    let listed_b = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["id"] == "b")
        .expect("b is listed")
        .clone();
    assert!(listed_b["lastMessage"].is_null(), "{listed_b}");
    assert_lacks(&list.to_string(), "secret plan");
    let (code, page) = read(&d, "/v1/events?since=0&limit=1000", &[&a]);
    assert_eq!(code, 200, "{page}");
    let text = page.to_string();
    assert!(!text.contains("secret plan"), "{page}");
    assert!(!text.contains(&pid), "{page}");
    let (code, _) = read(&d, "/v1/events?since=0", &[]);
    assert_eq!(code, 403, "events with no key at all");

    // B reads its own; the operator reads everything.
    for path in &refused[..3] {
        let (code, v) = read(&d, path, &[&b]);
        assert_eq!(code, 200, "{path} with b's key: {v}");
    }
    let (code, v) = read(&d, &format!("/v1/policies/{pid}/diff"), &[&b]);
    assert_ne!(
        code, 403,
        "b reads its policy's diff (or is told it has none): {v}"
    );
    let (code, v) = read(&d, "/v1/sessions/b", &[&b]);
    assert_eq!(code, 200);
    assert_eq!(v["lastMessage"], "b's secret plan", "{v}");
    let (code, page) = read(&d, "/v1/events?since=0&limit=1000", &[&b]);
    assert_eq!(code, 200);
    assert_has(&page.to_string(), "secret plan");
    let (code, list) = read(&d, "/v1/policies?limit=1000", &[&b]);
    assert_eq!(code, 200);
    assert_eq!(list["policies"][0]["policyId"], pid.as_str(), "{list}");
    for path in refused.iter().filter(|p| !p.contains("stream")) {
        let (code, v) = d.http_keyless("GET", path, Some(&d.operator), None);
        assert_ne!(code, 403, "the operator reads {path}: {v}");
        assert!(code < 500, "{path}: {v}");
    }
    let (code, v) = d.http_keyless("GET", "/v1/sessions/b", Some(&d.operator), None);
    assert_eq!(code, 200);
    assert_eq!(v["lastMessage"], "b's secret plan", "{v}");
}

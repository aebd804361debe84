//! A policy's gate through a real daemon: pass, nudge, block, the attach
//! race, an infrastructure failure, fan-in, `next`, cancel, started
//! sessions and the host-wide cap on gating.

use crate::common;
use crate::common::shorthand::{arg, assert_has, assert_starts, str_of};

use super::{T, fix_and_pass, gate_file_ok, setup, setup_s1, subsequence};
use common::daemon::{Daemon, allow_config_with, script_gate_json, wait_started};
use common::{Scratch, assert_no_survivors, fixture_str, marker};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn a_passing_gate_runs_at_turn_end_and_the_cli_sees_it() {
    let (s, d) = setup();
    d.register_cli("s1", &s.ws, &d.agent);
    let spec = s.write(
        "p.json",
        &json!({"sessionId": "s1", "gate": {"command": "true"}}).to_string(),
    );
    let att = d.cli_ok(
        &["policy", "attach", &spec.display().to_string(), "--json"],
        &d.agent,
    );
    let pid = att.json()["policyId"]
        .as_str()
        .expect("policyId")
        .to_string();
    // Registered sessions start running: nothing gates before a turn-end.
    assert_eq!(d.policy(&pid)["status"], "watching");
    d.cli_ok(
        &["session", "report", "s1", "turn-end", "--message", "done"],
        &d.agent,
    );
    let w = d.cli(&["wait", "--policy", &pid, "--timeout", "30s"], &d.agent);
    assert_eq!(w.code, 0, "wait: {} {}", w.stdout, w.stderr);
    let st = d.cli(&["policy", "status", &pid, "--json"], &d.agent);
    assert_eq!(st.json()["status"], "done");
    let events = d.policy_events(&pid);
    assert_eq!(
        events,
        [
            "policy:attached",
            "policy:queued",
            "policy:gating",
            "policy:passed",
            "policy:done"
        ]
    );
}

#[test]
fn a_failing_gate_nudges_with_its_output_then_blocks_out_of_retries() {
    let (s, d) = setup_s1();
    s.write_ws("status.txt", "broken\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": gate_file_ok("status.txt"),
        "onFail": {"maxRetries": 1, "nudge": "Fix it ({code}): {reason} / {output}"}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "watching", T);
    assert_eq!(p["retriesUsed"], 1);
    let nudge = d.all_events(&format!("&policy={pid}&types=nudge"));
    assert_eq!(nudge.len(), 1);
    let msg = nudge[0]["payload"]["message"].as_str().expect("message");
    assert_starts(msg, "Fix it (fail (exit 1))");
    assert!(
        msg.contains("does not say ok yet (it holds: broken"),
        "the nudge carries the gate's output: {msg}"
    );
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    assert_has(str_of(&p["reason"]), "after 1 retries");
    let events = d.policy_events(&pid);
    assert!(
        subsequence(
            &events,
            &[
                "policy:gating",
                "policy:failed",
                "policy:nudge",
                "policy:watching",
                "policy:gating",
                "policy:failed",
                "policy:blocked"
            ]
        ),
        "{events:?}"
    );
    let w = d.cli(&["wait", "--policy", &pid, "--timeout", "5s"], &d.agent);
    assert_eq!(w.code, 1, "blocked policies make wait exit 1: {}", w.stdout);
}

#[test]
fn a_nudged_agent_that_fixes_the_work_passes_on_its_next_turn() {
    let (s, d) = setup_s1();
    s.write_ws("status.txt", "broken\n");
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate_file_ok("status.txt")}));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "watching", T);
    assert_eq!(d.policy(&pid)["gateRuns"], 1);
    fix_and_pass(&s, &d, "s1", &pid);
}

#[test]
fn attaching_after_the_turn_end_still_gates_that_turn_by_default() {
    let (_s, d) = setup_s1();
    d.report("s1", "turn-end");
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}}));
    d.wait_status(&pid, "done", T);
    // With watchFrom "now" only a later turn-end counts.
    let later =
        d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.policy(&later)["status"], "watching");
    d.report("s1", "turn-start");
    d.report("s1", "turn-end");
    d.wait_status(&later, "done", T);
}

#[test]
fn an_infrastructure_failure_blocks_with_an_error_and_an_event() {
    let (s, d) = setup_s1();
    // The gate's cwd exists at attach but is gone by turn-end.
    std::fs::create_dir_all(s.ws.join("sub")).expect("mkdir");
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "true", "cwd": "sub"}}));
    std::fs::remove_dir(s.ws.join("sub")).expect("rmdir");
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "blocked", T);
    assert!(
        p["reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("the gate could not run"),
        "{p}"
    );
    let blocked = d.all_events(&format!("&policy={pid}&types=blocked"));
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["payload"]["outcome"], "error");
}

#[test]
fn fan_in_runs_once_all_members_ended_and_a_dead_member_never_stalls_it() {
    let (s, d) = setup();
    for id in ["a", "b"] {
        d.register(id, &s.ws);
    }
    s.write_ws("status.txt", "broken\n");
    let pid = d.attach(json!({"sessionIds": ["a", "b", "a"], "gate": gate_file_ok("status.txt")}));
    let p = d.policy(&pid);
    assert_eq!(p["sessions"], json!(["a", "b"]), "members are deduplicated");
    d.report("a", "turn-end");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.policy(&pid)["status"], "watching", "b has not ended yet");
    assert_eq!(d.policy(&pid)["gateRuns"], 0);
    d.report("b", "exited");
    // The gate fails; b is dead, so only a is awaited after the nudge.
    let p = d.wait_status(&pid, "watching", T);
    assert_eq!(p["pending"], json!(["a"]), "{p}");
    fix_and_pass(&s, &d, "a", &pid);
}

#[test]
fn a_lone_member_that_exits_is_gated_and_blocked_when_nobody_can_fix_it() {
    let (_s, d) = setup_s1();
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "false"}}));
    d.report("s1", "exited");
    let p = d.wait_status(&pid, "blocked", T);
    assert_has(str_of(&p["reason"]), "no member is alive");
}

#[test]
fn next_is_attached_exactly_once_when_its_parent_is_done() {
    let (_s, d) = setup_s1();
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "next": {"gate": {"command": "true"}, "label": "second"}
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "done", T);
    let child = p["nextId"].as_str().expect("nextId").to_string();
    let c = d.wait_status(&child, "done", T);
    assert_eq!(c["parentId"], pid.as_str());
    assert_eq!(c["sessions"], json!(["s1"]), "next inherits the members");
    let attached: Vec<Value> = d
        .all_events("&types=attached")
        .into_iter()
        .filter(|e| e["payload"]["parentId"] == pid.as_str())
        .collect();
    assert_eq!(attached.len(), 1);
}

#[test]
fn cancel_kills_a_running_gate_and_publishes_an_event() {
    let (_s, d) = setup_s1();
    let m = marker("cancel");
    let gate = script_gate_json("gates/hang.sh", &[&m], 60_000);
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate}));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "gating", T);
    wait_started(&m, T);
    // The agent token cannot cancel.
    let (code, body) = d.post(
        &format!("/v1/policies/{pid}/cancel"),
        &d.agent,
        Some(json!({})),
    );
    assert_eq!(code, 403, "{body}");
    d.cli_ok(&["policy", "cancel", &pid], &d.operator);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !common::survivors(&m).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_no_survivors(&m);
    assert_eq!(d.policy(&pid)["status"], "cancelled");
    let ev = d.all_events(&format!("&policy={pid}&types=cancelled"));
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["payload"]["from"], "gating");
    // Cancelling again is a conflict, and changes nothing.
    let (code, _) = d.post(
        &format!("/v1/policies/{pid}/cancel"),
        &d.operator,
        Some(json!({})),
    );
    assert_eq!(code, 409);
}

#[test]
fn a_started_session_ends_turns_on_its_pattern_and_gets_nudges_on_stdin() {
    let (s, d) = setup();
    // An "agent" that answers each stdin line by writing it to a file and
    // printing a turn marker.
    // In its workspace: a started agent is confined (`[agents]`) and
    // reads nothing of the test's configuration directory.
    let agent = s.write_ws(
        "agent.sh",
        "#!/usr/bin/env bash\necho 'TURN DONE'\nwhile read -r line; do echo \"$line\" >> nudges.txt; echo ok > status.txt; echo 'TURN DONE'; done\n",
    );
    let agent = arg(&agent);
    let pattern = ["--turn-end-pattern", "^TURN DONE$"];
    d.start_session(
        "bot",
        &s.ws,
        &[&pattern[..], &["--", "bash", &agent]].concat(),
    );
    // The agent token cannot start processes.
    let (code, _) = d.post(
        "/v1/sessions/start",
        &d.agent,
        Some(json!({"cwd": s.ws, "command": ["true"]})),
    );
    assert_eq!(code, 403);
    let pid = d.attach(
        json!({"sessionId": "bot", "gate": gate_file_ok("status.txt"), "watchFrom": "now"}),
    );
    // Its first turn already ended before the attach: wait for the next one.
    let p = d.policy(&pid);
    assert_eq!(p["status"], "watching", "{p}");
    d.agent_ok(
        "POST",
        "/v1/sessions/bot/report",
        Some(json!({"kind": "turn-end"})),
    );
    // The gate fails (no status.txt), the nudge reaches the agent's stdin,
    // it fixes the file and ends its turn: the gate passes.
    d.wait_status(&pid, "done", T);
    let nudges = std::fs::read_to_string(s.ws.join("nudges.txt")).expect("nudges");
    assert_has(&nudges, "does not say ok yet");
    let _ = fixture_str("gates/file-says-ok.sh");
}

#[test]
fn gating_is_capped_host_wide_and_the_queue_is_fifo() {
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        &allow_config_with(&["true"], "max_gating = 1\n"),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    let m = marker("fifo");
    let gate = script_gate_json("gates/sleep-then-pass.sh", &[&m, "1"], 30_000);
    let mut ids = Vec::new();
    for sid in ["a", "b", "c"] {
        d.register(sid, &s.ws);
        ids.push(d.attach(json!({"sessionId": sid, "gate": gate})));
    }
    for sid in ["a", "b", "c"] {
        d.report(sid, "turn-end");
    }
    d.wait_status(&ids[0], "gating", T);
    assert_eq!(d.policy(&ids[1])["status"], "queued");
    assert_eq!(d.policy(&ids[2])["status"], "queued");
    for id in &ids {
        d.wait_status(id, "done", T);
    }
    // Each gate started only after the previous one passed, in attach order.
    let events = d.all_events("&types=gating,passed");
    let order: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["policyId"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = ids
        .iter()
        .flat_map(|id| {
            [
                ("policy:gating".to_string(), id.clone()),
                ("policy:passed".to_string(), id.clone()),
            ]
        })
        .collect();
    assert_eq!(order, want);
}

/// Issue 12 #4: a policy that could never gate is refused at attach, never
/// left waiting: `watchFrom` beyond the newest event (400), or "now" on a
/// member that has exited (409 `exited`). With another member alive, the
/// exited one is not waited for.
#[test]
fn an_attach_that_could_never_gate_is_refused() {
    let (s, d) = setup();
    d.register("gone", &s.ws);
    d.register("alive", &s.ws);
    d.report("gone", "exited");
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_i64()
        .expect("cursor");
    let (code, v) = d.post(
        "/v1/policies",
        &d.agent,
        Some(json!({"sessionId": "alive", "watchFrom": head + 100})),
    );
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["field"], "watchFrom");
    let (code, v) = d.post(
        "/v1/policies",
        &d.agent,
        Some(json!({"sessionId": "gone", "watchFrom": "now"})),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error"]["code"], "exited");
    // "latest": its exit counts as its end, so the policy gates at once.
    let pid = d.attach(json!({"sessionId": "gone", "gate": {"command": "true"}}));
    assert_eq!(
        d.wait_status(&pid, "done", Duration::from_secs(10))["status"],
        "done"
    );
    // Fan-in with one member alive: only that one is waited for.
    let pid = d.attach(
        json!({"sessionIds": ["gone", "alive"], "watchFrom": "now", "gate": {"command": "true"}}),
    );
    assert_eq!(d.policy(&pid)["pending"], json!(["alive"]));
    d.report("alive", "turn-end");
    d.wait_status(&pid, "done", Duration::from_secs(10));
}

/// Issue 12 #5: a fan-in policy's events (which name its first member) are
/// also the second member's: its `events?session=` and `next-event` show
/// the nudge meant for it.
#[test]
fn a_fan_in_policys_events_reach_every_member() {
    let (s, d) = setup_s1();
    d.register("s2", &s.ws);
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_i64()
        .expect("cursor");
    // The operator's (a policy the agent attached would leave the
    // members' stops ungated by the operator: `session:ungated` first).
    let pid = d.attach_operator(json!({
        "sessionIds": ["s1", "s2"], "watchFrom": "now",
        "gate": {"command": "false"}, "onFail": {"maxRetries": 1}
    }));
    d.report("s1", "turn-end");
    d.report("s2", "turn-end");
    d.wait_status(&pid, "watching", Duration::from_secs(10));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v = d.agent_ok("GET", "/v1/events?session=s2&types=nudge&since=0", None);
        if v["events"].as_array().is_some_and(|e| e.len() == 1) {
            assert_eq!(v["events"][0]["policyId"], pid.as_str(), "{v}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // next-event of s2 after its own turn-end: the policy's events follow.
    let turn_end = d.agent_ok(
        "GET",
        &format!("/v1/events?session=s2&types=turn-end&since={head}"),
        None,
    )["events"][0]["cursor"]
        .as_i64()
        .expect("s2's turn-end");
    let next = d.agent_ok(
        "GET",
        &format!("/v1/sessions/s2/next-event?since={turn_end}&timeout=1s"),
        None,
    );
    assert_eq!(next["event"]["policyId"], pid.as_str(), "{next}");
}

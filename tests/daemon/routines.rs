//! Routines (`gatehost routine …`) with a real daemon and the scripted ACP
//! agent (tests/support/acp-agent/agent.py, in its `--ask-first` or `--done`
//! mode): a step whose agent asks is answered by its auto-allow prompt, or
//! escalated to the operator (who answers through the CLI; the agent token
//! cannot), or fails the run when nobody answers in time; a fan-in step
//! waits for two sessions; a SIGKILL of the daemon mid-run resumes the run
//! on restart. Every terminal event is checked to happen once, and no
//! agent to be left running.

use crate::common::daemon::{Daemon, allow_config_with};
use crate::common::shorthand::{assert_has, str_of};
use crate::common::{self, Scratch};
use crate::daemon::acp::{agent_dir, python, setup, wait_for};
use serde_json::{Value, json};

/// An ACP step running the scripted agent in `mode`.
pub(crate) fn acp_step(
    s: &Scratch,
    label: &str,
    mode: &str,
    marker: &str,
    on_input: Value,
) -> Value {
    json!({
        "label": label,
        "prompt": format!("carry out {label}"),
        "session": {"acp": {
            "command": [python(), agent_dir().join("agent.py").display().to_string(), mode,
                        format!("gatehost-test-{marker}")],
            "cwd": s.ws.display().to_string(),
        }},
        "onInput": on_input,
    })
}

/// The scratch area and daemon of [`setup`], and a marker named `name`
/// for the agents the test's routines start.
pub(crate) fn setup_marked(name: &str) -> (Scratch, Daemon, String) {
    let (s, d) = setup();
    (s, d, common::marker(name))
}

/// A step's `onInput`: escalated to the operator, who has `secs` to answer.
pub(crate) fn escalate(secs: u64) -> Value {
    json!({"mode": "escalate", "timeoutSecs": secs})
}

/// A step's `onInput`: answered with `prompt`.
pub(crate) fn auto_allow(prompt: &str) -> Value {
    json!({"mode": "auto-allow", "prompt": prompt})
}

/// Starts a routine of one step, `ask`, whose agent asks at once and is
/// escalated to the operator with `secs` to answer; its id.
pub(crate) fn start_asking(d: &Daemon, s: &Scratch, marker: &str, secs: u64) -> String {
    let step = acp_step(s, "ask", "--ask-first", marker, escalate(secs));
    start(d, s, json!({"steps": [step]}))
}

/// Starts the routine through the CLI (operator); its id.
pub(crate) fn start(d: &Daemon, s: &Scratch, spec: Value) -> String {
    let file = s.write("routine.json", &spec.to_string());
    let r = d.cli_ok(
        &["routine", "start", &file.display().to_string()],
        &d.operator,
    );
    r.stdout.trim().to_string()
}

/// The run, through the CLI's `status --json`.
pub(crate) fn status(d: &Daemon, id: &str) -> Value {
    let r = d.cli_ok(&["routine", "status", id, "--json"], &d.agent);
    r.json()
}

/// The routine's events of `kind`.
pub(crate) fn events(d: &Daemon, id: &str, kind: &str) -> Vec<Value> {
    d.all_events(&format!("&types={kind}"))
        .into_iter()
        .filter(|e| e["payload"]["routineId"] == id)
        .collect()
}

pub(crate) fn wait_event(d: &Daemon, id: &str, kind: &str) -> Value {
    wait_for(&format!("{kind} of {id}"), || {
        events(d, id, kind).into_iter().next()
    })
}

/// The prompts the agents in `s.ws` received, in order.
pub(crate) fn prompts(s: &Scratch) -> Vec<String> {
    crate::daemon::acp::prompts(&s.ws)
}

/// Waits until the agents carrying `marker` are gone (the run stops the
/// agents it started), then checks none is left.
pub(crate) fn no_agent_left(marker: &str) {
    wait_for("the routine's agents to be stopped", || {
        common::survivors(marker).is_empty().then_some(())
    });
    common::assert_no_survivors(marker);
}

#[test]
fn an_auto_allow_step_answers_its_agent_and_the_run_is_done() {
    let (s, d, m) = setup_marked("routine-auto");
    let step = acp_step(&s, "build", "--ask-first", &m, auto_allow("use main"));
    let id = start(&d, &s, json!({"label": "auto", "steps": [step]}));
    let done = wait_event(&d, &id, "routine:done");
    assert_eq!(done["payload"]["state"], "done", "{done}");
    let asked = events(&d, &id, "routine:awaiting-input");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_has(str_of(&asked[0]["payload"]["message"]), "which branch");
    assert_eq!(events(&d, &id, "routine:auto-allowed").len(), 1);
    let got = prompts(&s);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("carry out build") && got[0].contains("STEP DONE"),
        "{got:?}"
    );
    assert_eq!(got[1], "use main");
    let run = status(&d, &id);
    assert_eq!(run["phase"], "done", "{run}");
    assert_eq!(run["steps"][0]["status"], "done", "{run}");
    no_agent_left(&m);
    assert_eq!(events(&d, &id, "routine:done").len(), 1);
}

#[test]
fn an_escalated_step_is_resolved_by_the_operator_never_by_the_agent_token() {
    let (s, d, m) = setup_marked("routine-escalate");
    let step = acp_step(&s, "deploy", "--ask-first", &m, escalate(120));
    let id = start(&d, &s, json!({"steps": [step]}));
    let escalated = wait_event(&d, &id, "routine:escalated");
    assert_eq!(escalated["payload"]["step"], "deploy", "{escalated}");
    assert_eq!(escalated["payload"]["timeoutMs"], 120_000, "{escalated}");
    // The agent token cannot answer, nor start or cancel.
    let path = format!("/v1/routines/{id}/steps/deploy/resolve");
    let (code, body) = d.post(&path, &d.agent, Some(json!({"response": "x"})));
    assert_eq!(code, 403, "{body}");
    let r = d.cli(
        &["routine", "resolve", &id, "deploy", "--response", "x"],
        &d.agent,
    );
    assert_eq!(r.code, 2, "{}", r.stdout);
    let (code, _) = d.post(&format!("/v1/routines/{id}/cancel"), &d.agent, None);
    assert_eq!(code, 403);
    // A step that is not escalated waits for no answer.
    let r = d.cli(
        &["routine", "resolve", &id, "other", "--response", "x"],
        &d.operator,
    );
    assert_eq!(r.code, 2);
    assert_has(&r.stderr, "waits for no answer");
    d.cli_ok(
        &[
            "routine",
            "resolve",
            &id,
            "deploy",
            "--response",
            "use release",
        ],
        &d.operator,
    );
    wait_event(&d, &id, "routine:done");
    let got = prompts(&s);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1], "use release", "the agent got the operator's answer");
    let resolved = events(&d, &id, "routine:resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["payload"]["message"], "use release");
    let run = status(&d, &id);
    assert_eq!(run["steps"][0]["response"], "use release", "{run}");
    // Finished: a second answer or a cancel is refused.
    let r = d.cli(&["routine", "cancel", &id], &d.operator);
    assert_eq!(r.code, 2);
    assert_has(&r.stderr, "already done");
    no_agent_left(&m);
}

#[test]
fn an_escalation_nobody_answers_fails_the_run_once_with_its_reason() {
    let (s, mut d, m) = setup_marked("routine-timeout");
    let id = start_asking(&d, &s, &m, 1);
    let failed = wait_event(&d, &id, "routine:failed");
    assert_eq!(
        failed["payload"]["failReason"], "escalation-timed-out",
        "{failed}"
    );
    assert_has(str_of(&failed["payload"]["reason"]), "nobody resolved");
    let run = status(&d, &id);
    assert_eq!(run["phase"], "failed", "{run}");
    assert_eq!(run["reason"], "escalation-timed-out", "{run}");
    assert_eq!(run["steps"][0]["status"], "failed", "{run}");
    no_agent_left(&m);
    // A restart changes nothing: the failure was said once.
    d.restart();
    assert_eq!(status(&d, &id)["phase"], "failed");
    assert_eq!(events(&d, &id, "routine:failed").len(), 1);
    assert!(events(&d, &id, "routine:step-restarted").is_empty());
    no_agent_left(&m);
}

/// A step whose policy decides it: the policy is attached to the step's
/// session by the daemon (as the operator) before the prompt goes out.
pub(crate) fn policy_step(
    s: &Scratch,
    label: &str,
    mode: &str,
    marker: &str,
    retries: u32,
) -> Value {
    let mut step = acp_step(s, label, mode, marker, json!({"mode": "fail"}));
    step["waitFor"] = json!("policy");
    step["policy"] = json!({
        "gate": {"command": "bash", "args": ["-c", "test -f DONE || { echo 'DONE is missing'; exit 1; }"]},
        "onFail": {"maxRetries": retries},
    });
    step
}

/// The policies whose one session `on` accepts (the newest 200).
pub(crate) fn policies_where(d: &Daemon, on: impl Fn(&str) -> bool) -> Vec<Value> {
    let (code, all) = d.get("/v1/policies?limit=200", &d.operator);
    assert_eq!(code, 200, "{all}");
    all["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .filter(|p| p["sessions"].as_array().is_some_and(|m| m.len() == 1))
        .filter(|p| p["sessions"][0].as_str().is_some_and(&on))
        .cloned()
        .collect()
}

/// The policies attached to `session`.
pub(crate) fn policies_of(d: &Daemon, session: &str) -> Vec<Value> {
    policies_where(d, |s| s == session)
}

#[test]
fn a_policy_step_is_gated_nudged_and_finishes_when_its_policy_passes() {
    let (s, d, m) = setup_marked("routine-policy");
    let mut after = acp_step(&s, "after", "--done", &m, json!({"mode": "fail"}));
    after["waitFor"] = json!(["gated"]);
    let id = start(
        &d,
        &s,
        json!({"steps": [policy_step(&s, "gated", "--fix-second", &m, 3), after]}),
    );
    let done = wait_event(&d, &id, "routine:done");
    assert_eq!(done["payload"]["state"], "done", "{done}");

    // The first prompt, then the gate's nudge (its reason in it), then the
    // next step's prompt: a policy step's turn-ends are its policy's.
    let got = prompts(&s);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got[0].starts_with("carry out gated") && !got[0].contains("STEP DONE"),
        "{got:?}"
    );
    assert!(got[1].contains("DONE is missing"), "the nudge: {got:?}");
    assert!(got[2].starts_with("carry out after"), "{got:?}");

    let run = status(&d, &id);
    let session = run["steps"][0]["sessionId"].as_str().expect("session");
    let policies = policies_of(&d, session);
    assert_eq!(
        policies.len(),
        1,
        "one policy per step attempt: {policies:?}"
    );
    let p = &policies[0];
    assert_eq!(p["status"], "done", "{p}");
    assert_eq!(p["spec"]["attachedBy"], "operator", "{p}");
    assert_eq!(p["gateRuns"], 2, "{p}");
    let step_done = events(&d, &id, "routine:step-done");
    assert_eq!(step_done.len(), 2, "{step_done:?}");
    let policy_id = p["id"].as_str().expect("id");
    assert!(
        step_done[0]["payload"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains(policy_id)),
        "the step says which policy finished it: {step_done:?}"
    );
    no_agent_left(&m);
    assert_eq!(events(&d, &id, "routine:done").len(), 1);
}

#[test]
fn a_policy_that_never_passes_or_cannot_be_attached_fails_its_run_once_said() {
    let (s, d, m) = setup_marked("routine-policy-fail");
    // Never fixed: one retry, then the policy is blocked and the run fails.
    let step = policy_step(&s, "never", "--done", &m, 1);
    let id = start(&d, &s, json!({"steps": [step]}));
    let failed = wait_event(&d, &id, "routine:failed");
    assert_eq!(failed["payload"]["failReason"], "policy-failed", "{failed}");
    assert_has(str_of(&failed["payload"]["reason"]), "blocked");
    assert_eq!(prompts(&s).len(), 2, "the prompt and one nudge");

    // A gate the configuration does not allow: refused at the attach, the
    // step fails with the attach's reason, its agent is stopped.
    let mut bad = policy_step(&s, "bad", "--done", &m, 1);
    bad["policy"]["gate"] = json!({"command": "curl", "args": ["http://example.com"]});
    let id2 = start(&d, &s, json!({"steps": [bad]}));
    let failed = wait_event(&d, &id2, "routine:failed");
    let why = failed["payload"]["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("could not be attached") && why.contains("curl"),
        "{failed}"
    );
    // A policy that is not one is refused at the start, nothing run.
    let mut shapeless = policy_step(&s, "x", "--done", &m, 1);
    shapeless["policy"] = json!({"gate": {"command": "true"}, "bogus": 1});
    let file = s.write("bad.json", &json!({"steps": [shapeless]}).to_string());
    let r = d.cli(
        &["routine", "start", &file.display().to_string()],
        &d.operator,
    );
    assert_eq!(r.code, 2, "{} {}", r.stdout, r.stderr);
    assert_has(&r.stderr, "bogus");
    no_agent_left(&m);
    for run in [&id, &id2] {
        assert_eq!(events(&d, run, "routine:failed").len(), 1);
    }
}

#[test]
fn auto_allow_answers_at_most_its_max_then_the_run_fails_said() {
    let (s, d, m) = setup_marked("routine-auto-max");
    // Every answer lacks the done marker: the agent "asks" at every
    // turn-end, for ever.
    let step = acp_step(
        &s,
        "loop",
        "--asks-always",
        &m,
        json!({"mode": "auto-allow", "prompt": "go on", "max": 2}),
    );
    let id = start(&d, &s, json!({"steps": [step]}));
    let failed = wait_event(&d, &id, "routine:failed");
    assert_eq!(
        failed["payload"]["failReason"], "auto-allow-exhausted",
        "{failed}"
    );
    assert_eq!(events(&d, &id, "routine:auto-allowed").len(), 2);
    let got = prompts(&s);
    assert_eq!(got.len(), 3, "the step's prompt and two answers: {got:?}");
    assert_eq!(&got[1..], ["go on", "go on"]);
    no_agent_left(&m);
    assert_eq!(events(&d, &id, "routine:failed").len(), 1);
}

#[test]
fn a_fan_in_step_waits_for_two_sessions() {
    let (s, d, m) = setup_marked("routine-fan-in");
    for sid in ["fan-a", "fan-b"] {
        d.register(sid, &s.ws);
    }
    let mut step = acp_step(&s, "merge", "--done", &m, json!({"mode": "fail"}));
    step["waitFor"] = json!(["fan-a", "fan-b"]);
    let id = start(&d, &s, json!({"steps": [step]}));
    let report = |sid: &str, message: &str| {
        let request = gatehost::wire::ReportRequest {
            kind: gatehost::wire::ReportKind::TurnEnd,
            message: Some(message.to_string()),
        };
        let client = d.client();
        d.block(client.report(sid, &request)).expect("report");
    };
    // A turn-end without the marker finishes nothing; one session done
    // is not both.
    report("fan-a", "still working");
    report("fan-b", "done here\nSTEP DONE");
    let run = status(&d, &id);
    assert_eq!(run["phase"], "waiting", "{run}");
    assert_eq!(run["steps"][0]["status"], "pending", "{run}");
    assert!(events(&d, &id, "routine:step-started").is_empty());
    report("fan-a", "STEP DONE");
    let started = wait_event(&d, &id, "routine:step-started");
    assert_eq!(started["payload"]["step"], "merge", "{started}");
    wait_event(&d, &id, "routine:done");
    assert_eq!(prompts(&s).len(), 1);
    no_agent_left(&m);
}

#[test]
fn a_cancelled_run_stops_its_agent_and_a_bad_routine_is_refused() {
    let (s, d, m) = setup_marked("routine-cancel");
    let step = acp_step(&s, "wait", "--ask-first", &m, escalate(120));
    let id = start(&d, &s, json!({"steps": [step]}));
    wait_event(&d, &id, "routine:escalated");
    d.cli_ok(&["routine", "cancel", &id], &d.operator);
    assert_eq!(events(&d, &id, "routine:cancelled").len(), 1);
    no_agent_left(&m);
    let r = d.cli_ok(&["routine", "list", "--json"], &d.agent);
    assert_eq!(r.json()["routines"][0]["phase"], "cancelled");
    // A step waiting for a later one never starts: refused up front.
    let mut late = acp_step(&s, "a", "--done", &m, json!({"mode": "fail"}));
    late["waitFor"] = json!(["b"]);
    let b = acp_step(&s, "b", "--done", &m, json!({"mode": "fail"}));
    let file = s.write("bad.json", &json!({"steps": [late, b]}).to_string());
    let r = d.cli(
        &["routine", "start", &file.display().to_string()],
        &d.operator,
    );
    assert_eq!(r.code, 2);
    assert_has(&r.stderr, "a later step");
}

#[test]
fn a_permission_the_steps_rule_escalates_is_auto_allowed_or_resolved_by_the_operator() {
    let (s, d, m) = setup_marked("routine-permission");
    let rule = json!({"allow": ["read"], "otherwise": "escalate", "timeoutMs": 60_000});
    let mut one = acp_step(
        &s,
        "edit",
        "--done",
        &m,
        json!({"mode": "auto-allow", "prompt": "unused"}),
    );
    one["prompt"] = json!("PERMISSION edit patch");
    one["session"]["acp"]["permission"] = rule.clone();
    let mut two = acp_step(&s, "remove", "--done", &m, escalate(120));
    two["prompt"] = json!("PERMISSION delete rm");
    two["session"]["acp"]["permission"] = rule;
    let id = start(&d, &s, json!({"steps": [one, two]}));
    let escalated = wait_event(&d, &id, "routine:escalated");
    assert_eq!(escalated["payload"]["step"], "remove", "{escalated}");
    assert_eq!(escalated["payload"]["source"], "permission", "{escalated}");
    let request = escalated["payload"]["request"]
        .as_str()
        .expect("the request id")
        .to_string();
    let auto = events(&d, &id, "routine:auto-allowed");
    assert_eq!(auto.len(), 1, "{auto:?}");
    assert_eq!(auto[0]["payload"]["source"], "permission", "{auto:?}");
    d.cli_ok(
        &["routine", "resolve", &id, "remove", "--response", "allow"],
        &d.operator,
    );
    wait_event(&d, &id, "routine:done");
    let answers: Vec<(String, String)> = crate::daemon::acp::agent_log(&s.ws)
        .iter()
        .filter(|l| l["action"] == "permission")
        .map(|l| {
            (
                l["name"].as_str().unwrap_or_default().to_string(),
                l["answer"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        vec![("patch".into(), "yes".into()), ("rm".into(), "yes".into())]
    );
    let resolved = events(&d, &id, "routine:resolved");
    assert_eq!(resolved[0]["payload"]["request"], request.as_str());
    // Who answered is on the record (issue 48, item 2): the routine's
    // rule, with its run, and the operator.
    let answered = |sid: String| -> Value {
        crate::daemon::acp::wait_for("the permission's answer", || {
            d.all_events(&format!("&session={sid}&types=session:permission"))
                .into_iter()
                .next()
        })
    };
    let auto = answered(format!("{id}.s0.r0"));
    assert_eq!(auto["payload"]["allowed"], true, "{auto}");
    assert_eq!(auto["payload"]["by"], "routine", "{auto}");
    assert_eq!(auto["payload"]["routine"], id.as_str(), "{auto}");
    let resolved = answered(format!("{id}.s1.r0"));
    assert_eq!(resolved["payload"]["by"], "operator", "{resolved}");
    assert!(resolved["payload"].get("routine").is_none(), "{resolved}");
    no_agent_left(&m);
}

#[test]
fn an_escalation_and_a_failure_reach_the_operators_notify_url() {
    let hook = crate::common::webhooks::receiver_answering(None);
    let s = Scratch::new();
    let cfg = allow_config_with(
        &["true"],
        &format!("notify_url = \"{}\"\nnotify_format = \"ntfy\"\n", hook.url),
    ) + &format!(
        "[agents]\nread = [{:?}]\n",
        agent_dir().display().to_string()
    );
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    let m = common::marker("routine-notify");
    let id = start_asking(&d, &s, &m, 1);
    wait_event(&d, &id, "routine:failed");
    let seen = wait_for("both notifications", || {
        let seen = hook.seen.lock().expect("lock").clone();
        let kinds: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
        (kinds.contains(&"routine:escalated") && kinds.contains(&"routine:failed")).then_some(seen)
    });
    // The attention filter: nothing else of the run is a person's business.
    let kinds: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
    assert!(
        kinds
            .iter()
            .all(|k| matches!(*k, "routine:escalated" | "routine:failed")),
        "{kinds:?}"
    );
    let body = |kind: &str| {
        seen.iter()
            .find(|s| s.1 == kind)
            .map(|s| String::from_utf8_lossy(&s.3).to_string())
            .unwrap_or_default()
    };
    let asked = body("routine:escalated");
    assert_has(
        &asked,
        &format!("gatehost routine resolve {id} ask --response TEXT"),
    );
    assert_has(&asked, "which branch");
    assert_has(&body("routine:failed"), "nobody resolved");
    drop(d);
    no_agent_left(&m);
}

//! Routines under faults, with a real daemon and the scripted ACP agent: a
//! SIGKILL before a step's policy is attached or mid-run (the run resumes,
//! each terminal event once), random SIGKILLs over many runs, damaged run
//! rows (said, flagged, cancelled in place), and a start repeated with its
//! idempotency key (the same run).

use crate::common::daemon::Daemon;
use crate::common::shorthand::{assert_has, str_of};
use crate::daemon::acp::{setup_with_env, wait_for};
use crate::daemon::routines::{
    acp_step, escalate, events, no_agent_left, policies_of, policies_where, setup_marked, start,
    start_asking, status, wait_event,
};
use serde_json::{Value, json};

/// A death of the daemon (abort) after a policy step's start is stored
/// and before its policy is attached: the restarted daemon attaches it
/// (once) and the step goes on; nothing is attached twice, no event
/// doubled.
#[test]
fn a_daemon_dead_before_a_steps_policy_is_attached_attaches_it_at_restart() {
    let flag = tempfile::NamedTempFile::new().expect("flag");
    let flag_path = flag.path().display().to_string();
    let (s, mut d) = setup_with_env(&[("GATEHOST_TEST_ABORT_BEFORE_STEP_POLICY", &flag_path)]);
    d.register("existing-1", &s.ws);
    let spec = json!({"steps": [{
        "label": "gated",
        "session": {"existing": "existing-1"},
        "waitFor": "policy",
        "policy": {"gate": {"command": "true"}},
    }]});
    let id = start(&d, &s, spec);
    assert!(
        d.wait_exit(std::time::Duration::from_secs(60)),
        "the test hook did not stop the daemon"
    );
    assert!(!flag.path().exists(), "the hook fires once");
    d.restart();
    let attached = wait_for("the step's policy after the restart", || {
        let p = policies_of(&d, "existing-1");
        (!p.is_empty()).then_some(p)
    });
    assert_eq!(attached.len(), 1, "{attached:?}");
    d.report("existing-1", "turn-end");
    let done = wait_event(&d, &id, "routine:done");
    assert_eq!(done["payload"]["state"], "done", "{done}");
    assert_eq!(policies_of(&d, "existing-1").len(), 1);
    assert_eq!(events(&d, &id, "routine:step-started").len(), 1);
    assert_eq!(events(&d, &id, "routine:done").len(), 1);
}

#[test]
fn a_sigkill_mid_run_resumes_the_run_and_each_terminal_event_happens_once() {
    let (s, mut d, m) = setup_marked("routine-kill");
    let id = start(
        &d,
        &s,
        json!({"steps": [
            acp_step(&s, "one", "--done", &m, json!({"mode": "fail"})),
            acp_step(&s, "two", "--ask-first", &m, escalate(120)),
        ]}),
    );
    let escalated = wait_event(&d, &id, "routine:escalated");
    assert_eq!(escalated["payload"]["step"], "two", "{escalated}");
    d.kill9();
    // The agent died with its daemon.
    no_agent_left(&m);
    d.restart();
    let restarted = wait_event(&d, &id, "routine:step-restarted");
    assert_eq!(restarted["payload"]["step"], "two", "{restarted}");
    assert_eq!(restarted["payload"]["restarts"], 1, "{restarted}");
    // The new agent asks again; the operator answers.
    wait_for("the second escalation", || {
        (events(&d, &id, "routine:escalated").len() == 2).then_some(())
    });
    d.cli_ok(
        &["routine", "resolve", &id, "two", "--response", "go"],
        &d.operator,
    );
    wait_event(&d, &id, "routine:done");
    d.restart();
    for (kind, n) in [
        ("routine:started", 1),
        ("routine:step-restarted", 1),
        ("routine:done", 1),
        ("routine:failed", 0),
    ] {
        assert_eq!(events(&d, &id, kind).len(), n, "{kind}");
    }
    let done_steps: Vec<Value> = events(&d, &id, "routine:step-done")
        .into_iter()
        .map(|e| e["payload"]["step"].clone())
        .collect();
    assert_eq!(done_steps, vec![json!("one"), json!("two")]);
    let run = status(&d, &id);
    assert_eq!(run["phase"], "done", "{run}");
    assert_eq!(run["steps"][1]["restarts"], 1, "{run}");
    no_agent_left(&m);
}

/// The seed of the random kills: fixed, so a failure replays
/// (`GATEHOST_TEST_SEED` overrides it).
const KILL_SEED: u64 = 0x5EED_2027;
const KILL_RUNS: usize = 4;
const KILLS: usize = 24;

#[test]
fn random_sigkills_lose_no_run_and_double_no_event() {
    let (s, mut d, m) = setup_marked("routine-kills");
    let auto = json!({"mode": "auto-allow", "prompt": "carry on"});
    // Step b is decided by its policy (the gate `true`): the kills land in
    // its attach, its gate and its settling too.
    let mut gated = acp_step(&s, "b", "--ask-first", &m, auto.clone());
    gated["waitFor"] = json!("policy");
    gated["policy"] = json!({"gate": {"command": "true"}});
    let ids: Vec<String> = (0..KILL_RUNS)
        .map(|i| {
            let spec = json!({"label": format!("run {i}"), "steps": [
                acp_step(&s, "a", "--done", &m, auto.clone()),
                gated.clone(),
                acp_step(&s, "c", "--done", &m, auto.clone()),
            ]});
            let file = s.write(&format!("routine-{i}.json"), &spec.to_string());
            let r = d.cli_ok(
                &["routine", "start", &file.display().to_string()],
                &d.operator,
            );
            r.stdout.trim().to_string()
        })
        .collect();
    let seed = std::env::var("GATEHOST_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(KILL_SEED);
    eprintln!("seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..KILLS {
        // A random moment of the runs: the kill lands wherever they are.
        std::thread::sleep(std::time::Duration::from_millis(rng.u64(0..400)));
        d.restart();
    }
    // The last life runs them to their end.
    let phases = wait_for("every run to finish", || {
        let phases: Vec<String> = ids
            .iter()
            .map(|id| {
                status(&d, id)["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        phases
            .iter()
            .all(|p| matches!(p.as_str(), "done" | "failed"))
            .then_some(phases)
    });
    eprintln!("phases after {KILLS} kills: {phases:?}");
    let check = |d: &Daemon| {
        for id in &ids {
            let n = |kind: &str| events(d, id, kind).len();
            assert_eq!(n("routine:started"), 1, "{id}");
            assert_eq!(
                n("routine:done") + n("routine:failed") + n("routine:cancelled"),
                1,
                "{id}: one terminal event"
            );
            let done: Vec<Value> = events(d, id, "routine:step-done")
                .into_iter()
                .map(|e| e["payload"]["step"].clone())
                .collect();
            let restarts: Vec<(Value, Value)> = events(d, id, "routine:step-restarted")
                .into_iter()
                .map(|e| {
                    (
                        e["payload"]["step"].clone(),
                        e["payload"]["restarts"].clone(),
                    )
                })
                .collect();
            let mut unique = restarts.clone();
            unique.sort_by_key(|(s, r)| (s.to_string(), r.to_string()));
            unique.dedup();
            assert_eq!(
                unique.len(),
                restarts.len(),
                "{id}: a restart twice: {restarts:?}"
            );
            let run = status(d, id);
            // One policy per attempt of step b, however often the daemon
            // died around its attach.
            let attempts = policies_where(d, |s| s.starts_with(&format!("{id}.s1.")));
            let mut b_sessions: Vec<&str> = attempts
                .iter()
                .filter_map(|p| p["sessions"][0].as_str())
                .collect();
            let attached = b_sessions.len();
            b_sessions.sort_unstable();
            b_sessions.dedup();
            assert_eq!(
                attached,
                b_sessions.len(),
                "{id}: a step attempt with two policies"
            );
            if run["phase"] == "done" {
                assert!(attached >= 1, "{id}: step b was done without its policy");
                assert_eq!(done, vec![json!("a"), json!("b"), json!("c")], "{id}");
            } else {
                assert_eq!(run["reason"], "too-many-restarts", "{id}: {run}");
                let all = [json!("a"), json!("b"), json!("c")];
                assert_eq!(
                    done[..],
                    all[..done.len()],
                    "{id}: steps done in order, once"
                );
            }
        }
    };
    check(&d);
    // Another life changes nothing.
    d.restart();
    check(&d);
    drop(d);
    no_agent_left(&m);
}

#[test]
fn a_damaged_run_is_said_and_stops_neither_the_daemon_nor_other_runs() {
    let (s, mut d, m) = setup_marked("routine-damaged");
    let id = start_asking(&d, &s, &m, 1);
    wait_event(&d, &id, "routine:escalated");
    d.kill9();
    // As a damaged disk or a hand edit would leave it; its deadline is due.
    rusqlite::Connection::open(d.data.join("gatehost.db"))
        .expect("open the store")
        .execute(
            "UPDATE routines SET state = '{not json', deadline_at = 0 WHERE id = ?1",
            [&id],
        )
        .expect("damage the run");
    d.restart();
    let run = status(&d, &id);
    assert_has(str_of(&run["damage"]), "state");
    assert!(run["state"].is_null(), "{run}");
    // Another run goes on as ever, and the damaged one is not touched.
    let step = acp_step(&s, "go", "--done", &m, json!({"mode": "fail"}));
    let other = start(&d, &s, json!({"steps": [step]}));
    wait_event(&d, &other, "routine:done");
    assert!(events(&d, &id, "routine:failed").is_empty());
    assert_has(&d.log(), "does not decode");
    drop(d);
    no_agent_left(&m);
}

/// A damaged run (issue 48, item 11), its state not JSON or JSON of the
/// wrong shape, is flagged as damaged either way, and the operator can
/// cancel it (it was a 500): ended as cancelled in place, said with
/// `routine:cancelled`, once. (Their agents died with the killed daemon:
/// none is left.)
#[test]
fn a_damaged_run_is_flagged_whatever_the_damage_and_the_operator_cancels_it() {
    let (s, mut d, m) = setup_marked("routine-damaged-cancel");
    let ask = || {
        json!({"steps": [acp_step(&s, "ask", "--ask-first", &m,
            escalate(3600))]})
    };
    let broken = start(&d, &s, ask());
    let shaped = start(&d, &s, ask());
    wait_event(&d, &broken, "routine:escalated");
    wait_event(&d, &shaped, "routine:escalated");
    d.kill9();
    let db = rusqlite::Connection::open(d.data.join("gatehost.db")).expect("open the store");
    for (id, state) in [(&broken, "{not json"), (&shaped, "{\"wrong\": \"shape\"}")] {
        db.execute("UPDATE routines SET state = ?2 WHERE id = ?1", [id, state])
            .expect("damage the run");
    }
    drop(db);
    d.restart();
    for id in [&broken, &shaped] {
        let run = status(&d, id);
        assert_has(str_of(&run["damage"]), "state");
        d.cli_ok(&["routine", "cancel", id], &d.operator);
        let run = status(&d, id);
        assert_eq!(run["phase"], "cancelled", "{run}");
        let said = wait_event(&d, id, "routine:cancelled");
        assert_eq!(said["payload"]["damaged"], true, "{said}");
        assert_has(str_of(&said["payload"]["reason"]), "damaged");
        // Once is enough.
        let again = d.cli(&["routine", "cancel", id], &d.operator);
        assert_ne!(again.code, 0, "{}", again.stdout);
    }
    no_agent_left(&m);
}

/// A start repeated with its idempotency key (a retry whose first answer
/// was lost) answers the run the first start made, and starts nothing
/// more; the same key with another spec is a conflict (issue 48, item 11).
#[test]
fn a_start_repeated_with_its_key_is_the_same_run() {
    let (s, d, m) = setup_marked("routine-key");
    let spec = json!({"steps": [acp_step(&s, "go", "--done", &m, json!({"mode": "fail"}))]});
    let post = |spec: &Value, key: &str| -> (u16, Value) {
        d.block(async {
            let r = reqwest::Client::new()
                .post(format!("{}/v1/routines", d.url))
                .bearer_auth(&d.operator)
                .header("Idempotency-Key", key)
                .json(spec)
                .send()
                .await
                .expect("send");
            let code = r.status().as_u16();
            (code, r.json().await.unwrap_or(Value::Null))
        })
    };
    let (code, first) = post(&spec, "nightly-2026-12-06");
    assert_eq!(code, 200, "{first}");
    let id = first["id"].as_str().expect("id").to_string();
    let (code, again) = post(&spec, "nightly-2026-12-06");
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["id"], id.as_str());
    // Through the CLI, with the same key: the same run.
    let file = s.write("routine.json", &spec.to_string());
    let r = d.cli_ok(
        &[
            "routine",
            "start",
            &file.display().to_string(),
            "--idempotency-key",
            "nightly-2026-12-06",
        ],
        &d.operator,
    );
    assert_eq!(r.stdout.trim(), id);
    let other = json!({"label": "another", "steps": spec["steps"]});
    let (code, refused) = post(&other, "nightly-2026-12-06");
    assert_eq!(code, 409, "{refused}");
    assert_has(&refused.to_string(), "another spec");
    wait_event(&d, &id, "routine:done");
    let started: Vec<Value> = d.all_events("&types=routine:started").into_iter().collect();
    assert_eq!(started.len(), 1, "{started:?}");
    // A new key is a new run.
    let (code, new) = post(&spec, "nightly-2026-12-07");
    assert_eq!(code, 200, "{new}");
    assert_ne!(new["id"], id.as_str());
    wait_event(&d, new["id"].as_str().expect("id"), "routine:done");
    drop(d);
    no_agent_left(&m);
}

//! Never stuck, never silent over hours (issue 26): the heartbeat
//! watchdog, policy deadlines, infrastructure retries and fan-in across
//! workspaces, through a real daemon on loopback with a webhook receiver
//! standing for the person.

use crate::common;
use crate::common::shorthand::{assert_has, str_of};

use common::Scratch;
use common::daemon::{Daemon, allow_config_with, judge_j, script_gate_json};
use common::webhooks::{Receiver, receiver_answering};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// A daemon whose `[daemon]` section has `keys` added, its webhook at a
/// receiver, and the judge adapter `j` (`flaky.sh DIR FAILS`) configured.
fn setup(keys: &str, judge: Option<(&str, &std::path::Path)>) -> (Scratch, Daemon, Receiver) {
    let hook = receiver_answering(None);
    let s = Scratch::new();
    let mut cfg = allow_config_with(
        &["true", "false"],
        &format!("webhook_url = \"{}\"\n{keys}", hook.url),
    );
    if let Some((fails, dir)) = judge {
        cfg.push_str(&judge_j("judges/flaky.sh", dir, fails));
    }
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    (s, d, hook)
}

fn events_of(d: &Daemon, query: &str, kind: &str) -> Vec<Value> {
    d.all_events(query)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Waits (bounded by `T`) until `f` holds.
fn eventually(what: &str, f: impl FnMut() -> bool) {
    common::eventually_within(T, what, f);
}

/// A session silent past `heartbeat_timeout` is stale once, within the
/// timeout plus 1 s (as the daemon measured it), and its watching policy
/// is blocked, saying why, with a notification; a session that heartbeats
/// is neither; a stale session that speaks again is live again, and the
/// policy the watchdog reclaimed stays as it is.
#[test]
fn a_silent_session_is_stale_and_its_policy_blocked_once_with_a_notification() {
    let (s, d, hook) = setup("heartbeat_timeout = \"1s\"\n", None);
    d.register("quiet", &s.ws);
    d.register("alive", &s.ws);
    let quiet = d.attach(json!({"sessionId": "quiet", "gate": {"command": "true"}}));
    let alive = d.attach(json!({"sessionId": "alive", "gate": {"command": "true"}}));
    // `alive` heartbeats every 200 ms until `quiet`'s policy is blocked.
    let deadline = Instant::now() + T;
    let p = loop {
        d.report("alive", "heartbeat");
        let p = d.policy(&quiet);
        if p["status"] == "blocked" {
            break p;
        }
        assert!(Instant::now() < deadline, "never blocked: {p}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    let reason = p["reason"].as_str().unwrap_or_default();
    assert_has(reason, "quiet");
    assert_has(reason, "heartbeat_timeout");
    let stale = events_of(&d, "&session=quiet", "session:stale");
    assert_eq!(stale.len(), 1, "{stale:?}");
    let silent = stale[0]["payload"]["silentMs"].as_i64().expect("silentMs");
    assert!(
        (1000..=2000).contains(&silent),
        "stale after {silent} ms of silence (timeout 1 s)"
    );
    // A while later: still once, and the heartbeating session is live.
    for _ in 0..10 {
        d.report("alive", "heartbeat");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(events_of(&d, "&session=quiet", "session:stale").len(), 1);
    assert!(events_of(&d, "&session=alive", "session:stale").is_empty());
    assert_eq!(d.policy(&alive)["status"], "watching");
    let blocked = d.policy_events(&quiet);
    assert_eq!(
        blocked.iter().filter(|e| *e == "policy:blocked").count(),
        1,
        "{blocked:?}"
    );
    // The person is told: the webhook got both.
    eventually(
        "the webhook told of the stale session and the block",
        || {
            let kinds = hook.kinds();
            kinds.contains(&"session:stale".to_string())
                && kinds.contains(&"policy:blocked".to_string())
        },
    );
    // Speaking again: live again; the reclaimed policy stays blocked.
    d.report("quiet", "heartbeat");
    let live = events_of(&d, "&session=quiet", "session:live");
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(d.policy(&quiet)["status"], "blocked");
}

/// `on_stale = "cancel"` cancels instead; a policy whose gate is in flight
/// when its session goes stale is not reclaimed until the gate settled
/// (here: it fails, the nudge is delivered, the policy watches again, and
/// only then is it reclaimed).
#[test]
fn on_stale_cancel_waits_for_a_gate_in_flight_to_settle() {
    let (s, d, _hook) = setup("heartbeat_timeout = \"1s\"\non_stale = \"cancel\"\n", None);
    d.register("s1", &s.ws);
    let release = s.ws.join("release");
    let gate = script_gate_json(
        "gates/wait-for-file.sh",
        &[&release.display().to_string()],
        60_000,
    );
    let pid = d.attach(json!({"sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 1}}));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "gating", T);
    eventually("s1 is stale", || {
        !events_of(&d, "&session=s1", "session:stale").is_empty()
    });
    // Stale, but its gate is in flight: the policy is left gating.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(d.policy(&pid)["status"], "gating");
    std::fs::write(&release, "go").expect("release");
    let p = d.wait_status(&pid, "cancelled", T);
    assert_has(str_of(&p["reason"]), "on_stale = \"cancel\"");
    let ev = d.policy_events(&pid);
    let at = |e: &str| ev.iter().position(|x| x == e);
    assert!(at("policy:failed") < at("policy:cancelled"), "{ev:?}");
}

/// A policy past its `deadline` is `expired` and `blocked`, once; a
/// deadline that is not a duration is refused at attach, naming the field.
#[test]
fn a_policy_past_its_deadline_is_expired_once() {
    let (s, d, hook) = setup("", None);
    d.register("s1", &s.ws);
    let pid = d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}, "deadline": "1s"}));
    assert!(d.policy(&pid)["deadlineAt"].as_i64().is_some());
    let p = d.wait_status(&pid, "blocked", T);
    assert_has(str_of(&p["reason"]), "deadline");
    std::thread::sleep(Duration::from_millis(1200));
    let ev = d.policy_events(&pid);
    assert_eq!(
        ev.iter().filter(|e| *e == "policy:expired").count(),
        1,
        "{ev:?}"
    );
    assert_eq!(ev.last().map(String::as_str), Some("policy:blocked"));
    eventually("the webhook told of the expiry", || {
        hook.kinds().contains(&"policy:expired".to_string())
    });
    for bad in ["soon", "0s", "400days"] {
        let (code, body) = d.post(
            "/v1/policies",
            &d.agent,
            Some(json!({"sessionId": "s1", "gate": {"command": "true"}, "deadline": bad})),
        );
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(body.to_string().contains("deadline"), "{bad}: {body}");
    }
}

/// A judge adapter that cannot run twice, then runs, is retried (each
/// retry an event with its cause) and the policy passes; one that never
/// runs is an `error` after `infra_retries`; a gate that says no is never
/// retried.
#[test]
fn a_gate_that_could_not_run_is_retried_and_a_no_never_is() {
    let keys = "infra_retries = 2\ninfra_retry_backoff = \"50ms\"\n";
    for (fails, want) in [("2", "done"), ("always", "blocked")] {
        let calls = common::workspace_tempdir();
        let (s, d, _hook) = setup(keys, Some((fails, calls.path())));
        d.register("s1", &s.ws);
        let pid = d
            .attach(json!({"sessionId": "s1", "gate": {"judge": {"adapter": "j", "prompt": "p"}}}));
        d.report("s1", "turn-end");
        let p = d.wait_status(&pid, want, T);
        let retries = events_of(&d, &format!("&policy={pid}"), "policy:retry");
        assert_eq!(retries.len(), 2, "{fails}: {retries:?}");
        for (i, r) in retries.iter().enumerate() {
            assert_eq!(r["payload"]["attempt"], i + 1, "{r}");
            assert_has(str_of(&r["payload"]["cause"]), "exited with code 1");
        }
        let calls_made = std::fs::read_to_string(calls.path().join("calls")).expect("calls");
        assert_eq!(calls_made.trim(), "3", "{fails}");
        if want == "blocked" {
            let reason = p["reason"].as_str().unwrap_or_default();
            assert_has(reason, "could not run (2 retries)");
        }
    }
    // A "no" is not retried.
    let (s, d, _hook) = setup(keys, None);
    d.register("s1", &s.ws);
    let pid = d.attach(
        json!({"sessionId": "s1", "gate": {"command": "false"}, "onFail": {"maxRetries": 0}}),
    );
    d.report("s1", "turn-end");
    d.wait_status(&pid, "blocked", T);
    let ev = d.policy_events(&pid);
    assert!(!ev.contains(&"policy:retry".to_string()), "{ev:?}");
}

/// A fan-in over agents in two workspaces (a worktree each) gates both:
/// the policy fails while one workspace does not pass, naming it, and
/// passes once both do; a commit fan-in across the two is refused at
/// attach, naming the field.
#[test]
fn a_fan_in_over_two_workspaces_gates_both() {
    let (s, d, _hook) = setup("", None);
    let other = common::workspace_tempdir();
    let (ws1, ws2) = (s.ws.clone(), other.path().to_path_buf());
    d.register("a", &ws1);
    d.register("b", &ws2);
    std::fs::write(ws1.join("flag"), "ok\n").expect("write");
    std::fs::write(ws2.join("flag"), "not yet\n").expect("write");
    let gate = script_gate_json("gates/file-says-ok.sh", &["flag"], 10_000);
    let pid =
        d.attach(json!({"sessionIds": ["a", "b"], "gate": gate, "onFail": {"maxRetries": 1}}));
    d.report("a", "turn-end");
    d.report("b", "turn-end");
    d.wait_status(&pid, "watching", T);
    let failed = events_of(&d, &format!("&policy={pid}"), "policy:failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let reason = failed[0]["payload"]["reason"].as_str().unwrap_or_default();
    assert_has(reason, &ws2.display().to_string());
    let gates = failed[0]["payload"]["gates"].as_array().expect("gates");
    assert_eq!(gates.len(), 2, "one verdict per workspace: {gates:?}");
    std::fs::write(ws2.join("flag"), "ok\n").expect("write");
    d.report("a", "turn-end");
    d.report("b", "turn-end");
    d.wait_status(&pid, "done", T);

    common::daemon::git_repo(&ws1);
    common::daemon::git_repo(&ws2);
    let (code, body) = d.post(
        "/v1/policies",
        &d.operator,
        Some(
            json!({"sessionIds": ["a", "b"], "gate": {"command": "true"}, "then": "commit",
                    "commit": {"paths": ["flag"], "message": "m"}}),
        ),
    );
    assert_eq!(code, 400, "{body}");
    assert_has(&body.to_string(), "sessionIds");
}

/// A gate that could not run while supervision was being paused: its
/// retry is stored after the pause, and when its backoff ends it waits,
/// queued, and says so (`policy:paused` after its `policy:retry`), never
/// silently; enabled again, it runs once and passes.
#[test]
fn a_retry_stored_after_a_pause_says_it_waits_when_due() {
    let s = Scratch::new();
    let calls = common::workspace_tempdir();
    let dir = calls.path().display().to_string();
    // The judge's first call takes until the test lets it go (a file),
    // then cannot run; later calls pass.
    let judge = s.write(
        "slow-flaky.sh",
        "cat >/dev/null\nn=$(( $(cat \"$1/calls\" 2>/dev/null || echo 0) + 1 ))\necho \"$n\" > \"$1/calls\"\n\
         if [ \"$n\" -eq 1 ]; then\n  while [ ! -f \"$1/go\" ]; do sleep 0.05; done\n  echo 'model API 503' >&2\n  exit 1\nfi\necho 'VERDICT: PASS'\n",
    );
    let text = allow_config_with(&[], "infra_retries = 2\ninfra_retry_backoff = \"200ms\"\n")
        + &format!(
            "\n[judge.adapters.j]\ncommand = [\"bash\", \"{}\", \"{dir}\"]\nwrite = [\"{dir}\"]\n",
            judge.display()
        );
    let cfg = s.write("config.toml", &text);
    let env = [
        ("GATEHOST_TEST_NO_CONFIG_POLL", "1"),
        ("GATEHOST_TEST_NO_SWEEP", "1"),
    ];
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, &env);
    d.register("s1", &s.ws);
    let pid =
        d.attach(json!({"sessionId": "s1", "gate": {"judge": {"adapter": "j", "prompt": "p"}}}));
    d.report("s1", "turn-end");
    eventually("the judge runs", || calls.path().join("calls").exists());
    let reload = |text: &str| {
        let tmp = cfg.with_extension("toml.new");
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, &cfg).expect("rename");
        // SAFETY: kill(2) on the test's own child.
        assert_eq!(unsafe { libc::kill(d.pid() as i32, libc::SIGHUP) }, 0);
    };
    // Paused while the judge runs (a gate in flight keeps running).
    reload(&text.replace("[daemon]\n", "[daemon]\nenabled = false\n"));
    eventually("the pause is in force", || {
        d.all_events("&types=config:reloaded")
            .iter()
            .any(|e| e["payload"]["enabled"] == false)
    });
    std::fs::write(calls.path().join("go"), "").expect("go");
    // The judge could not run: a retry, then, its backoff over while
    // paused, the policy says it waits.
    eventually("the due retry says it waits", || {
        let kinds = d.policy_events(&pid);
        let retry = kinds.iter().position(|k| k == "policy:retry");
        retry.is_some() && kinds.iter().rposition(|k| k == "policy:paused") > retry
    });
    assert_eq!(d.policy(&pid)["status"], "queued");
    let calls_made = std::fs::read_to_string(calls.path().join("calls")).expect("calls");
    assert_eq!(calls_made.trim(), "1", "no gate ran while paused");
    // Enabled again: the retry runs once and passes.
    reload(&text);
    d.wait_status(&pid, "done", T);
    let calls_made = std::fs::read_to_string(calls.path().join("calls")).expect("calls");
    assert_eq!(calls_made.trim(), "2");
}

/// The daemon's own silence is not the sessions' (issue 48, item 11): a
/// daemon stopped (SIGSTOP) for twice the heartbeat timeout, or killed and
/// started again after as long, marks none of the sessions that heartbeat
/// whenever it listens stale; one that then stays silent for a whole
/// timeout of the daemon's running still is.
#[test]
fn a_stopped_or_restarted_daemon_does_not_count_its_own_silence_as_the_sessions() {
    let (s, mut d, _hook) = setup("heartbeat_timeout = \"2s\"\n", None);
    for id in ["a", "b", "c"] {
        d.register(id, &s.ws);
    }
    let beat = |d: &Daemon, ids: &[&str], for_ms: u64| {
        let until = Instant::now() + Duration::from_millis(for_ms);
        while Instant::now() < until {
            for id in ids {
                let (code, body) = d.post(
                    &format!("/v1/sessions/{id}/report"),
                    &d.agent,
                    Some(json!({"kind": "heartbeat"})),
                );
                assert_eq!(code, 200, "{body}");
            }
            std::thread::sleep(Duration::from_millis(400));
        }
    };
    beat(&d, &["a", "b", "c"], 1_500);
    // Stopped for twice the timeout: a suspended laptop, a debugger.
    let pid = rustix::process::Pid::from_raw(d.pid() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    std::thread::sleep(Duration::from_secs(4));
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).expect("SIGCONT");
    beat(&d, &["a", "b", "c"], 3_000);
    let stale = events_of(&d, "", "session:stale");
    assert!(stale.is_empty(), "the daemon's stop was counted: {stale:?}");
    // Down for twice the timeout, then up again.
    d.kill9();
    std::thread::sleep(Duration::from_secs(4));
    d.restart();
    beat(&d, &["a", "b", "c"], 3_000);
    let stale = events_of(&d, "", "session:stale");
    assert!(
        stale.is_empty(),
        "the daemon's downtime was counted: {stale:?}"
    );
    // A session that stays silent while the daemon runs is stale as ever.
    beat(&d, &["a", "b"], 3_500);
    eventually("c is stale", || {
        !events_of(&d, "", "session:stale").is_empty()
    });
    let stale: Vec<Value> = events_of(&d, "", "session:stale")
        .iter()
        .map(|e| e["sessionId"].clone())
        .collect();
    assert_eq!(stale, vec![json!("c")]);
}

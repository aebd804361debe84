//! Notifications that reach a person (issues 26 and 28): `[daemon]
//! notify_url` tells of every session's attention events (a hook session
//! registered on first contact, with no URL of its own, included), each
//! webhook in its receiver's shape (raw, Slack, Discord, ntfy) and with its
//! event filter; a standalone hook posts to `[hook] notify_url` when an
//! agent is out of retries or a gate could not run. Real daemon, real
//! hooks, local receivers.

use crate::common;
use crate::common::shorthand::{arg, assert_has, assert_within, str_of};

use common::daemon::{Daemon, allow_config_with, git_scratch};
use common::webhooks::{Receiver, Seen, receiver_answering, verifies};
use common::{Scratch, allow_config};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// Waits (bounded by `T`) until `f` holds.
fn eventually(what: &str, f: impl FnMut() -> bool) {
    common::eventually_within(T, what, f);
}

fn seen(r: &Receiver) -> Vec<Seen> {
    r.seen.lock().expect("lock").clone()
}

fn body_json(s: &Seen) -> Value {
    serde_json::from_slice(&s.3).expect("a JSON body")
}

fn header(s: &Seen, name: &str) -> String {
    s.2.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A hook session the daemon learns of at the hook's first call, given a
/// failing policy by a session rule: out of retries, it is blocked, and
/// `notify_url` (Slack's shape, the default attention filter) is told of
/// that and of nothing else; a raw `webhook_url` filtered to `blocked`
/// gets the raw event only; an ntfy webhook gets its headers; Discord's
/// mentions are off. Every operator delivery is signed with the
/// operator's secret.
#[test]
fn notify_url_tells_a_person_of_a_hook_sessions_block_in_each_receivers_shape() {
    let slack = receiver_answering(None);
    let raw = receiver_answering(None);
    let ntfy = receiver_answering(None);
    let discord = receiver_answering(None);
    let s = git_scratch();
    let secret = s.write("webhook.secret", "operator-secret");
    // (The chats' escaping of the agent's text is the notify module's
    // unit tests'.)
    let rule = s.write(
        "rule.json",
        &json!({
            "gate": {"command": "bash", "args": ["-c", "exit 1"]},
            "onFail": {"maxRetries": 0},
        })
        .to_string(),
    );
    let cfg = allow_config_with(
        &[],
        &format!(
            "webhook_url = \"{}\"\nwebhook_events = [\"blocked\"]\nwebhook_secret_file = \"{}\"\n\
             notify_url = \"{}\"\nnotify_format = \"slack\"\npublic_url = \"https://desk.example\"\n",
            raw.url,
            secret.display(),
            slack.url,
        ),
    ) + &format!(
        "[[daemon.session_policies]]\nagents = [\"claude\"]\npolicy = \"{}\"\n\
         [[daemon.webhooks]]\nurl = \"{}\"\nformat = \"ntfy\"\n\
         [[daemon.webhooks]]\nurl = \"{}\"\nformat = \"discord\"\n",
        rule.display(),
        ntfy.url,
        discord.url,
    );
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    let keys = d.keyring().dir().display().to_string();
    let env = [
        ("GATEHOST_SERVER", d.url.as_str()),
        ("GATEHOST_TOKEN", d.agent.as_str()),
        ("GATEHOST_SESSION_KEYS", keys.as_str()),
    ];
    let state = s.out.join("hook-state");
    let state = state.to_str().expect("utf-8");
    let stop = json!({"session_id": "abc", "cwd": s.ws, "hook_event_name": "Stop",
        "last_assistant_message": "done"});
    // The hook registers `claude:abc` (no notifyUrl: hooks cannot set one),
    // the rule attaches, the gate fails with no retry: blocked.
    let answer: Value = serde_json::from_str(&common::claude_hook_once(
        &["--budget", "30s", "--state-dir", state],
        &env,
        &stop,
    ))
    .expect("JSON");
    assert!(
        answer["systemMessage"].is_string() || answer["decision"] == "block",
        "{answer}"
    );
    let policy = d.agent_ok("GET", "/v1/policies?limit=10", None)["policies"][0].clone();
    let pid = policy["policyId"].as_str().expect("a policy").to_string();
    d.wait_status(&pid, "blocked", T);
    assert!(d.agent_ok("GET", "/v1/sessions/claude:abc", None)["notifyUrl"].is_null());

    for (name, r) in [
        ("slack", &slack),
        ("raw", &raw),
        ("ntfy", &ntfy),
        ("discord", &discord),
    ] {
        eventually(&format!("{name} is told of the block"), || {
            r.kinds().contains(&"policy:blocked".to_string())
        });
    }
    // A moment for anything else to arrive, then: the attention filter let
    // only the block through (the session's registration, the policy's
    // attach, gating and failure are not a person's business).
    std::thread::sleep(Duration::from_millis(500));
    for (name, r) in [
        ("slack", &slack),
        ("raw", &raw),
        ("ntfy", &ntfy),
        ("discord", &discord),
    ] {
        assert_eq!(r.kinds(), vec!["policy:blocked".to_string()], "{name}");
        assert!(
            verifies(b"operator-secret", &seen(r)[0]),
            "{name}: signed by the operator's secret"
        );
        // Every format carries the policy's page (issue 53: a raw
        // receiver's body is the stored event, which has none).
        assert_eq!(
            header(&seen(r)[0], "x-gatehost-link"),
            format!("https://desk.example/ui/#policy/{pid}"),
            "{name}"
        );
    }
    let all = d.all_events("");
    assert!(
        all.iter().any(|e| e["type"] == "policy:failed"),
        "the filter, not the absence of events"
    );

    // Raw: the event itself.
    let r = body_json(&seen(&raw)[0]);
    assert_eq!(
        (r["type"].as_str(), r["policyId"].as_str()),
        (Some("policy:blocked"), Some(pid.as_str()))
    );
    assert_eq!(header(&seen(&raw)[0], "content-type"), "application/json");

    // Slack: one text, the policy's link under public_url.
    let m = body_json(&seen(&slack)[0]);
    let text = m["text"].as_str().expect("text");
    assert_eq!(m.as_object().map(|o| o.len()), Some(1), "{m}");
    assert_has(text, &format!("policy {pid} is blocked"));
    assert_has(
        text,
        &format!("<https://desk.example/ui/#policy/{pid}|Open the policy>"),
    );
    // Discord: content, no mention parsed.
    let m = body_json(&seen(&discord)[0]);
    assert_eq!(m["allowed_mentions"], json!({"parse": []}));
    let content = str_of(&m["content"]);
    assert_has(content, " is blocked**");
    let link = format!("<https://desk.example/ui/#policy/{pid}>");
    assert!(content.ends_with(&link), "{m}");

    // ntfy: plain text, a title, high priority, a click link.
    let n = &seen(&ntfy)[0];
    assert!(header(n, "content-type").starts_with("text/plain"));
    assert_eq!(
        header(n, "title"),
        format!("gatehost: policy {pid} is blocked")
    );
    assert_eq!(header(n, "priority"), "high");
    assert_eq!(
        header(n, "click"),
        format!("https://desk.example/ui/#policy/{pid}")
    );
    assert!(String::from_utf8_lossy(&n.3).contains("out of retries"));
}

/// A standalone hook (no daemon) with `[hook] notify_url`: a failing gate
/// blocks `--max-retries` times, then lets the stop through and posts
/// `hook:capped` once (not again at the next stop while capped); a gate
/// that could not run posts `hook:gate-error`. A passing stop posts
/// nothing. Signed with `[hook] notify_secret_file`.
#[test]
fn a_standalone_hook_tells_a_person_when_the_agent_is_capped_or_a_gate_could_not_run() {
    let r = receiver_answering(None);
    let s = Scratch::new();
    let secret = s.write("hook.secret", "hook-secret");
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}[hook]\nnotify_url = \"{}\"\nnotify_secret_file = \"{}\"\n",
            allow_config(&[]),
            r.url,
            secret.display()
        ),
    );
    let fails = s.write(
        "fails.json",
        &json!({"command": "bash", "args": ["-c", "test -f DONE"]}).to_string(),
    );
    let broken = s.write(
        "broken.json",
        &json!({"command": "not-allowed-program", "args": []}).to_string(),
    );
    let state = s.out.join("hook-state");
    let (cfg, state) = (arg(&cfg), arg(&state));
    let run = |gates: &std::path::Path, session: &str| -> Value {
        let gates = arg(gates);
        let files = ["--gates", &gates, "--config", &cfg, "--state-dir", &state];
        let a = [&files[..], &["--max-retries", "1"]].concat();
        let input = json!({"session_id": session, "cwd": s.ws, "hook_event_name": "Stop",
            "last_assistant_message": "done"});
        let out = common::claude_hook_once(&a, &[], &input);
        if out.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&out).expect("JSON")
        }
    };
    // One retry: a block (nothing posted), then capped (posted once).
    assert_eq!(run(&fails, "one")["decision"], "block");
    assert!(
        r.kinds().is_empty(),
        "a block is the agent's business: {:?}",
        r.kinds()
    );
    let capped = run(&fails, "one");
    assert!(capped["systemMessage"].is_string(), "{capped}");
    eventually("capped is posted", || {
        r.kinds() == vec!["hook:capped".to_string()]
    });
    // Still capped at the next stop: not posted again.
    run(&fails, "one");
    assert_eq!(r.kinds(), vec!["hook:capped".to_string()]);
    let n = body_json(&seen(&r)[0]);
    assert_eq!(n["type"], "hook:capped");
    assert_eq!(n["sessionId"], "one");
    assert_eq!(n["payload"]["agent"], "claude");
    assert!(
        n["payload"]["reason"]
            .as_str()
            .is_some_and(|t| t.contains("DONE") || !t.is_empty()),
        "{n}"
    );
    assert!(verifies(b"hook-secret", &seen(&r)[0]));

    // A gate that cannot run: posted, and the stop blocked once.
    assert_eq!(run(&broken, "two")["decision"], "block");
    eventually("the gate error is posted", || r.kinds().len() == 2);
    assert_eq!(r.kinds()[1], "hook:gate-error");
    assert!(
        body_json(&seen(&r)[1])["payload"]["reason"]
            .as_str()
            .is_some_and(|t| t.contains("not-allowed-program")),
        "{:?}",
        body_json(&seen(&r)[1])
    );

    // Fixed: a pass posts nothing.
    std::fs::write(s.ws.join("DONE"), "").expect("fix");
    assert_eq!(run(&fails, "three"), Value::Null);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(r.kinds().len(), 2);
}

/// A receiver that never answers does not hold the hook past its
/// notification bound: the answer still comes, in time.
#[test]
fn a_notification_receiver_that_hangs_does_not_hold_the_hooks_answer() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hang", listener.local_addr().expect("addr"));
    let _keep = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        &format!("{}[hook]\nnotify_url = \"{url}\"\n", allow_config(&[])),
    );
    let broken = s.write(
        "broken.json",
        &json!({"command": "not-allowed-program", "args": []}).to_string(),
    );
    let state = s.out.join("hook-state");
    let input = json!({"session_id": "h", "cwd": s.ws, "hook_event_name": "Stop",
        "last_assistant_message": "done"});
    let started = Instant::now();
    let (broken, cfg, state) = (arg(&broken), arg(&cfg), arg(&state));
    let files = ["--gates", &broken, "--config", &cfg, "--state-dir", &state];
    let out = common::claude_hook_once(&[&files[..], &["--budget", "3s"]].concat(), &[], &input);
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(answer["decision"], "block", "{answer}");
    // Bounded by the budget (3 s), never by the receiver.
    assert_within(started, Duration::from_secs(10));
}

/// `gatehost session start --notify-url` gives a started session its own
/// webhook (under `notify_url_prefixes`, as a registration's is); a URL
/// outside them is refused, naming the field, and nothing is started.
#[test]
fn session_start_sets_a_notify_url_within_the_prefixes() {
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        &allow_config_with(
            &[],
            "notify_url_prefixes = [\"http://127.0.0.1:9/allowed/\"]\n",
        ),
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    let m = common::marker("notify-start");
    let tag = format!("gatehost-test-{m}");
    let start = |d: &Daemon, id: &str, url: &str| {
        d.cli(
            &[
                "session",
                "start",
                "--id",
                id,
                "--cwd",
                &s.ws.display().to_string(),
                "--notify-url",
                url,
                "--",
                "bash",
                "-c",
                "sleep 30; true",
                &tag,
            ],
            &d.operator,
        )
    };
    let ok = start(&d, "told", "http://127.0.0.1:9/allowed/me");
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let session = d.agent_ok("GET", "/v1/sessions/told", None);
    assert_eq!(
        session["notifyUrl"], "http://127.0.0.1:9/allowed/me",
        "{session}"
    );
    let refused = start(&d, "other", "http://127.0.0.1:9/elsewhere");
    assert_ne!(refused.code, 0);
    assert_has(&refused.stderr, "notifyUrl");
    let (code, _) = d.get("/v1/sessions/other", &d.operator);
    assert_eq!(code, 404);
    assert_eq!(common::survivors(&m).len(), 1, "only the started one runs");
    d.stop();
    common::assert_no_survivors(&m);
}

/// A turn-end no policy watches is said once per session
/// (`session:ungated`, told to the operator), answered `ungated` every
/// time so the hook says it too; a watched session's stop, and a session
/// the daemon started itself, never are.
#[test]
fn a_stop_no_policy_watches_is_said_once_per_session_and_never_for_a_watched_one() {
    let s = Scratch::new();
    let m = common::marker("ungated");
    let told = receiver_answering(None);
    let cfg = allow_config_with(&["true"], &format!("notify_url = \"{}\"\n", told.url));
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("alone", &s.ws);
    for _ in 0..3 {
        let r = d.report("alone", "turn-end");
        assert_eq!(r["ungated"], true, "{r}");
    }
    // Watched by a policy of the operator's.
    d.register("watched", &s.ws);
    d.attach_operator(json!({"sessionId": "watched", "gate": {"command": "true"}}));
    let r = d.report("watched", "turn-end");
    assert_eq!(r["ungated"], false, "{r}");
    let tag = format!("gatehost-test-{m}");
    let sleeper = ["--", "bash", "-c", "sleep 30; true", &tag];
    d.start_session("started", &s.ws, &sleeper);
    let (code, r) = d.post(
        "/v1/sessions/started/report",
        &d.operator,
        Some(json!({"kind": "turn-end"})),
    );
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["ungated"], false, "a session the daemon runs: {r}");

    let ungated = d.all_events("types=session:ungated");
    assert_eq!(ungated.len(), 1, "{ungated:?}");
    assert_eq!(ungated[0]["sessionId"], "alone");
    assert_eq!(ungated[0]["payload"]["turn"], 1, "{}", ungated[0]);
    // Watched only by a policy the agent attached itself (which the
    // agent may make as silent as it likes): said too, and why.
    d.register("self-watched", &s.ws);
    d.attach(json!({"sessionId": "self-watched", "gate": {"command": "true"}}));
    d.report("self-watched", "turn-end");
    let ungated = d.all_events("types=session:ungated");
    assert_eq!(ungated.len(), 2, "{ungated:?}");
    assert_eq!(ungated[1]["sessionId"], "self-watched");
    assert!(
        ungated[1]["payload"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("only policies the agent attached"),
        "{}",
        ungated[1]
    );
    let count = || {
        told.kinds()
            .iter()
            .filter(|k| *k == "session:ungated")
            .count()
    };
    eventually("the operator is told of both", || count() >= 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        told.kinds()
            .iter()
            .filter(|k| *k == "session:ungated")
            .count(),
        2,
        "told once a session: {:?}",
        told.kinds()
    );
    drop(d);
    common::assert_no_survivors(&m);
}

//! Webhooks and the events tail that tell a person of a commit: signed,
//! retried, idempotent, across a restart, never held up by a receiver that
//! does not answer, and as late as its `Retry-After` asks.

use crate::common;

use super::{T, commit_policy, setup_with};
use common::Scratch;
use common::daemon::{Daemon, allow_config_with};
use common::webhooks::{Seen, receiver, receiver_answering, verifies};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn webhooks_tell_of_commit_ready_signed_retried_and_idempotent() {
    let hook = receiver();
    let s0 = Scratch::new();
    let secret = s0.write("hook.secret", "s3cret\n");
    let (s, d) = setup_with(
        &format!(
            "webhook_url = \"{}\"\nwebhook_secret_file = \"{}\"\n",
            hook.url,
            secret.display()
        ),
        "",
    );
    let pid = d.commit_awaiting_ack(&s.ws, "gated change", T);
    let ready_deliveries = hook.wait_for_n("policy:commit-ready", 2, T);
    // Retried after the 500 with the same idempotency id, signed.
    assert_eq!(ready_deliveries[0].0, ready_deliveries[1].0);
    for seen in &ready_deliveries {
        assert!(verifies(b"s3cret", seen), "{:?}", seen.2);
        // Replayed as another delivery, it no longer verifies.
        let mut replay = seen.clone();
        replay
            .2
            .insert("webhook-id", "evt-999999".parse().expect("header"));
        assert!(!verifies(b"s3cret", &replay));
        assert!(!verifies(b"another key", seen));
        let v: Value = serde_json::from_slice(&seen.3).expect("json body");
        assert_eq!(v["policyId"], pid.as_str());
    }
}

#[test]
fn a_sessions_webhook_hears_of_its_blocked_policy_even_across_a_restart() {
    let hook = receiver();
    let s = Scratch::new();
    let prefix = hook.url.trim_end_matches("hook");
    let cfg = s.write(
        "config.toml",
        &allow_config_with(
            &["false"],
            &format!("notify_url_prefixes = [\"{prefix}\"]\n"),
        ),
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    d.agent_ok(
        "POST",
        "/v1/sessions",
        Some(json!({"id": "s1", "cwd": s.ws, "notifyUrl": hook.url})),
    );
    let pid = d.attach(
        json!({"sessionId": "s1", "gate": {"command": "false"}, "onFail": {"maxRetries": 0}}),
    );
    d.report("s1", "turn-end");
    d.wait_status(&pid, "blocked", T);
    let blocked = |n: usize| hook.wait_for_n("policy:blocked", n, T);
    // The first attempt got a 500; the daemon dies before its retry (1 s).
    blocked(1);
    d.restart();
    let seen = blocked(2);
    assert_eq!(
        seen[0].0, seen[1].0,
        "the same idempotency id after the restart"
    );
    // Signed with the daemon's notify key, which is not the operator's
    // webhook secret (the agent chose this URL).
    let notify_key = std::fs::read_to_string(d.data.join("notify.key")).expect("notify.key");
    assert!(verifies(notify_key.trim().as_bytes(), &seen[1]));
    let v: Value = serde_json::from_slice(&seen[1].3).expect("json");
    assert_eq!(v["payload"]["outcome"], "fail");
}

#[test]
fn events_tail_follows_the_bus_for_a_person() {
    let (s, d) = setup_with("", "");
    let mut tail = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
        .args(["events", "tail", "--since", "0"])
        .env("GATEHOST_SERVER", &d.url)
        // A person follows the bus with the operator's token (the agent
        // token reads only the sessions whose keys it presents).
        .env("GATEHOST_TOKEN", &d.operator)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn tail");
    let rx = common::daemon::line_channel(tail.stdout.take().expect("stdout"));
    s.write_ws("a.txt", "a\n");
    let pid = d.attach(commit_policy(&["a.txt"], true));
    d.report("s1", "turn-end");
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + T;
    while !lines
        .iter()
        .any(|l: &String| l.contains("policy:commit-ready"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "tail showed: {lines:?}"
        );
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let _ = tail.kill();
    let _ = tail.wait();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("session:registered") && l.contains("s1")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("policy:passed") && l.contains(&pid)),
        "{lines:?}"
    );
}

/// One queue per URL: a session's `notifyUrl` that accepts connections but
/// never answers delays only its own deliveries; the operator's global
/// webhook still gets every event at once (before, each batch of 32
/// waited for the dead URL's timeout).
#[test]
fn a_url_that_never_answers_delays_only_itself() {
    let live = receiver_answering(None);
    // Accepts (the kernel's backlog) and never answers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_url = format!("http://{}/hook/dead", dead.local_addr().expect("addr"));
    let (s, d) = setup_with(
        &format!(
            "webhook_url = \"{}\"\nwebhook_timeout_ms = 8000\nnotify_url_prefixes = [\"http://{}/hook/\"]\n",
            live.url,
            dead.local_addr().expect("addr")
        ),
        "",
    );
    let (code, v) = d.post(
        "/v1/sessions",
        &d.agent,
        Some(json!({"id": "s2", "cwd": s.ws, "notifyUrl": dead_url})),
    );
    assert!((200..300).contains(&code), "{v}");
    let started = std::time::Instant::now();
    for _ in 0..40 {
        d.report("s2", "turn-start");
    }
    let head = d.operator_ok("GET", "/v1/events?since=0&limit=1000", None)["nextCursor"]
        .as_u64()
        .expect("cursor");
    let deadline = started + Duration::from_secs(4);
    loop {
        let got = live.seen.lock().expect("lock").len() as u64;
        if got >= head {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the global webhook got {got} of {head} events in 4 s: held up by the dead URL"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(dead);
}

/// A receiver that answers 429 with `Retry-After: 3` is not tried again
/// before 3 s (the backoff alone would retry after about 1 s).
#[test]
fn a_receivers_retry_after_is_honoured() {
    let hook = receiver_answering(Some("429 Too Many Requests\r\nretry-after: 3\r\n"));
    let (_s, d) = setup_with(&format!("webhook_url = \"{}\"\n", hook.url), "");
    let deadline = std::time::Instant::now() + T;
    let (first, second) = loop {
        let seen = hook.seen.lock().expect("lock").clone();
        let registered: Vec<&Seen> = seen
            .iter()
            .filter(|(_, k, _, _)| k == "session:registered")
            .collect();
        if registered.len() >= 2 {
            let at = |s: &Seen| -> u128 {
                s.2["x-received-ms"]
                    .to_str()
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            break (at(registered[0]), at(registered[1]));
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no retry\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        second - first >= 3000,
        "retried after {} ms",
        second - first
    );
}

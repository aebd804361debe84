//! Several `gatehost serve` sharing one PostgreSQL database as hosts
//! (issue 51): each claims its host id (`--host-id`, here through
//! `GATEHOST_HOST_ID`), a live holder refuses a second daemon with the same
//! id, a SIGKILLed one is claimed again at once; one event log read alike
//! on every host; and a daemon stopped (SIGSTOP) past its lease, whose id
//! another daemon then claimed, touches nothing when continued: its writes
//! are refused by its fencing number (the test hook `IGNORE_OWN_LEASE`
//! lets them reach the database) and it stops, exit 2.

use super::{Pg, database, store_check, store_section};
use crate::common::daemon::{Daemon, git_repo, serve_command};
use crate::common::{Scratch, allow_config};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

fn config(s: &Scratch, pg: &Pg, lease: &str) -> std::path::PathBuf {
    s.write(
        "config.toml",
        &format!(
            "{}{}lease = \"{lease}\"\n",
            allow_config(&["true"]),
            store_section(&pg.url, &pg.password_file)
        ),
    )
}

/// `gatehost store check --json`'s hosts, by id.
fn hosts(cfg: &Path) -> Vec<Value> {
    let (code, v) = store_check(cfg);
    assert_eq!(code, 0, "{v}");
    v["hosts"].as_array().expect("hosts").clone()
}

fn host<'a>(all: &'a [Value], id: &str) -> &'a Value {
    all.iter()
        .find(|h| h["id"] == id)
        .unwrap_or_else(|| panic!("no host {id}: {all:?}"))
}

fn types(events: &[Value]) -> Vec<(i64, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["cursor"].as_i64().expect("cursor"),
                e["type"].as_str().expect("type").to_string(),
            )
        })
        .collect()
}

#[test]
fn hosts_share_one_database_and_one_event_log_and_a_host_id_is_held_by_one_live_daemon() {
    let Some(pg) = database("store::fleet::hosts_share") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg, "15s");
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    // The same id on another data directory: refused while alpha lives.
    let out = serve_command(&s.etc.join("a2"), &cfg, "127.0.0.1:0")
        .env("GATEHOST_HOST_ID", "alpha")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("host id 'alpha' is held by gatehost pid"),
        "{err}"
    );
    assert!(err.contains(&pg.url), "names the database: {err}");
    // Another id serves beside it.
    let b = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    a.register("claude:on-alpha", &s.ws);
    b.register("claude:on-beta", &s.ws);
    // One log: every host answers the same events, in the same order.
    let seen_a = types(&a.all_events(""));
    let seen_b = types(&b.all_events(""));
    assert_eq!(seen_a, seen_b);
    assert_eq!(
        seen_a
            .iter()
            .filter(|(_, t)| t == "session:registered")
            .count(),
        2,
        "{seen_a:?}"
    );
    // Every host lists the hosts, and says which it is.
    let listed = b.agent_ok("GET", "/v1/hosts", None);
    assert_eq!(listed["this"], "beta", "{listed}");
    let ids: Vec<(&str, bool)> = listed["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| (h["id"].as_str().expect("id"), h["live"] == true))
        .collect();
    assert_eq!(ids, [("alpha", true), ("beta", true)], "{listed}");
    let before = hosts(&cfg);
    assert_eq!(host(&before, "alpha")["live"], true);
    assert_eq!(host(&before, "beta")["live"], true);
    let first = host(&before, "alpha")["fence"].as_i64().expect("fence");
    // A heartbeat connection ended by the server: it makes another and
    // renews, and the daemon serves on.
    let ended = pg.admin_sql(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = '{}' AND application_name LIKE '%(heartbeat)'",
        pg.db.name()
    ));
    assert_eq!(ended, "2", "one heartbeat connection per host");
    a.wait_log("the lease is renewed again", T);
    assert_eq!(a.agent_ok("GET", "/v1/health", None)["ok"], true);
    // SIGKILLed, alpha is claimed again at once (its session lock went
    // with its connections), with a new, larger fencing number.
    a.kill9();
    let started = Instant::now();
    let a2 = Daemon::start_with_env(&s.etc.join("a2"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "not held back by the dead one's lease"
    );
    let after = hosts(&cfg);
    assert!(host(&after, "alpha")["fence"].as_i64().expect("fence") > first);
    assert_eq!(a2.agent_ok("GET", "/v1/health", None)["ok"], true);
    // A clean stop releases the claim.
    let mut b = b;
    assert_eq!(b.stop(), Some(0));
    assert_eq!(host(&hosts(&cfg), "beta")["state"], "stopped");
    // Also a SIGTERM sent the moment the daemon says it listens: the
    // signal is taken before it says so, never left to its default
    // (death, the claim held until its lease ends).
    for round in 0..3 {
        let mut early =
            Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
        assert_eq!(early.stop(), Some(0), "round {round}: {}", early.log());
        assert_eq!(
            host(&hosts(&cfg), "beta")["state"],
            "stopped",
            "round {round}"
        );
    }
    drop(a2);
}

#[test]
fn a_daemon_stopped_past_its_lease_whose_id_was_claimed_again_touches_nothing_when_continued() {
    let Some(pg) = database("store::fleet::stopped_past_its_lease") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg, "3s");
    let mut old = Daemon::start_with_env(
        &s.etc.join("a"),
        &cfg,
        &[
            ("GATEHOST_HOST_ID", "alpha"),
            // Its own deadline would stop it before it writes: the hook
            // lets every write reach the database, which must refuse it.
            ("GATEHOST_TEST_IGNORE_OWN_LEASE", "1"),
        ],
    );
    old.register("claude:s1", &s.ws);
    let old_fence = host(&hosts(&cfg), "alpha")["fence"]
        .as_i64()
        .expect("fence");
    old.signal(libc::SIGSTOP);
    // Past its lease by the database's clock.
    let deadline = Instant::now() + T;
    while host(&hosts(&cfg), "alpha")["live"] == true {
        assert!(Instant::now() < deadline, "the lease never ended");
        std::thread::sleep(Duration::from_millis(200));
    }
    let new = Daemon::start_with_env(&s.etc.join("a2"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let claimed = host(&hosts(&cfg), "alpha")["fence"]
        .as_i64()
        .expect("fence");
    assert!(claimed > old_fence);
    let events_before = new.all_events("");
    // Continued: the old one tries to write (a registration), is refused
    // by the database, and stops.
    old.signal(libc::SIGCONT);
    // Answered (refused) or not at all (it stopped first): never stored.
    if let Some((status, body)) = old.http_try(
        "POST",
        "/v1/sessions",
        Some(&old.agent),
        Some(serde_json::json!({"id": "claude:late", "cwd": s.ws.display().to_string()})),
    ) {
        assert!(!(200..300).contains(&status), "HTTP {status}: {body}");
    }
    let code = old.wait_exit_code(T);
    assert_eq!(code, Some(2), "it stops: {}", old.log());
    let log = old.log();
    assert!(log.contains("lost its host claim"), "says why: {log}");
    // A write of its reached the database (the registration, or its
    // leader's round, whichever ran first once continued: without the
    // hook its own deadline would have refused it first), which refused it
    // by its fencing number.
    assert!(
        log.contains("found=\"by a write the database refused\""),
        "{log}"
    );
    // Nothing of it reached the store after the new claim.
    let events_after = new.all_events("");
    assert_eq!(types(&events_before), types(&events_after));
    assert!(
        !events_after
            .iter()
            .any(|e| e["sessionId"] == "claude:late" || e["session"] == "claude:late"),
        "{events_after:?}"
    );
    assert_eq!(
        pg.sql("SELECT count(*) FROM sessions WHERE id = 'claude:late'"),
        "0"
    );
    assert_eq!(host(&hosts(&cfg), "alpha")["fence"], claimed);
    assert_eq!(new.agent_ok("GET", "/v1/health", None)["ok"], true);
}

#[test]
fn an_operator_s_action_sent_to_another_host_is_carried_out_by_the_host_owning_the_policy() {
    let Some(pg) = database("store::fleet::actions_across_hosts") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg, "15s");
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let b = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    a.register("s1", &s.ws);
    // A session of alpha's is alpha's: beta refuses it, even to the
    // operator (the agent, without its key, is refused before that).
    let (code, body) = b.post(
        "/v1/sessions",
        &b.operator,
        Some(serde_json::json!({"id": "s1", "cwd": s.ws.display().to_string()})),
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "other-host", "{body}");
    let pid = a.commit_awaiting_ack(&s.ws, "across hosts", T);
    // Beta sees it (one store) and approves it: alpha commits.
    assert_eq!(b.policy(&pid)["status"], "awaiting-ack");
    let acked = b.operator_ok(
        "POST",
        &format!("/v1/policies/{pid}/ack"),
        Some(serde_json::json!({"approve": true})),
    );
    assert_eq!(acked["id"], pid.as_str(), "{acked}");
    let done = a.wait_status(&pid, "done", T);
    let sha = done["commitSha"].as_str().expect("committed").to_string();
    let log = crate::common::daemon::git_out(&s.ws, &["log", "--format=%H %s"]);
    assert_eq!(
        log.lines().filter(|l| l.ends_with(" across hosts")).count(),
        1,
        "{log}"
    );
    assert!(log.contains(&sha), "{log}");
    let approved = a
        .all_events(&format!("&policy={pid}"))
        .into_iter()
        .find(|e| e["type"] == "policy:approved")
        .expect("approved");
    assert_eq!(
        approved["payload"]["by"], "the operator (through host beta)",
        "{approved}"
    );
    // Its refusal travels back as the owner gave it.
    let (code, body) = b.post(
        &format!("/v1/policies/{pid}/ack"),
        &b.operator,
        Some(serde_json::json!({"approve": true})),
    );
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error"]["code"], "not-awaiting-ack", "{body}");
    // The agent's token is refused before anything is sent.
    let watching = a.attach(
        serde_json::json!({"sessionId": "s1", "gate": {"command": "true"}, "watchFrom": "now"}),
    );
    assert_eq!(a.policy(&watching)["status"], "watching");
    let (code, _) = b.post(&format!("/v1/policies/{watching}/cancel"), &b.agent, None);
    assert_eq!(code, 403);
    // The owner gone, the action is withdrawn once it was not taken in
    // time, and never happens: alpha, back, finds its policy watching.
    a.kill9();
    let started = Instant::now();
    let (code, body) = b.post(
        &format!("/v1/policies/{watching}/cancel"),
        &b.operator,
        None,
    );
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["error"]["code"], "host-unavailable", "{body}");
    assert!(started.elapsed() >= Duration::from_secs(10));
    let a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(a.policy(&watching)["status"], "watching");
    // Sent again with alpha up, it is cancelled by alpha.
    let cancelled = b.operator_ok("POST", &format!("/v1/policies/{watching}/cancel"), None);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        pg.sql("SELECT string_agg(state, ',' ORDER BY id) FROM host_requests"),
        "done,done,withdrawn,done"
    );
}

//! `gatehost serve` on PostgreSQL hears what other writers commit (issue
//! 51, "one bus for the cluster"): while a daemon runs, its listener
//! listens (`<application name> (listen)`); a long-poll of its API that
//! waits is answered with an event another host appended (another daemon,
//! or a store of this test's own) long before its wait ends; and the
//! listener ends with the daemon.
//!
//! That the long-poll waits before the other host appends is known by the
//! daemon's one long-poll place (`max_long_polls = 1`): a probe answered
//! 503 `too-many-waiters` finds it taken.

use super::{Pg, database, store_section};
use crate::common::daemon::Daemon;
use crate::common::{DAEMON_ROOTS, Scratch, allow_config, workspace_tempdir};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long the long-poll may wait: it must be answered well before.
const WAIT: Duration = Duration::from_secs(50);

/// The listening connections in the test's database.
fn listeners(pg: &Pg) -> String {
    pg.admin_sql(&format!(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = '{}' AND application_name LIKE '% (listen)' AND query LIKE 'LISTEN%'",
        pg.db.name()
    ))
}

/// Waits (bounded) until `f` answers `want`.
fn until(what: &str, want: &str, f: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = f();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {got}, not {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A configuration on the test's database, one long-poll at a time.
fn config(s: &Scratch, pg: &Pg) -> PathBuf {
    s.write(
        "config.toml",
        &format!(
            "{}{}",
            allow_config(&["true"])
                .replace(DAEMON_ROOTS, &format!("{DAEMON_ROOTS}max_long_polls = 1\n")),
            store_section(&pg.url, &pg.password_file)
        ),
    )
}

/// Appends an event of kind `kind` through `store` (another writer).
fn append(store: &gatehost::store::Store, kind: &str) -> i64 {
    store
        .write(|tx| {
            tx.append_event(
                &gatehost::model::event::Event::decode(kind, serde_json::json!({})),
                None,
                None,
                &[],
            )
        })
        .expect("the other writer appends")
}

/// The newest cursor `d` shows.
fn head(d: &Daemon) -> i64 {
    d.all_events("")
        .last()
        .and_then(|e| e["cursor"].as_i64())
        .unwrap_or(0)
}

/// A long-poll of `d` after cursor `since`, waiting when `elsewhere` runs
/// (known by the probe): its answer's event types, and how long it took.
fn long_poll_around(d: &Daemon, since: i64, elsewhere: impl FnOnce()) -> (Vec<String>, Duration) {
    let (code, body, took) = std::thread::scope(|scope| {
        let polling = scope.spawn(|| {
            let t = Instant::now();
            loop {
                let (code, body) = d.get(
                    &format!("/v1/events?since={since}&wait={}s", WAIT.as_secs()),
                    &d.operator,
                );
                // The probe held the place for a moment: again.
                if code != 503 {
                    return (code, body, t.elapsed());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        // Until the long-poll holds the one place. The probe is answered
        // at once when it gets the place instead: an event is there.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (code, body) = d.get("/v1/events?since=0&limit=1&wait=1s", &d.operator);
            if code == 503 {
                break;
            }
            assert_eq!(code, 200, "{body}");
            assert!(Instant::now() < deadline, "the long-poll never waited");
            std::thread::sleep(Duration::from_millis(10));
        }
        elsewhere();
        polling.join().expect("the long-poll")
    });
    assert_eq!(code, 200, "{body}");
    let types = body["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e: &Value| e["type"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (types, took)
}

#[test]
fn a_long_poll_is_answered_with_another_writers_event_and_the_listener_ends_with_the_daemon() {
    let Some(pg) = database("store::postgres_wakeups::another_writer") else {
        return;
    };
    let s = Scratch::new();
    let cfg = config(&s, &pg);
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    until("the daemon's listener", "1", || listeners(&pg));
    let other = gatehost::store::Store::open_postgres(&pg.db.options()).expect("another writer");
    // An event for the probe to find.
    let since = append(&other, "config:held");
    let (types, took) = long_poll_around(&d, since, || {
        append(&other, "config:reloaded");
    });
    assert_eq!(types, ["config:reloaded"]);
    assert!(
        took < WAIT / 2,
        "the long-poll was answered after {took:?}: not woken by the other writer's commit"
    );
    drop(other);
    d.stop();
    until("the listener after the daemon stopped", "0", || {
        listeners(&pg)
    });
}

#[test]
fn a_long_poll_on_one_host_is_answered_with_an_event_of_another_host() {
    let Some(pg) = database("store::postgres_wakeups::two_hosts") else {
        return;
    };
    let s = Scratch::new();
    let ws = workspace_tempdir();
    let cfg = config(&s, &pg);
    let mut alpha =
        Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let mut beta = Daemon::start_with_env(&s.etc.join("b"), &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    until("both hosts' listeners", "2", || listeners(&pg));
    alpha.register("first", ws.path());
    let since = head(&beta);
    assert!(since > 0, "alpha's event, read on beta");
    let (types, took) = long_poll_around(&beta, since, || {
        alpha.register("second", ws.path());
    });
    assert!(types.iter().any(|t| t == "session:registered"), "{types:?}");
    assert!(
        took < WAIT / 2,
        "beta's long-poll was answered after {took:?}: not woken by alpha's commit"
    );
    beta.stop();
    alpha.stop();
    until("the listeners after both daemons stopped", "0", || {
        listeners(&pg)
    });
}

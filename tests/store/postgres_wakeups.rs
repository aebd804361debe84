//! `gatehost serve` on PostgreSQL hears what another writer commits
//! (issue 51, "one bus for the cluster"): while the daemon runs, its
//! listener listens (`<application name> (listen)`), a long-poll of its
//! API is answered with an event that another process appended to the
//! database through the store, long before its wait ends, and the listener
//! ends with the daemon. (Two daemons on one database are refused until
//! host leases are built: the other writer is a store of this test's own.)

use super::{Pg, database, store_section};
use crate::common::daemon::Daemon;
use crate::common::{DAEMON_ROOTS, Scratch, allow_config};
use std::time::{Duration, Instant};

/// The daemon's listening connections in the test's database.
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

#[test]
fn a_long_poll_is_answered_with_another_writers_event_and_the_listener_ends_with_the_daemon() {
    let Some(pg) = database("store::postgres_wakeups") else {
        return;
    };
    let s = Scratch::new();
    // One long-poll at a time: a second one answered 503 tells that the
    // first one waits.
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}{}",
            allow_config(&["true"])
                .replace(DAEMON_ROOTS, &format!("{DAEMON_ROOTS}max_long_polls = 1\n")),
            store_section(&pg.url, &pg.password_file)
        ),
    );
    let mut d = Daemon::start(&s.etc.join("data"), &cfg);
    until("the daemon's listener", "1", || listeners(&pg));
    let other = gatehost::store::Store::open_postgres(&pg.db.options()).expect("another writer");
    // An event before: the probe below is answered at once when it gets
    // the long-polls' one place.
    let head = append(&other, "config:held");
    let wait = Duration::from_secs(50);
    let (code, body, took) = std::thread::scope(|scope| {
        let polling = scope.spawn(|| {
            let t = Instant::now();
            loop {
                let (code, body) = d.get(
                    &format!("/v1/events?since={head}&wait={}s", wait.as_secs()),
                    &d.operator,
                );
                // The probe held the place for a moment: again.
                if code != 503 {
                    return (code, body, t.elapsed());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        // Until the long-poll holds the place (it waits, or is about to).
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
        // Appended by another process: only the listener can wake the
        // daemon's long-poll for it.
        append(&other, "config:reloaded");
        polling.join().expect("the long-poll")
    });
    assert_eq!(code, 200, "{body}");
    let types: Vec<&str> = body["events"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["config:reloaded"], "{body}");
    assert!(
        took < wait / 2,
        "the long-poll was answered after {took:?}: not woken by the other writer's commit"
    );
    drop(other);
    d.stop();
    until("the listener after the daemon stopped", "0", || {
        listeners(&pg)
    });
}

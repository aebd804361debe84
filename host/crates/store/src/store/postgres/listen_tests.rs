//! The wake-ups across hosts (`listen`), against a real PostgreSQL (a
//! fresh database per test, skipped loudly without one): two stores on one
//! database stand for two hosts.

use super::super::testdb::TestDb;
use super::*;
use crate::store::{Store, StoreError};
use serde_json::json;
use std::time::Instant;

/// How long an outcome may take (a reconnection waits 100 ms first).
const DEADLINE: Duration = Duration::from_secs(15);

/// A store on `db` standing for host `host`: its connections' application
/// name says which (the listener's is `<that> (listen)`).
fn host(db: &TestDb, host: &str) -> Store {
    let mut opts = db.options();
    opts.application_name = format!("gatehost-test-{host}");
    Store::open_postgres(&opts).expect("open")
}

/// Appends `n` events in one transaction of `store`; the newest cursor.
fn append(store: &Store, n: usize) -> i64 {
    store
        .write(|tx| {
            let mut last = 0;
            for _ in 0..n {
                last = tx.append_event(
                    &crate::model::event::Event::decode("policy:passed", json!({})),
                    None,
                    None,
                    &[],
                )?;
            }
            Ok(last)
        })
        .expect("append")
}

/// Waits (bounded) until `rx` has changed; then marks it seen and answers
/// its value.
fn next_wakeup(rx: &mut watch::Receiver<i64>, what: &str) -> i64 {
    let until = Instant::now() + DEADLINE;
    loop {
        match rx.has_changed() {
            Ok(true) => return *rx.borrow_and_update(),
            Ok(false) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Ok(false) => panic!("no wake-up within {DEADLINE:?}: {what}"),
            Err(_) => panic!("the wake-ups ended: {what}"),
        }
    }
}

/// Waits (bounded) until `rx`'s value is at least `cursor`; its value.
fn woken_to(rx: &mut watch::Receiver<i64>, cursor: i64, what: &str) -> i64 {
    let until = Instant::now() + DEADLINE;
    loop {
        let v = *rx.borrow_and_update();
        if v >= cursor {
            return v;
        }
        assert!(
            Instant::now() < until,
            "not woken to cursor {cursor} within {DEADLINE:?} (at {v}): {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The backends of `host`'s listener in `db` (its process ids).
fn listeners(db: &TestDb, host: &str) -> Vec<String> {
    db.admin_sql(&format!(
        "SELECT pid FROM pg_stat_activity
          WHERE datname = '{}' AND application_name = 'gatehost-test-{host} (listen)'
            AND query LIKE 'LISTEN%'",
        db.name()
    ))
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .collect()
}

#[test]
fn the_commit_sends_its_newest_cursor_and_a_write_without_events_nothing() {
    assert_eq!(
        commit_sql(Some(42)),
        "SELECT pg_notify('gatehost_events', '42'); COMMIT"
    );
    assert_eq!(commit_sql(None), "COMMIT");
}

#[test]
fn a_notification_of_this_process_s_own_commit_is_no_wake_up() {
    assert_eq!(foreign("7", 7), None);
    assert_eq!(foreign("6", 7), None);
    assert_eq!(foreign("8", 7), Some(8));
    // Not a cursor: a wake-up all the same.
    assert_eq!(foreign("x", 7), Some(0));
}

#[test]
fn an_sqlite_store_has_no_wakeups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("sqlite");
    assert!(store.wakeups().is_none());
}

#[test]
fn a_write_on_one_host_wakes_the_other_hosts_subscriber() {
    let Some(db) = TestDb::new("a_write_on_one_host_wakes_the_other_hosts_subscriber") else {
        return;
    };
    let (a, b) = (host(&db, "a"), host(&db, "b"));
    // Nothing listens before the first subscription.
    assert!(listeners(&db, "b").is_empty());
    let mut rx_b = b.wakeups().expect("PostgreSQL has wake-ups");
    let mut rx_a = a.wakeups().expect("PostgreSQL has wake-ups");
    // Listening, each sends one wake-up (nothing was written yet).
    assert_eq!(next_wakeup(&mut rx_b, "b listening"), 0);
    assert_eq!(next_wakeup(&mut rx_a, "a listening"), 0);
    assert_eq!(listeners(&db, "b").len(), 1, "one listening connection");
    let c = append(&a, 1);
    assert_eq!(woken_to(&mut rx_b, c, "a's write, on b"), c);
    let d = append(&b, 3);
    assert_eq!(woken_to(&mut rx_a, d, "b's write, on a"), d);
    let e = append(&a, 1);
    assert_eq!(woken_to(&mut rx_b, e, "a's second write, on b"), e);
    drop((a, b));
}

#[test]
fn a_rolled_back_transaction_wakes_nobody() {
    let Some(db) = TestDb::new("a_rolled_back_transaction_wakes_nobody") else {
        return;
    };
    let (a, b) = (host(&db, "a"), host(&db, "b"));
    let mut rx_b = b.wakeups().expect("PostgreSQL has wake-ups");
    next_wakeup(&mut rx_b, "b listening");
    // Two events, rolled back: their cursors are given again below, so a
    // notification of this transaction would carry one past the next
    // commit's (and arrive before it).
    let refused = a.write(|tx| {
        for _ in 0..2 {
            tx.append_event(
                &crate::model::event::Event::decode("policy:passed", json!({})),
                None,
                None,
                &[],
            )?;
        }
        Err::<(), _>(StoreError::RolledBack)
    });
    assert!(
        matches!(refused, Err(StoreError::RolledBack)),
        "{refused:?}"
    );
    let c = append(&a, 1);
    assert_eq!(c, 1, "the rolled-back cursors are given again");
    assert_eq!(
        woken_to(&mut rx_b, c, "the commit after the rollback"),
        c,
        "b heard of a cursor of the rolled-back transaction"
    );
}

#[test]
fn a_listener_whose_connection_is_ended_listens_again_and_wakes_once() {
    let Some(db) = TestDb::new("a_listener_whose_connection_is_ended_listens_again_and_wakes_once")
    else {
        return;
    };
    let (a, b) = (host(&db, "a"), host(&db, "b"));
    let mut rx_b = b.wakeups().expect("PostgreSQL has wake-ups");
    next_wakeup(&mut rx_b, "b listening");
    let c = append(&a, 1);
    woken_to(&mut rx_b, c, "a's write before the cut");
    let before = listeners(&db, "b");
    assert_eq!(before.len(), 1, "{before:?}");
    let ended = db.admin_sql(&format!("SELECT pg_terminate_backend({})", before[0]));
    assert_eq!(ended, vec![vec![Some("t".to_string())]]);
    // Nothing is written: the one wake-up is that of listening again.
    assert_eq!(next_wakeup(&mut rx_b, "b listening again"), c);
    let after = listeners(&db, "b");
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before, "a new connection listens");
    // Later writes still wake it.
    let e = append(&a, 1);
    assert_eq!(woken_to(&mut rx_b, e, "a's write after the cut"), e);
    assert!(
        !rx_b.has_changed().expect("listening"),
        "one wake-up for one write"
    );
}

#[test]
fn what_was_committed_while_nothing_listened_is_woken_for_once_listening_again() {
    let Some(db) =
        TestDb::new("what_was_committed_while_nothing_listened_is_woken_for_once_listening_again")
    else {
        return;
    };
    let (a, b) = (host(&db, "a"), host(&db, "b"));
    let mut rx_b = b.wakeups().expect("PostgreSQL has wake-ups");
    next_wakeup(&mut rx_b, "b listening");
    // a's pooled connection is made; then no new connection can be.
    let c = append(&a, 1);
    woken_to(&mut rx_b, c, "a's write before the cut");
    db.admin_sql(&format!(
        "ALTER DATABASE {} WITH ALLOW_CONNECTIONS false",
        db.name()
    ));
    let before = listeners(&db, "b");
    assert_eq!(before.len(), 1, "{before:?}");
    db.admin_sql(&format!("SELECT pg_terminate_backend({})", before[0]));
    let until = Instant::now() + DEADLINE;
    while !listeners(&db, "b").is_empty() {
        assert!(Instant::now() < until, "the listener was not ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Committed while b cannot listen: never notified to it.
    let d = append(&a, 2);
    assert!(
        *rx_b.borrow() < d,
        "b heard of a commit while not listening"
    );
    db.admin_sql(&format!(
        "ALTER DATABASE {} WITH ALLOW_CONNECTIONS true",
        db.name()
    ));
    // Listening again, b wakes, its value the head read then.
    assert_eq!(woken_to(&mut rx_b, d, "b listening again"), d);
    let e = append(&a, 1);
    assert_eq!(woken_to(&mut rx_b, e, "a's write after the cut"), e);
}

#[test]
fn the_listener_ends_with_its_store() {
    let Some(db) = TestDb::new("the_listener_ends_with_its_store") else {
        return;
    };
    let b = host(&db, "b");
    let mut rx_b = b.wakeups().expect("PostgreSQL has wake-ups");
    // A second subscription shares the one listener.
    let mut rx_b2 = b.wakeups().expect("PostgreSQL has wake-ups");
    next_wakeup(&mut rx_b, "b listening");
    next_wakeup(&mut rx_b2, "b listening (second subscriber)");
    assert_eq!(listeners(&db, "b").len(), 1);
    drop(b);
    let until = Instant::now() + DEADLINE;
    while !listeners(&db, "b").is_empty() {
        assert!(
            Instant::now() < until,
            "the listening connection outlived its store"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its task is gone too: the sender it held is dropped.
    while rx_b.has_changed().is_ok() {
        assert!(
            Instant::now() < until,
            "the listener's task outlived its store"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

//! The PostgreSQL backend against a real PostgreSQL (a fresh database per
//! test, `testdb`; skipped loudly without one): the whole conformance
//! suite, and what only this backend must show: cursors given in commit
//! order across hosts, writes serialised across stores, migration under
//! its lock, a newer schema refused, reconnection, the password kept out
//! of every message, and the synchronous bridge inside both tokio runtime
//! flavours.

use super::testdb::TestDb;
use super::*;
use crate::store::{RecordsTx, Store, conformance};
use serde_json::json;
use std::sync::{Arc, mpsc};

/// A fresh store of this backend behind the facade (dropped before its
/// database), or `None`: no test cluster (said on stderr).
pub(super) fn fresh(test: &str) -> Option<(Store, TestDb)> {
    let db = TestDb::new(test)?;
    let store = Store::open_postgres(&db.options()).expect("open");
    Some((store, db))
}

/// The backend itself on a fresh database.
pub(super) fn fresh_pg(test: &str) -> Option<(PgStore, TestDb)> {
    let db = TestDb::new(test)?;
    let store = PgStore::open(&db.options()).expect("open");
    Some((store, db))
}

#[test]
fn conforms_a_policy_round_trips() {
    let Some((store, _db)) = fresh("conforms_a_policy_round_trips") else {
        return;
    };
    conformance::a_policy_round_trips(&store);
}

#[test]
fn conforms_events_append_and_read_back() {
    let Some((store, _db)) = fresh("conforms_events_append_and_read_back") else {
        return;
    };
    conformance::events_append_and_read_back(&store);
}

#[test]
fn conforms_a_rolled_back_write_leaves_nothing() {
    let Some((store, _db)) = fresh("conforms_a_rolled_back_write_leaves_nothing") else {
        return;
    };
    conformance::a_rolled_back_write_leaves_nothing(&store);
}

#[test]
fn conforms_runs_and_operator_records_round_trip() {
    let Some((store, _db)) = fresh("conforms_runs_and_operator_records_round_trip") else {
        return;
    };
    conformance::runs_and_operator_records_round_trip(&store);
}

#[test]
fn conforms_after_commit_runs_once_committed() {
    let Some((store, _db)) = fresh("conforms_after_commit_runs_once_committed") else {
        return;
    };
    conformance::after_commit_runs_once_committed(Arc::new(store));
}

pub(super) fn append(store: &PgStore, kind: &str, session: Option<&str>) -> i64 {
    store
        .write(|tx| {
            tx.append_event(
                &crate::model::event::Event::decode(kind, json!({"n": 1})),
                session,
                None,
                &[],
            )
        })
        .expect("append")
}

/// Waits (bounded) until `n` sessions wait for an advisory lock in the
/// test's database: the database says the writer is blocked (the test
/// goes on on that fact, never on a guess of how long it takes; the short
/// pause only spares the server a flood of admin connections).
fn until_waiting(db: &TestDb, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while db.advisory_waiters() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no writer ever waited for the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Cursors are given in commit order across hosts: while one host's
/// transaction holds cursor N open, another host's append waits for it
/// (never taking N+1 first), and a reader sees neither N nor the head
/// moved; once it commits, both appear, N then N+1.
#[test]
fn a_reader_never_sees_a_cursor_before_an_earlier_one_commits() {
    let Some(db) = TestDb::new("a_reader_never_sees_a_cursor_before_an_earlier_one_commits") else {
        return;
    };
    let a = Arc::new(PgStore::open(&db.options()).expect("open host a"));
    let b = Arc::new(PgStore::open(&db.options()).expect("open host b"));
    let before = append(&a, "session:turn-end", None);
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = {
        let a = a.clone();
        std::thread::spawn(move || {
            a.write(|tx| {
                let n = tx.append_event(
                    &crate::model::event::Event::decode("policy:passed", json!({})),
                    None,
                    None,
                    &[],
                )?;
                held_tx.send(n).expect("say held");
                go_rx.recv().expect("wait for the go");
                Ok(n)
            })
            .expect("the held transaction commits")
        })
    };
    let n = held_rx.recv().expect("held open");
    assert_eq!(n, before + 1);
    let writer = {
        let b = b.clone();
        std::thread::spawn(move || append(&b, "policy:failed", None))
    };
    until_waiting(&db, 1);
    for _ in 0..20 {
        let seen = b
            .events(&EventFilter {
                since: before,
                limit: 10,
                ..Default::default()
            })
            .expect("read");
        assert!(seen.is_empty(), "seen before the commit: {seen:?}");
        assert_eq!(b.head_cursor().expect("head"), before);
    }
    go_tx.send(()).expect("go");
    assert_eq!(holder.join().expect("holder"), n);
    assert_eq!(writer.join().expect("writer"), n + 1, "after the held one");
    let seen: Vec<i64> = b
        .events(&EventFilter {
            since: before,
            limit: 10,
            ..Default::default()
        })
        .expect("read")
        .iter()
        .map(|e| e.cursor)
        .collect();
    assert_eq!(seen, [n, n + 1]);
    assert_eq!(a.head_cursor().expect("head"), n + 1);
}

/// Two stores on one database (two hosts) are serialised: the second's
/// body runs only after the first committed, and reads what it wrote.
#[test]
fn two_stores_on_one_database_write_one_after_the_other() {
    let Some(db) = TestDb::new("two_stores_on_one_database_write_one_after_the_other") else {
        return;
    };
    let a = Arc::new(Store::open_postgres(&db.options()).expect("open host a"));
    let b = Arc::new(Store::open_postgres(&db.options()).expect("open host b"));
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = {
        let a = a.clone();
        std::thread::spawn(move || {
            a.write(|tx| {
                let mut p = PolicyRow::sample("p1", PolicyStatus::Watching, &["s1"]);
                tx.insert_policy(&mut p)?;
                let c = tx.append_event(
                    &crate::model::event::Event::decode("policy:watching", json!({})),
                    None,
                    Some("p1"),
                    &[],
                )?;
                held_tx.send(()).expect("say held");
                go_rx.recv().expect("wait for the go");
                Ok(c)
            })
            .expect("a commits")
        })
    };
    held_rx.recv().expect("held open");
    let other = {
        let b = b.clone();
        std::thread::spawn(move || {
            b.write(|tx| {
                // Runs after a's commit: it reads a's policy and writes on it.
                let mut p = tx.policy("p1")?.expect("a's policy, committed first");
                p.status = PolicyStatus::Gating;
                tx.put_policy(&p)?;
                tx.append_event(
                    &crate::model::event::Event::decode("policy:gating", json!({})),
                    None,
                    Some("p1"),
                    &[],
                )
            })
            .expect("b commits")
        })
    };
    until_waiting(&db, 1);
    assert_eq!(
        b.policy("p1").expect("read"),
        None,
        "nothing before a commits"
    );
    go_tx.send(()).expect("go");
    let first = holder.join().expect("a");
    let second = other.join().expect("b");
    assert_eq!(second, first + 1, "cursors in commit order");
    let p = a.policy("p1").expect("read").expect("there");
    assert_eq!(p.status, PolicyStatus::Gating);
}

/// Two hosts opening an empty database at once: one migrates, the other
/// waits for the migration lock and finds the work done.
#[test]
fn two_opens_racing_on_an_empty_database_migrate_once() {
    let Some(db) = TestDb::new("two_opens_racing_on_an_empty_database_migrate_once") else {
        return;
    };
    // Hold the migration lock so that both must wait for it.
    let holder = PgStore::connect(&db.options(), None).expect("connect");
    let held = holder.pooled().expect("a connection");
    Sql::new(&holder.bridge, &held)
        .batch(&format!(
            "SELECT pg_advisory_lock({})",
            schema::MIGRATE_LOCK
        ))
        .expect("lock");
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let opts = db.options();
            std::thread::spawn(move || pg_migrate(&opts).expect("migrate"))
        })
        .collect();
    until_waiting(&db, 2);
    assert_eq!(
        pg_status(&db.options()).expect("status").schema_version,
        None,
        "nothing migrated while the lock is held"
    );
    Sql::new(&holder.bridge, &held)
        .batch(&format!(
            "SELECT pg_advisory_unlock({})",
            schema::MIGRATE_LOCK
        ))
        .expect("unlock");
    let mut done: Vec<(i64, i64)> = racers
        .into_iter()
        .map(|r| r.join().expect("racer"))
        .collect();
    done.sort_unstable();
    assert_eq!(done, [(0, schema::KNOWN), (schema::KNOWN, schema::KNOWN)]);
    let status = pg_status(&db.options()).expect("status");
    assert_eq!(status.schema_version, Some(schema::KNOWN));
    assert_eq!(status.head_cursor, 0);
}

/// A database written by a newer gatehost is refused, never used; its
/// status says so without migrating.
#[test]
fn a_newer_schema_is_refused() {
    let Some(db) = TestDb::new("a_newer_schema_is_refused") else {
        return;
    };
    let empty = pg_status(&db.options()).expect("status");
    assert_eq!(empty.schema_version, None);
    assert_eq!(empty.known, schema::KNOWN);
    assert!(!empty.server_version.is_empty());
    {
        let store = PgStore::open(&db.options()).expect("open");
        let c = append(&store, "session:turn-end", None);
        assert_eq!(pg_status(&db.options()).expect("status").head_cursor, c);
    }
    db.sql("UPDATE meta SET value = '99' WHERE key = 'schema'");
    let err = Store::open_postgres(&db.options()).expect_err("refused");
    assert!(
        matches!(
            err,
            StoreError::TooNew {
                found: 99,
                known: schema::KNOWN,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(db.name()), "{err}");
    assert!(matches!(
        pg_migrate(&db.options()),
        Err(StoreError::TooNew { .. })
    ));
    assert_eq!(
        pg_status(&db.options()).expect("status").schema_version,
        Some(99)
    );
}

/// The server ends the store's connections (a restart, a cut): the next
/// call answers `Unreachable` or succeeds on a fresh connection, and the
/// store keeps working after.
#[test]
fn the_store_reconnects_after_its_connections_are_ended() {
    let Some((store, db)) = fresh_pg("the_store_reconnects_after_its_connections_are_ended") else {
        return;
    };
    let first = append(&store, "session:turn-end", None);
    assert!(
        db.terminate_connections() >= 1,
        "the store had a connection"
    );
    match store.head_cursor() {
        Ok(head) => assert_eq!(head, first),
        Err(e) => assert!(
            matches!(e, StoreError::Unreachable(_)) && e.is_unavailable(),
            "{e:?}"
        ),
    }
    let second = append(&store, "policy:passed", None);
    assert_eq!(second, first + 1);
    assert!(db.terminate_connections() >= 1);
    // A write finds its pooled connection dead before anything ran: a
    // fresh one, and nothing is lost or doubled.
    let third = store.write(|tx| {
        tx.append_event(
            &crate::model::event::Event::decode("policy:failed", json!({})),
            None,
            None,
            &[],
        )
    });
    match third {
        Ok(c) => assert_eq!(c, second + 1),
        Err(e) => assert!(matches!(e, StoreError::Unreachable(_)), "{e:?}"),
    }
    let fourth = append(&store, "policy:done", None);
    let cursors: Vec<i64> = store
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("read")
        .iter()
        .map(|e| e.cursor)
        .collect();
    assert_eq!(cursors.first(), Some(&first));
    assert_eq!(cursors.last(), Some(&fourth));
    assert!(cursors.windows(2).all(|w| w[1] == w[0] + 1), "{cursors:?}");
}

/// The password appears in no error, no `Debug` of the options or the
/// store, and no location; a URL holding one is refused without echoing
/// it.
#[test]
fn the_password_is_never_shown() {
    let Some(db) = TestDb::new("the_password_is_never_shown") else {
        return;
    };
    let good = db.options();
    // A cluster without passwords (trust) takes any: only the URL part.
    if let Some(pw) = good.password.clone().filter(|p| !p.is_empty()) {
        let wrong = "wrong-Pa55word-q7Z";
        let bad = PgOptions {
            password: Some(wrong.into()),
            ..db.options()
        };
        let err = Store::open_postgres(&bad).expect_err("a wrong password is refused");
        for shown in [err.to_string(), format!("{err:?}"), format!("{bad:?}")] {
            assert!(!shown.contains(wrong), "the password shown: {shown}");
        }
        assert!(err.is_unavailable(), "{err:?}");
        let store = Store::open_postgres(&good).expect("the right password opens");
        for shown in [format!("{store:?}"), format!("{good:?}")] {
            assert!(!shown.contains(&pw), "the password shown: {shown}");
        }
    }
    let secret = "in-the-URL-s3cret";
    let in_url = PgOptions {
        url: format!("postgres://someone:{secret}@127.0.0.1:1/db?password={secret}"),
        password: None,
        application_name: "t".into(),
    };
    let err = Store::open_postgres(&in_url).expect_err("a URL with a password is refused");
    for shown in [err.to_string(), format!("{err:?}"), format!("{in_url:?}")] {
        assert!(!shown.contains(secret), "the password shown: {shown}");
    }
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
}

/// The synchronous interface called from async code: inside a
/// multi-thread runtime and a current-thread one, neither a panic nor a
/// deadlock (and dropping the store there is fine too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_works_inside_a_multi_thread_runtime() {
    let Some((store, _db)) = fresh("the_bridge_works_inside_a_multi_thread_runtime") else {
        return;
    };
    conformance::events_append_and_read_back(&store);
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.head_cursor().expect("head") })
        })
        .collect();
    for t in tasks {
        assert!(t.await.expect("task") >= 2);
    }
    drop(store);
}

#[tokio::test(flavor = "current_thread")]
async fn the_bridge_works_inside_a_current_thread_runtime() {
    let Some((store, _db)) = fresh("the_bridge_works_inside_a_current_thread_runtime") else {
        return;
    };
    conformance::a_policy_round_trips(&store);
    tokio::task::yield_now().await;
    assert_eq!(store.policies(&[]).expect("read").len(), 2);
    drop(store);
}

/// A statement that failed inside a body the body then ignored: the
/// transaction is rolled back and said so, never committed in part.
#[test]
fn a_transaction_with_a_failed_statement_is_never_committed() {
    let Some((store, _db)) = fresh_pg("a_transaction_with_a_failed_statement_is_never_committed")
    else {
        return;
    };
    let r = store.write(|tx| {
        tx.insert_policy(&mut PolicyRow::sample("p1", PolicyStatus::Queued, &["s"]))?;
        let _ignored = tx.sql.execute("INSERT INTO no_such_table VALUES (1)", &[]);
        Ok(())
    });
    assert!(matches!(r, Err(StoreError::Backend(_))), "{r:?}");
    assert_eq!(store.policy("p1").expect("read"), None);
    // The store is fine after it.
    store
        .write(|tx| tx.insert_policy(&mut PolicyRow::sample("p2", PolicyStatus::Queued, &["s"])))
        .expect("a later write");
}

/// An insert of an id already there is an error that leaves the
/// transaction usable (as on SQLite): the body may go on and commit.
#[test]
fn a_duplicate_insert_is_an_error_the_body_may_go_on_after() {
    let Some((store, _db)) = fresh_pg("a_duplicate_insert_is_an_error_the_body_may_go_on_after")
    else {
        return;
    };
    store
        .write(|tx| {
            tx.insert_policy(&mut PolicyRow::sample("p1", PolicyStatus::Queued, &["s"]))?;
            let again = tx.insert_policy(&mut PolicyRow::sample("p1", PolicyStatus::Done, &["s"]));
            assert!(again.is_err());
            tx.put_idempotent("k", "d", "p1")?;
            assert!(tx.put_idempotent("k", "d", "p1").is_err());
            tx.insert_policy(&mut PolicyRow::sample("p2", PolicyStatus::Queued, &["s"]))
        })
        .expect("commits");
    let ids: Vec<String> = store
        .policies(&[])
        .expect("list")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, ["p1", "p2"]);
    assert_eq!(
        store.policy("p1").expect("read").map(|p| p.status),
        Some(PolicyStatus::Queued)
    );
}

/// Sessions page in registration order, and are found by key digest.
#[test]
fn sessions_page_in_registration_order_and_are_found_by_key() {
    let Some((store, _db)) = fresh("sessions_page_in_registration_order_and_are_found_by_key")
    else {
        return;
    };
    let session = |id: &str, key: Option<&str>| SessionRow {
        host: None,
        id: id.into(),
        label: None,
        cwd: "/w".into(),
        workspace: "/w".into(),
        state: crate::store::SessionState::Running,
        turns: 0,
        last_turn_cursor: None,
        last_message: None,
        heartbeat_at: Some(1),
        notify_url: None,
        command: Some(vec!["agent".into()]),
        pid: Some(7),
        created_at: 0,
        updated_at: 0,
        owner: crate::config::Trust::Operator,
        key_digest: key.map(str::to_string),
        stale_at: None,
        workspace_pin: Some(crate::anchor::DirIdentity {
            dev: u64::MAX,
            ino: 3,
        }),
        damage: None,
    };
    store
        .write(|tx| {
            for (id, key) in [("c", Some("k1")), ("a", None), ("b", Some("k2"))] {
                tx.put_session(&session(id, key))?;
            }
            // A replace keeps its place.
            tx.put_session(&session("c", Some("k1")))
        })
        .expect("write");
    let page = store.sessions_page(0, 2).expect("page");
    let ids: Vec<&str> = page.iter().map(|(_, s)| s.id.as_str()).collect();
    assert_eq!(ids, ["c", "a"]);
    let rest = store.sessions_page(page[1].0, 10).expect("page");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1, session("b", Some("k2")), "read back whole");
    assert_eq!(
        store
            .sessions_keyed(&["k2".into(), "k1".into()])
            .expect("keyed"),
        ["c", "b"]
    );
    assert_eq!(store.sessions_to_recover().expect("recover").len(), 3);
}

/// A body that panics leaves nothing: its connection is dropped out of
/// the pool (the server rolls it back and releases the write lock), and
/// other hosts' writes go on.
#[test]
fn a_body_that_panics_leaves_nothing_open() {
    let Some(db) = TestDb::new("a_body_that_panics_leaves_nothing_open") else {
        return;
    };
    let a = PgStore::open(&db.options()).expect("open host a");
    let b = PgStore::open(&db.options()).expect("open host b");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: StoreResult<()> = a.write(|tx| {
            tx.append_event(
                &crate::model::event::Event::decode("policy:passed", json!({})),
                None,
                None,
                &[],
            )?;
            panic!("a bug in the body");
        });
    }));
    assert!(panicked.is_err());
    // Host b takes the write lock at once: a's transaction is gone.
    assert_eq!(
        append(&b, "policy:failed", None),
        1,
        "the panicked append is not kept"
    );
    assert_eq!(append(&a, "policy:done", None), 2, "host a writes again");
    assert_eq!(b.head_cursor().expect("head"), 2);
}

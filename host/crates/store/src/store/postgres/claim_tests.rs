//! A host's write transaction against a real PostgreSQL (skipped loudly
//! without one), now that its `BEGIN`, write lock and claim check travel
//! in one round trip (`transact`): a claim taken again while the write
//! waited for the lock is seen by the check (a statement of its own, from
//! a snapshot taken after the lock), so the old holder writes nothing; a
//! write that finds its connection ended is made again on a fresh one,
//! nothing lost or doubled; and an appended event's cursor, row and
//! webhook deliveries (one pipelined round trip) are what they were.

use super::testdb::TestDb;
use super::*;
use crate::model::event::Event;
use crate::store::interface::RecordsTx;
use crate::store::{EventFilter, SessionRow};
use serde_json::json;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn spec(id: &str) -> HostSpec {
    super::testdb::host_spec(id, 15)
}

fn session(id: &str, notify_url: Option<&str>) -> SessionRow {
    SessionRow {
        notify_url: notify_url.map(str::to_string),
        ..SessionRow::sample(id)
    }
}

/// Waits (bounded) until a session waits for an advisory lock in the
/// test's database: the database says the writer is blocked.
fn until_waiting(db: &TestDb) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.advisory_waiters() < 1 {
        assert!(
            Instant::now() < deadline,
            "no writer ever waited for the lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn append(store: &PgStore, kind: &str, session: Option<&str>) -> StoreResult<i64> {
    store.write(|tx| tx.append_event(&Event::decode(kind, json!({})), session, None, &[]))
}

#[test]
fn a_claim_taken_while_a_write_waits_for_the_lock_fences_that_write() {
    let Some(db) = TestDb::new("claim::a_claim_taken_while_a_write_waits") else {
        return;
    };
    let old = PgStore::open_as(&db.options(), &spec("alpha")).expect("claim alpha");
    old.write(|tx| tx.put_session(&session("s1", None)))
        .expect("the holder writes");
    let other = PgStore::open(&db.options()).expect("open");
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let other = &other;
        let holder = s.spawn(move || {
            other.write(|tx| {
                held_tx.send(()).expect("say held");
                go_rx.recv().expect("wait for the go");
                // Another process claims the id, its holder silent past
                // its lease (by the database's clock), under the lock the
                // waiting write wants.
                tx.sql.execute(
                    "UPDATE hosts SET lease_until = clock_timestamp() - INTERVAL '1 second'
                      WHERE id = 'alpha'",
                    &[],
                )?;
                hosts::claim(&tx.sql, &spec("alpha"), false)
            })
        });
        held_rx.recv().expect("held open");
        let writer = s.spawn(|| old.write(|tx| tx.put_session(&session("s2", None))));
        until_waiting(&db);
        go_tx.send(()).expect("go");
        let fence = holder.join().expect("holder").expect("claimed again");
        let e = writer
            .join()
            .expect("writer")
            .expect_err("the old holder's write is fenced");
        assert!(
            matches!(&e, StoreError::Fenced(m) if m.contains("claimed again") && m.contains(&fence.to_string())),
            "{e}"
        );
    });
    assert!(old.session("s1").expect("read").is_some());
    assert!(
        old.session("s2").expect("read").is_none(),
        "nothing of the fenced write"
    );
    assert!(matches!(old.acting(), Err(StoreError::Fenced(_))));
    drop((old, other));
}

#[test]
fn a_host_s_write_on_an_ended_connection_is_made_again_on_a_fresh_one() {
    let Some(db) = TestDb::new("claim::a_host_s_write_on_an_ended_connection") else {
        return;
    };
    let store = PgStore::open_as(&db.options(), &spec("alpha")).expect("claim alpha");
    let first = append(&store, "session:turn-end", None).expect("append");
    // The pool's connections end (a cut); the heartbeat's, holding the
    // host's session lock, lives on.
    let ended = db.admin_sql(&format!(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
          WHERE a.datname = '{}' AND a.pid <> pg_backend_pid()
            AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid
                              AND l.locktype = 'advisory' AND l.classid = 1734440037)",
        db.name()
    ));
    assert!(!ended.is_empty(), "the store had a pooled connection");
    // Nothing ran on the dead connection: the write is made on a fresh
    // one (or, with every pooled connection dead, answers Unreachable).
    let second = append(&store, "policy:passed", None);
    let third = append(&store, "policy:done", None).expect("the store works again");
    let cursors: Vec<i64> = store
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("read")
        .iter()
        .map(|e| e.cursor)
        .collect();
    match second {
        Ok(c) => {
            assert_eq!(c, first + 1);
            assert_eq!(cursors, vec![first, c, third]);
        }
        Err(e) => {
            assert!(matches!(e, StoreError::Unreachable(_)), "{e:?}");
            assert_eq!(cursors, vec![first, third]);
        }
    }
    assert!(store.acting().is_ok(), "the claim still stands");
}

#[test]
fn an_appended_event_takes_the_next_cursor_and_queues_its_webhooks() {
    let Some(db) = TestDb::new("claim::an_appended_event_takes_the_next_cursor") else {
        return;
    };
    let store = PgStore::open_as(&db.options(), &spec("alpha")).expect("claim alpha");
    store
        .write(|tx| {
            tx.put_session(&session("s1", Some("http://hook/s1")))?;
            tx.put_session(&session("s2", None))
        })
        .expect("sessions");
    let a = append(&store, "session:turn-end", Some("s1")).expect("append");
    let b = append(&store, "session:turn-end", Some("s2")).expect("append");
    let c = store
        .write(|tx| {
            tx.append_event(
                &Event::decode("policy:passed", json!({})),
                None,
                None,
                &["http://global".to_string()],
            )
        })
        .expect("append");
    assert_eq!((b, c), (a + 1, a + 2), "cursors in order, none skipped");
    assert_eq!(store.head_cursor().expect("head"), c);
    let rows =
        db.sql("SELECT event_cursor, url FROM deliveries ORDER BY event_cursor, url COLLATE \"C\"");
    assert_eq!(
        rows,
        vec![
            vec![Some(a.to_string()), Some("http://hook/s1".into())],
            vec![Some(c.to_string()), Some("http://global".into())],
        ]
    );
    let events = db.sql("SELECT cursor, type, session_id FROM events ORDER BY cursor");
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[1][1].as_deref(), Some("session:turn-end"));
    assert_eq!(events[1][2].as_deref(), Some("s2"));
}

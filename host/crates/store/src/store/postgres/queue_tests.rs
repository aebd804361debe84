//! A write transaction's queued statements against a real PostgreSQL
//! (skipped loudly without one): a host's transaction of writes alone is
//! three round trips however many it writes (`BEGIN`, lock, counter and
//! claim; the writes; the commit); a read sees the writes queued before it;
//! a queued write that fails, or an append whose cursor is not the one its
//! transaction expected, fails the whole transaction and nothing of it
//! stays.

use super::testdb::TestDb;
use super::*;
use crate::model::event::Event;
use crate::store::interface::RecordsTx;
use crate::store::{EventFilter, PolicyRow, PolicyStatus, SessionRow};
use serde_json::json;
use std::sync::atomic::Ordering;

fn host(db: &TestDb) -> PgStore {
    PgStore::open_as(&db.options(), &super::testdb::host_spec("alpha", 15)).expect("claim alpha")
}

/// A fresh database, a store claimed for a host on it, the session `s1`
/// written, and the event counter's value; `None`: no test cluster.
fn with_session(test: &str) -> Option<(PgStore, TestDb, i64)> {
    let db = TestDb::new(test)?;
    let store = host(&db);
    store
        .write(|tx| tx.put_session(&SessionRow::sample("s1")))
        .expect("set up");
    let head = store.head_cursor().expect("head");
    Some((store, db, head))
}

fn event(kind: &str) -> Event {
    Event::decode(kind, json!({}))
}

fn trips(store: &PgStore) -> u64 {
    store.bridge.trips.load(Ordering::Relaxed)
}

/// A turn's writes: the session, three events, the policy's bookkeeping.
fn turn(tx: &mut PgTx<'_>, turns: i64) -> StoreResult<Vec<i64>> {
    let mut s = SessionRow::sample("s1");
    s.turns = turns;
    tx.put_session(&s)?;
    let mut cursors = vec![tx.append_event(&event("session:turn-end"), Some("s1"), None, &[])?];
    let mut p = PolicyRow::sample("p1", PolicyStatus::Queued, &["s1"]);
    p.gate_runs = turns;
    tx.put_policy(&p)?;
    cursors.push(tx.append_event(&event("policy:queued"), Some("s1"), Some("p1"), &[])?);
    tx.record_next(&p)?;
    cursors.push(tx.append_event(&event("policy:gating"), Some("s1"), Some("p1"), &[])?);
    Ok(cursors)
}

#[test]
fn a_host_s_transaction_of_writes_alone_is_three_round_trips() {
    let Some(db) = TestDb::new("queue::a_host_s_transaction_of_writes_alone") else {
        return;
    };
    let store = host(&db);
    store
        .write(|tx| {
            tx.put_session(&SessionRow::sample("s1"))?;
            tx.insert_policy(&mut PolicyRow::sample(
                "p1",
                PolicyStatus::Watching,
                &["s1"],
            ))
        })
        .expect("set up");
    // Once to prepare its statements on the connection (cached after).
    let first = store.write(|tx| turn(tx, 1)).expect("first turn");
    let before = trips(&store);
    let second = store.write(|tx| turn(tx, 2)).expect("second turn");
    assert_eq!(
        trips(&store) - before,
        3,
        "BEGIN, lock, counter and claim; the six writes; the commit"
    );
    // Everything committed, the cursors the ones given, in order.
    let last = first.last().copied().expect("cursors");
    assert_eq!(second, vec![last + 1, last + 2, last + 3]);
    let read: Vec<i64> = store
        .events(&EventFilter {
            since: last,
            limit: 100,
            ..EventFilter::default()
        })
        .expect("events")
        .iter()
        .map(|e| e.cursor)
        .collect();
    assert_eq!(read, second);
    assert_eq!(store.session("s1").expect("read").expect("s1").turns, 2);
    assert_eq!(store.policy("p1").expect("read").expect("p1").gate_runs, 2);
    drop(store);
}

#[test]
fn a_read_sees_the_writes_queued_before_it_in_the_same_round_trip() {
    let Some((store, _db, _)) = with_session("queue::a_read_sees_the_writes_queued_before_it")
    else {
        return;
    };
    let write_then_read = |turns: i64| {
        store
            .write(|tx| {
                let mut s = SessionRow::sample("s1");
                s.turns = turns;
                tx.put_session(&s)?;
                let before = trips(&store);
                let seen = tx.session("s1")?.map(|s| s.turns);
                Ok((seen, trips(&store) - before))
            })
            .expect("write")
    };
    // Once to prepare the read on the connection (cached after).
    assert_eq!(write_then_read(6).0, Some(6));
    let (seen, round_trips) = write_then_read(7);
    assert_eq!(seen, Some(7), "the read saw the queued write");
    assert_eq!(round_trips, 1, "the write went out with the read");
    drop(store);
}

#[test]
fn a_queued_write_that_fails_fails_its_transaction_and_nothing_of_it_stays() {
    let Some((store, _db, head)) = with_session("queue::a_queued_write_that_fails") else {
        return;
    };
    let e = store
        .write(|tx| {
            let mut s = SessionRow::sample("s1");
            s.turns = 9;
            tx.put_session(&s)?;
            tx.append_event(&event("session:turn-end"), Some("s1"), None, &[])?;
            // No such policy: its update changes no row.
            tx.put_policy(&PolicyRow::sample("gone", PolicyStatus::Queued, &["s1"]))?;
            tx.append_event(&event("policy:queued"), Some("s1"), None, &[])
        })
        .expect_err("the vanished policy fails the transaction");
    assert!(e.to_string().contains("policy gone vanished"), "{e}");
    assert_eq!(store.head_cursor().expect("head"), head, "no event stayed");
    assert_eq!(store.session("s1").expect("read").expect("s1").turns, 0);
    // The store writes on.
    store
        .write(|tx| tx.append_event(&event("policy:passed"), None, None, &[]))
        .expect("the next write");
    drop(store);
}

#[test]
fn an_append_whose_cursor_is_not_the_one_expected_fails_its_transaction() {
    let Some((store, db, head)) = with_session("queue::an_append_whose_cursor_is_not_expected")
    else {
        return;
    };
    let e = store
        .write(|tx| {
            // The counter read (with the claim's check), a writer that
            // ignores the write lock moves it.
            tx.session("s1")?;
            db.sql("UPDATE event_head SET cursor = cursor + 5");
            tx.append_event(&event("session:turn-end"), Some("s1"), None, &[])
        })
        .expect_err("the moved counter fails the transaction");
    assert!(
        e.to_string().contains(&format!(
            "took cursor {} where its transaction expected {}",
            head + 6,
            head + 1
        )),
        "{e}"
    );
    assert_eq!(
        store.head_cursor().expect("head"),
        head + 5,
        "no event of the transaction stayed"
    );
    assert!(
        store
            .events(&EventFilter {
                limit: 100,
                ..EventFilter::default()
            })
            .expect("events")
            .is_empty()
    );
    drop(store);
}

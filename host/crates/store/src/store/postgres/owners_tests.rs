//! Who owns what, as read back (issue 51, "the page shows which host owns
//! what"): a session, a policy and an event read from a store shared by
//! hosts carry the host that wrote them (the schema's `host` columns,
//! stamped at insert), a connection of no host writes rows of none, and a
//! read of the log by host answers that host's events only, by the index
//! `events_host`. Against a real PostgreSQL (skipped loudly without one).

use super::bridge::col;
use super::testdb::TestDb;
use super::*;
use crate::model::event::Event;
use crate::store::{EventFilter, PolicyRow, PolicyStatus, SessionRow, Store};
use serde_json::json;
use std::time::Duration;

fn host(db: &TestDb, id: &str) -> Store {
    db.host(id, 15)
}

/// Registers session `sid` on `store`, attaches `pid` over it and
/// appends `n` events of it: the cursors.
fn work(store: &Store, sid: &str, pid: &str, n: usize) -> Vec<i64> {
    store
        .write(|tx| {
            tx.put_session(&SessionRow::sample(sid))?;
            let mut p = PolicyRow::sample(pid, PolicyStatus::Watching, &[sid]);
            tx.insert_policy(&mut p)?;
            let mut out = Vec::new();
            for i in 0..n {
                let e = Event::decode("session:heartbeat", json!({"n": i}));
                out.push(tx.append_event(&e, Some(sid), Some(pid), &[])?);
            }
            Ok(out)
        })
        .expect("write")
}

fn of_host(store: &Store, host: Option<&str>) -> Vec<(i64, Option<String>)> {
    store
        .events(&EventFilter {
            host: host.map(str::to_string),
            limit: 1000,
            ..Default::default()
        })
        .expect("events")
        .into_iter()
        .map(|e| (e.cursor, e.host))
        .collect()
}

#[test]
fn rows_and_events_carry_the_host_that_wrote_them_and_the_log_reads_by_host() {
    let Some(db) = TestDb::new("owners::rows_and_events_carry_their_host") else {
        return;
    };
    let a = host(&db, "alpha");
    let b = host(&db, "beta");
    let by_a = work(&a, "s-a", "p-a", 3);
    let by_b = work(&b, "s-b", "p-b", 2);
    // Every host reads every row with its owner.
    for reader in [&a, &b] {
        let s = reader.session("s-a").expect("read").expect("there");
        assert_eq!(s.host.as_deref(), Some("alpha"));
        let p = reader.policy("p-b").expect("read").expect("there");
        assert_eq!(p.host.as_deref(), Some("beta"));
        let listed: Vec<_> = reader
            .policies(&[])
            .expect("list")
            .into_iter()
            .map(|p| (p.id, p.host))
            .collect();
        assert_eq!(
            listed,
            [
                ("p-a".to_string(), Some("alpha".to_string())),
                ("p-b".to_string(), Some("beta".to_string()))
            ]
        );
        let all = of_host(reader, None);
        assert_eq!(all.len(), 5, "{all:?}");
        assert!(
            all.iter()
                .all(|(c, h)| h.as_deref() == Some(if by_a.contains(c) { "alpha" } else { "beta" })),
            "{all:?}"
        );
        let only_b: Vec<i64> = of_host(reader, Some("beta")).iter().map(|e| e.0).collect();
        assert_eq!(only_b, by_b);
        assert!(of_host(reader, Some("gamma")).is_empty());
    }
    // A page by host continues by cursor, as any read of the log.
    let page = a
        .events(&EventFilter {
            since: by_a[0],
            host: Some("alpha".into()),
            limit: 1,
            ..Default::default()
        })
        .expect("page");
    assert_eq!(page.iter().map(|e| e.cursor).collect::<Vec<_>>(), [by_a[1]]);
    // A connection of no host (`gatehost store`, a plain store) writes
    // rows of none.
    let plain = Store::open_postgres(&db.options()).expect("plain");
    let by_none = work(&plain, "s-none", "p-none", 1);
    assert_eq!(
        plain.session("s-none").expect("read").expect("there").host,
        None
    );
    let none = of_host(&plain, None);
    assert_eq!(none.last(), Some(&(by_none[0], None)));
    drop((a, b, plain));
}

#[test]
fn a_read_of_one_host_s_events_is_answered_by_the_events_host_index() {
    let Some(db) = TestDb::new("owners::events_by_host_use_the_index") else {
        return;
    };
    let a = host(&db, "alpha");
    let b = host(&db, "beta");
    work(&a, "s-a", "p-a", 300);
    work(&b, "s-b", "p-b", 5);
    db.sql("ANALYZE events");
    let pg = PgStore::open(&db.options()).expect("open");
    let plan = pg
        .write(|tx| {
            tx.sql.batch("SET LOCAL enable_seqscan = off")?;
            tx.sql
                .query(
                    &format!("EXPLAIN {}", records::EVENTS_OF_HOST),
                    &[&0i64, &50i64, &"beta"],
                )?
                .iter()
                .map(|r| col(r, "QUERY PLAN"))
                .collect::<StoreResult<Vec<String>>>()
        })
        .expect("plan");
    assert!(plan.iter().any(|l| l.contains("events_host")), "{plan:#?}");
    drop((a, b));
}

/// Waits (bounded) until `rx` changed, then marks it seen.
fn woken<T>(rx: &mut tokio::sync::watch::Receiver<T>, what: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match rx.has_changed() {
            Ok(true) => {
                rx.borrow_and_update();
                return;
            }
            Ok(false) if std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(false) => panic!("no wake-up within 15 s: {what}"),
            Err(_) => panic!("the wake-ups ended: {what}"),
        }
    }
}

#[test]
fn a_request_wakes_the_host_it_is_sent_to_and_its_outcome_wakes_its_sender() {
    use crate::store::HostRequestState::{Done, Open, Taken};
    let Some(db) = TestDb::new("owners::requests_wake_their_hosts") else {
        return;
    };
    let a = host(&db, "alpha");
    let b = host(&db, "beta");
    work(&a, "s-a", "p-a", 0);
    let mut to_a = a.request_wakeups().expect("PostgreSQL notifies");
    let mut to_b = b.request_wakeups().expect("PostgreSQL notifies");
    let mut events_a = a.wakeups().expect("PostgreSQL notifies");
    // Each wakes once when it listens (what was sent before is read then).
    woken(&mut to_a, "alpha listens");
    woken(&mut to_b, "beta listens");
    // A request to another host does not wake alpha: once a later event
    // notification on the same connection reached it, nothing else did.
    b.write(|tx| tx.insert_host_request("gamma", "p-a", "{}", 1))
        .expect("send to gamma");
    let cursor = b
        .write(|tx| {
            let e = Event::decode("session:heartbeat", json!({}));
            tx.append_event(&e, None, None, &[])
        })
        .expect("append");
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while *events_a.borrow_and_update() < cursor {
        assert!(
            std::time::Instant::now() < until,
            "alpha never heard {cursor}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(to_a.has_changed().ok(), Some(false), "woken for gamma's");
    // One to alpha wakes alpha; its outcome wakes beta.
    let id = b
        .write(|tx| tx.insert_host_request("alpha", "p-a", "{}", 2))
        .expect("send to alpha");
    woken(&mut to_a, "a request to alpha");
    let due = a.host_requests_due().expect("due");
    assert_eq!(due.iter().map(|r| r.id).collect::<Vec<_>>(), [id]);
    assert!(
        a.write(|tx| tx.move_host_request(id, Open, Taken, None, 3))
            .expect("take")
    );
    assert_eq!(to_b.has_changed().ok(), Some(false), "taking is no outcome");
    assert!(
        a.write(|tx| tx.move_host_request(id, Taken, Done, Some("{}"), 4))
            .expect("answer")
    );
    woken(&mut to_b, "the outcome of beta's request");
    assert_eq!(
        b.host_request(id).expect("read").expect("there").state,
        Done
    );
    drop((a, b));
}

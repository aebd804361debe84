//! The cluster's leader and dead hosts, against a real PostgreSQL
//! (skipped loudly without one): one leader at a time, its term growing at
//! each change of leader, a replaced leader's term refused; a host marked
//! stale once, only past its lease and the grace, its claim then lost to
//! it; a takeover moving exactly the stale host's rows (then theirs to
//! write, the dead host's writes refused), once, and never a live host's.

use super::testdb::TestDb;
use super::*;
use crate::store::{Leadership, PolicyRow, PolicyStatus, Store};

fn host(db: &TestDb, id: &str) -> Store {
    db.host(id, 15)
}

const LEASE: i64 = 15_000;
const GRACE: i64 = 5_000;

fn lead(s: &Store) -> Leadership {
    s.write(|tx| tx.lead(LEASE, GRACE)).expect("lead")
}

fn term(l: &Leadership) -> i64 {
    match l {
        Leadership::Leads { term, .. } => *term,
        other => panic!("does not lead: {other:?}"),
    }
}

/// Moves host `id`'s lease end `secs` seconds into the past (by the
/// database's clock), as its silence would.
fn silent_for(db: &TestDb, id: &str, secs: u32) {
    db.sql(&format!(
        "UPDATE hosts SET lease_until = clock_timestamp() - INTERVAL '{secs} seconds' WHERE id = '{id}'"
    ));
}

fn attach(store: &Store, id: &str, status: PolicyStatus) {
    store
        .write(|tx| {
            let mut p = PolicyRow::sample(id, status, &["s1"]);
            tx.insert_policy(&mut p)?;
            Ok(())
        })
        .expect("insert");
}

#[test]
fn one_host_leads_at_a_time_and_a_replaced_leader_s_term_is_refused() {
    let Some(db) = TestDb::new("leader::one_host_leads_at_a_time") else {
        return;
    };
    let (a, b) = (host(&db, "alpha"), host(&db, "beta"));
    let first = term(&lead(&a));
    // Renewing keeps the term; the other host follows, told who leads.
    assert_eq!(term(&lead(&a)), first);
    match lead(&b) {
        Leadership::Follows { leader, left_ms } => {
            assert_eq!(leader, "alpha");
            assert!(left_ms > 10_000 && left_ms <= LEASE, "{left_ms}");
        }
        other => panic!("beta leads beside alpha: {other:?}"),
    }
    assert!(a.write(|tx| tx.leads(first)).expect("leads"));
    let listed: Vec<(String, bool)> = b
        .hosts()
        .expect("hosts")
        .into_iter()
        .map(|h| (h.id, h.leads))
        .collect();
    assert_eq!(listed, [("alpha".into(), true), ("beta".into(), false)]);
    assert!(!b.write(|tx| tx.leads(first)).expect("leads"));
    // Alpha silent past its leader's lease: beta takes it, a new term.
    db.sql("UPDATE leader SET lease_until = clock_timestamp() - INTERVAL '1 second'");
    let second = term(&lead(&b));
    assert!(second > first, "{first} then {second}");
    assert!(
        !a.write(|tx| tx.leads(first)).expect("leads"),
        "a replaced leader's term is refused"
    );
    assert!(matches!(lead(&a), Leadership::Follows { leader, .. } if leader == "beta"));
    // A connection of no host cannot lead.
    let plain = Store::open_postgres(&db.options()).expect("plain");
    assert!(plain.write(|tx| tx.lead(LEASE, GRACE)).is_err());
    drop((a, b, plain));
}

#[test]
fn a_host_is_stale_once_past_its_lease_and_grace_and_its_claim_is_then_lost() {
    let Some(db) = TestDb::new("leader::a_host_is_stale_once") else {
        return;
    };
    let (a, b) = (host(&db, "alpha"), host(&db, "beta"));
    attach(&a, "p-open", PolicyStatus::Gating);
    attach(&a, "p-done", PolicyStatus::Done);
    attach(&b, "p-beta", PolicyStatus::Gating);
    // Past its lease but within the grace: not stale.
    silent_for(&db, "alpha", 2);
    let found = b.write(|tx| tx.mark_stale_hosts(GRACE)).expect("mark");
    assert!(found.is_empty(), "{found:?}");
    // The leader's next due time names that host's lease and grace.
    match lead(&b) {
        Leadership::Leads {
            next_due_ms: Some(due),
            ..
        } => assert!((1_000..=3_500).contains(&due), "{due}"),
        other => panic!("{other:?}"),
    }
    silent_for(&db, "alpha", 6);
    let found = b.write(|tx| tx.mark_stale_hosts(GRACE)).expect("mark");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, "alpha");
    assert_eq!(found[0].policies, ["p-open"], "its unsettled policies only");
    assert_eq!(found[0].pid, i64::from(std::process::id()));
    // Once: found again by nobody.
    let again = b.write(|tx| tx.mark_stale_hosts(GRACE)).expect("mark");
    assert!(again.is_empty(), "{again:?}");
    // A host whose own lease ran out writes nothing, so it marks nobody
    // (itself included): the refusal is its lapsed lease, and it stays live.
    silent_for(&db, "beta", 60);
    let own = b.write(|tx| tx.mark_stale_hosts(GRACE));
    assert!(matches!(own, Err(StoreError::LeaseLapsed(_))), "{own:?}");
    let beta = db.sql("SELECT state FROM hosts WHERE id = 'beta'");
    assert_eq!(beta[0][0].as_deref(), Some("live"));
    db.sql("UPDATE hosts SET lease_until = clock_timestamp() + INTERVAL '15 seconds' WHERE id = 'beta'");
    // The stale host's claim is lost to it: its write is refused, for good.
    let e =
        a.write(|tx| tx.put_policy(&PolicyRow::sample("p-open", PolicyStatus::Queued, &["s1"])));
    assert!(matches!(e, Err(StoreError::Fenced(_))), "{e:?}");
    let state = db.sql("SELECT state FROM hosts WHERE id = 'alpha'");
    assert_eq!(state[0][0].as_deref(), Some("stale"));
    drop((a, b));
}

#[test]
fn a_takeover_moves_exactly_the_stale_host_s_rows_once_and_never_a_live_host_s() {
    let Some(db) = TestDb::new("leader::a_takeover_moves_exactly_the_stale_host_s_rows") else {
        return;
    };
    let (a, b, c) = (host(&db, "alpha"), host(&db, "beta"), host(&db, "gamma"));
    attach(&a, "p-open", PolicyStatus::Committing);
    attach(&a, "p-done", PolicyStatus::Done);
    attach(&c, "p-gamma", PolicyStatus::Gating);
    // A live host is never taken.
    assert_eq!(b.write(|tx| tx.take_over("gamma")).expect("take"), None);
    assert_eq!(b.write(|tx| tx.take_over("alpha")).expect("take"), None);
    silent_for(&db, "alpha", 30);
    b.write(|tx| tx.mark_stale_hosts(GRACE)).expect("mark");
    let moved = b
        .write(|tx| tx.take_over("alpha"))
        .expect("take")
        .expect("alpha is stale");
    assert_eq!(moved.policies, ["p-open"]);
    assert!(moved.routines.is_empty(), "{moved:?}");
    assert_eq!(moved.fence, b.host().expect("beta").1, "the taker's number");
    let owners = db.sql("SELECT id, host FROM policies ORDER BY id");
    let owners: Vec<(String, String)> = owners
        .into_iter()
        .map(|r| {
            (
                r[0].clone().unwrap_or_default(),
                r[1].clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("p-done".to_string(), "beta".to_string()),
            ("p-gamma".into(), "gamma".into()),
            ("p-open".into(), "beta".into()),
        ]
    );
    let alpha = b
        .hosts()
        .expect("hosts")
        .into_iter()
        .find(|h| h.id == "alpha")
        .expect("alpha");
    assert_eq!(
        (alpha.state.as_str(), alpha.taken_by.as_deref()),
        ("taken", Some("beta"))
    );
    // Beta's to write now, and beta's loops find it; once only.
    b.write(|tx| tx.put_policy(&PolicyRow::sample("p-open", PolicyStatus::Queued, &["s1"])))
        .expect("beta writes what it took");
    assert_eq!(b.write(|tx| tx.take_over("alpha")).expect("again"), None);
    // The setting that let the move through ended with its transaction.
    let e =
        b.write(|tx| tx.put_policy(&PolicyRow::sample("p-gamma", PolicyStatus::Queued, &["s1"])));
    assert!(matches!(e, Err(StoreError::NotOwner(_))), "{e:?}");
    // Alpha's claim, taken again by a new process, finds none of it.
    drop(a);
    let back = host(&db, "alpha");
    let states = db.sql("SELECT state, taken_by FROM hosts WHERE id = 'alpha'");
    assert_eq!(states[0][0].as_deref(), Some("live"));
    assert_eq!(states[0][1], None);
    let e =
        back.write(|tx| tx.put_policy(&PolicyRow::sample("p-open", PolicyStatus::Queued, &["s1"])));
    assert!(matches!(e, Err(StoreError::NotOwner(_))), "{e:?}");
    drop((back, b, c));
}

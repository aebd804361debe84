//! Hosts sharing one database, against a real PostgreSQL (skipped loudly
//! without one): a claim refused while its holder lives, taken again after
//! a release or once its lease ran out; the old holder then fenced by the
//! database (its write refused, its daemon told), a lapsed lease refusing
//! writes until renewed, each host's loops reading its own rows, another
//! host's row refused by the schema's trigger, and rows from before hosts
//! adopted by the first claim.

use super::testdb::TestDb;
use super::*;
use crate::store::{PolicyRow, PolicyStatus, Store};
use std::time::{Duration, Instant};

use super::testdb::host_spec as spec;

fn host(db: &TestDb, id: &str, lease_secs: u64) -> Store {
    db.host(id, lease_secs)
}

fn attach(store: &Store, id: &str, status: PolicyStatus) -> PolicyRow {
    store
        .write(|tx| {
            let mut p = PolicyRow::sample(id, status, &["s1"]);
            tx.insert_policy(&mut p)?;
            Ok(p)
        })
        .expect("insert")
}

/// Ends host `id`'s lease now, by the database's clock (as its silence
/// past the lease would), its fencing number unchanged.
fn expire(db: &TestDb, id: &str) {
    db.sql(&format!(
        "UPDATE hosts SET lease_until = clock_timestamp() - INTERVAL '1 second' WHERE id = '{id}'"
    ));
}

fn fence_of(db: &TestDb, id: &str) -> i64 {
    db.sql(&format!("SELECT fence FROM hosts WHERE id = '{id}'"))[0][0]
        .as_deref()
        .expect("a claim")
        .parse()
        .expect("a number")
}

#[test]
fn a_live_claim_refuses_a_second_holder_and_a_release_lets_the_id_be_claimed_again() {
    let Some(db) = TestDb::new("hosts::a_live_claim_refuses_a_second_holder") else {
        return;
    };
    let a = host(&db, "alpha", 15);
    let (id, first) = a.host().expect("a host");
    assert_eq!(id, "alpha");
    let e = Store::open_postgres_as(&db.options(), &spec("alpha", 15)).expect_err("held");
    assert!(
        matches!(&e, StoreError::HostTaken(m) if m.contains("alpha")),
        "{e}"
    );
    // Another id shares the database beside it.
    let b = host(&db, "beta", 15);
    assert!(b.host().expect("b").1 > first);
    a.release_host();
    let e = a.write(|_| Ok(())).expect_err("released");
    assert!(matches!(e, StoreError::Fenced(_)), "{e}");
    let again = host(&db, "alpha", 15);
    let (_, second) = again.host().expect("claimed again");
    assert!(
        second > first,
        "a new, larger fencing number: {first} then {second}"
    );
    let rows = db.sql("SELECT id, state FROM hosts ORDER BY id");
    assert_eq!(rows.len(), 2, "{rows:?}");
    drop((a, b, again));
}

#[test]
fn a_claim_taken_again_after_its_lease_fences_the_old_holder_in_the_database() {
    let Some(db) = TestDb::new("hosts::a_claim_taken_again_fences_the_old_holder") else {
        return;
    };
    let old = host(&db, "alpha", 15);
    let mut lost = old.claim_lost().expect("a host");
    attach(&old, "p1", PolicyStatus::Watching);
    // The old holder is silent past its lease (stopped, cut off): a new
    // process claims the id, though the old one's connections live on.
    expire(&db, "alpha");
    let new = host(&db, "alpha", 15);
    let (_, fence) = new.host().expect("claimed");
    assert_eq!(fence_of(&db, "alpha"), fence);
    // The old one's own deadline has not passed yet: only the database's
    // check stands between its write and the store.
    assert!(old.acting().is_ok(), "its monotonic deadline still runs");
    let mut p = old.policy("p1").expect("read").expect("there");
    p.status = PolicyStatus::Queued;
    let e = old.write(|tx| tx.put_policy(&p)).expect_err("fenced");
    assert!(
        matches!(&e, StoreError::Fenced(m) if m.contains("claimed again")),
        "{e}"
    );
    assert!(!e.is_unavailable(), "final: the daemon stops");
    assert_eq!(
        new.policy("p1").expect("read").expect("there").status,
        PolicyStatus::Watching,
        "nothing written"
    );
    assert!(lost.has_changed().expect("open"), "the daemon is told");
    assert!(lost.borrow_and_update().is_some());
    // And for good: every later write is refused before it begins.
    assert!(matches!(old.acting(), Err(StoreError::Fenced(_))));
    // The new holder writes.
    new.write(|tx| tx.put_policy(&p))
        .expect("the holder writes");
    drop((old, new));
}

#[test]
fn a_lapsed_lease_refuses_writes_until_the_heartbeat_renews_it() {
    let Some(db) = TestDb::new("hosts::a_lapsed_lease_refuses_writes") else {
        return;
    };
    // A 3 s lease: renewed every second.
    let a = host(&db, "alpha", 3);
    expire(&db, "alpha");
    let e = a
        .write(|tx| {
            let mut p = PolicyRow::sample("p1", PolicyStatus::Watching, &["s1"]);
            tx.insert_policy(&mut p)
        })
        .expect_err("lapsed");
    assert!(matches!(e, StoreError::LeaseLapsed(_)), "{e}");
    assert!(e.is_unavailable(), "a retry later may succeed");
    assert_eq!(a.policy("p1").expect("read"), None, "nothing written");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tried = a.write(|tx| {
            let mut p = PolicyRow::sample("p1", PolicyStatus::Watching, &["s1"]);
            tx.insert_policy(&mut p)
        });
        match tried {
            Ok(()) => break,
            Err(StoreError::LeaseLapsed(_)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the heartbeat never renewed the lease: {e}"),
        }
    }
    assert!(a.policy("p1").expect("read").is_some());
}

#[test]
fn a_renewal_that_finds_its_claim_replaced_loses_it_and_tells_the_daemon() {
    let Some(db) = TestDb::new("hosts::a_renewal_finds_its_claim_replaced") else {
        return;
    };
    let a = host(&db, "alpha", 3);
    let mut lost = a.claim_lost().expect("a host");
    db.sql("UPDATE hosts SET fence = nextval('host_fences') WHERE id = 'alpha'");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lost.has_changed().expect("open") {
        assert!(Instant::now() < deadline, "the heartbeat never noticed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let why = lost.borrow_and_update().clone().expect("why");
    assert!(why.contains("claimed again"), "{why}");
    assert!(matches!(a.acting(), Err(StoreError::Fenced(_))));
}

#[test]
fn each_host_s_loops_read_its_own_rows_and_another_host_s_row_is_refused() {
    let Some(db) = TestDb::new("hosts::each_host_reads_its_own_rows") else {
        return;
    };
    let a = host(&db, "alpha", 15);
    let b = host(&db, "beta", 15);
    let pa = attach(&a, "pa", PolicyStatus::Queued);
    attach(&b, "pb", PolicyStatus::Queued);
    let ids = |s: &Store| -> Vec<String> {
        s.policies_to_sweep(true)
            .expect("sweep")
            .into_iter()
            .map(|p| p.id)
            .collect()
    };
    assert_eq!(ids(&a), ["pa"]);
    assert_eq!(ids(&b), ["pb"]);
    // What a person reads is the cluster's.
    assert_eq!(a.policies(&[]).expect("all").len(), 2);
    // Another host's policy is changed by its owner alone, whatever the
    // statement: the schema's trigger refuses it.
    let mut taken = pa.clone();
    taken.status = PolicyStatus::Cancelled;
    let e = b.write(|tx| tx.put_policy(&taken)).expect_err("not b's");
    assert!(
        matches!(&e, StoreError::NotOwner(m) if m.contains("pa") && m.contains("alpha")),
        "{e}"
    );
    assert_eq!(
        a.policy("pa").expect("read").expect("there").status,
        PolicyStatus::Queued
    );
    a.write(|tx| tx.put_policy(&taken)).expect("its owner");
    // A session is its host's: registered again elsewhere, refused; a
    // policy over it is attached on its host only.
    let s1 = crate::store::SessionRow::sample("s1");
    a.write(|tx| tx.put_session(&s1)).expect("a's session");
    let e = b.write(|tx| tx.put_session(&s1)).expect_err("squatted");
    assert!(
        matches!(&e, StoreError::NotOwner(m) if m.contains("s1")),
        "{e}"
    );
    let e = b
        .write(|tx| {
            let mut p = PolicyRow::sample("pb2", PolicyStatus::Watching, &["s1"]);
            tx.insert_policy(&mut p)
        })
        .expect_err("over a's session");
    assert!(
        matches!(&e, StoreError::NotOwner(m) if m.contains("s1") && m.contains("alpha")),
        "{e}"
    );
    assert_eq!(a.policy("pb2").expect("read"), None);
    drop((a, b));
}

#[test]
fn rows_written_before_hosts_are_adopted_by_the_first_claim() {
    let Some(db) = TestDb::new("hosts::rows_before_hosts_are_adopted") else {
        return;
    };
    {
        // A store of no host (one daemon, as before schema 2).
        let plain = Store::open_postgres(&db.options()).expect("open");
        attach(&plain, "old", PolicyStatus::Queued);
    }
    let a = host(&db, "alpha", 15);
    assert_eq!(
        db.sql("SELECT host FROM policies WHERE id = 'old'")[0][0].as_deref(),
        Some("alpha")
    );
    assert_eq!(a.policies_to_sweep(true).expect("sweep").len(), 1);
    let b = host(&db, "beta", 15);
    assert!(b.policies_to_sweep(true).expect("sweep").is_empty());
    drop((a, b));
}

#[test]
fn store_check_lists_the_hosts_with_their_fencing_numbers_and_leases() {
    let Some(db) = TestDb::new("hosts::store_check_lists_the_hosts") else {
        return;
    };
    let a = host(&db, "alpha", 15);
    let b = host(&db, "beta", 15);
    b.release_host();
    let status = pg_status(&db.options()).expect("status");
    let seen: Vec<(&str, &str, bool)> = status
        .hosts
        .iter()
        .map(|h| (h.id.as_str(), h.state.as_str(), h.live))
        .collect();
    assert_eq!(seen, [("alpha", "live", true), ("beta", "stopped", false)]);
    assert_eq!(status.hosts[0].fence, a.host().expect("a").1);
    assert_eq!(status.hosts[0].pid, i64::from(std::process::id()));
    assert!(status.hosts[0].lease_until > status.hosts[0].heartbeat_at);
    drop((a, b));
}

//! The cluster's tokens in PostgreSQL (`tokens`), against a real database
//! (a fresh one per test, skipped loudly without one): stores on one
//! database stand for hosts.

use super::super::testdb::TestDb;
use crate::store::Store;
use crate::store::tokens::TokenName;
use std::time::{Duration, Instant};

fn host(db: &TestDb, id: &str) -> Store {
    db.host(id, 15)
}

/// The first host seeds the cluster's tokens; a second host's own are
/// not stored, it is answered the first's; a rotation by the second
/// makes the generation grow, names it, wakes the first's token
/// receiver, and the first reads the new value.
#[test]
fn the_first_host_seeds_the_tokens_and_a_rotation_wakes_the_others() {
    let Some(db) = TestDb::new("tokens_seed_and_rotate") else {
        return;
    };
    let alpha = host(&db, "alpha");
    let beta = host(&db, "beta");
    assert_eq!(
        alpha
            .shared_tokens()
            .expect("shared")
            .cluster_tokens()
            .expect("read"),
        None
    );
    assert_eq!(
        alpha
            .shared_tokens()
            .expect("shared")
            .token_generations()
            .expect("read"),
        None
    );
    let seeded = alpha
        .shared_tokens()
        .expect("shared")
        .seed_cluster_tokens("alpha-agent-0123456789", "alpha-operator-0123456789")
        .expect("seed");
    assert_eq!(seeded.agent.value, "alpha-agent-0123456789");
    assert_eq!(seeded.generations(), (1, 1));
    assert_eq!(seeded.operator.rotated_by.as_deref(), Some("alpha"));
    let found = beta
        .shared_tokens()
        .expect("shared")
        .seed_cluster_tokens("beta-agent-0123456789", "beta-operator-0123456789")
        .expect("seed");
    assert_eq!(found, seeded, "the first host's tokens stay");
    let mut woken = alpha.token_wakeups().expect("PostgreSQL wakes");
    // Listening: one wake-up first.
    wait_changed(&mut woken, "listening");
    let rotated = beta
        .shared_tokens()
        .expect("shared")
        .rotate_cluster_tokens(&[(TokenName::Operator, "beta-new-operator-0123456789")])
        .expect("rotate");
    assert_eq!(rotated.generations(), (1, 2));
    assert_eq!(rotated.operator.rotated_by.as_deref(), Some("beta"));
    assert_eq!(rotated.agent, seeded.agent, "the agent token untouched");
    wait_changed(&mut woken, "the rotation");
    assert_eq!(
        alpha
            .shared_tokens()
            .expect("shared")
            .token_generations()
            .expect("read"),
        Some((1, 2))
    );
    let read = alpha
        .shared_tokens()
        .expect("shared")
        .cluster_tokens()
        .expect("read")
        .expect("stored");
    assert_eq!(read.operator.value, "beta-new-operator-0123456789");
    // The SQLite store shares nothing.
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = Store::open(dir.path()).expect("sqlite");
    assert!(sqlite.shared_tokens().is_none());
    assert!(sqlite.token_wakeups().is_none());
}

/// Hosts seeding at once: exactly one host's tokens are stored, and every
/// host is answered the same.
#[test]
fn hosts_seeding_at_once_all_end_with_one_set() {
    let Some(db) = TestDb::new("tokens_seed_race") else {
        return;
    };
    let stores: Vec<Store> = (0..4).map(|i| host(&db, &format!("h{i}"))).collect();
    let answers: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, st)| {
                s.spawn(move || {
                    st.shared_tokens()
                        .expect("shared")
                        .seed_cluster_tokens(
                            &format!("agent-of-host-{i}-0123456789"),
                            &format!("operator-of-host-{i}-0123456789"),
                        )
                        .expect("seed")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect()
    });
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    let winner = answers[0].agent.value.clone();
    assert!(
        answers[0]
            .operator
            .value
            .starts_with(&winner.replace("agent", "operator")[..24]),
        "both tokens from the same host"
    );
    assert_eq!(
        db.sql("SELECT count(*) FROM cluster_tokens")[0][0].as_deref(),
        Some("2")
    );
}

fn wait_changed(rx: &mut tokio::sync::watch::Receiver<u64>, what: &str) {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        match rx.has_changed() {
            Ok(true) => {
                rx.borrow_and_update();
                return;
            }
            Ok(false) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Ok(false) => panic!("no wake-up within 15 s: {what}"),
            Err(_) => panic!("the wake-ups ended: {what}"),
        }
    }
}

/// A listener that lost its connection wakes the tokens' receiver once it
/// listens again: a rotation notified meanwhile is found by its
/// generation then.
#[test]
fn listening_again_after_a_lost_connection_wakes_the_tokens_receiver() {
    let Some(db) = TestDb::new("tokens_wake_on_relisten") else {
        return;
    };
    let store = Store::open_postgres(&db.options()).expect("open");
    let mut woken = store.token_wakeups().expect("PostgreSQL wakes");
    wait_changed(&mut woken, "listening");
    assert!(db.terminate_connections() > 0);
    wait_changed(&mut woken, "listening again");
}

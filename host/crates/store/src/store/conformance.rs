//! The store's contract as tests, written against the interface alone
//! (`Store`, its reads as `&dyn Records`, `&mut Tx<'_>`): no SQL, no
//! backend type. Every backend runs each of them on a fresh, empty store
//! of its own (the SQLite backend's `sqlite::tests` does, one `#[test]`
//! per function); a PostgreSQL backend calls the same functions with its
//! store. It must never reach past the interface (a check that needs SQL
//! belongs in the backend's own tests).

use super::{
    EventFilter, PolicyRow, PolicyStatus, Records, RoutineRow, RoutineStepRow, SessionRow,
    StandingRow, StepStatus, Store, StoreError, StoreResult, Tx, now_ms,
};
use crate::model::as_given::AsGiven;
use crate::model::event::Event;
use crate::model::routine::RunState;
use serde_json::json;
use std::sync::{Arc, Mutex};

fn event(kind: &str) -> Event {
    Event::decode(kind, json!({"n": 1}))
}

fn session(id: &str, url: Option<&str>) -> SessionRow {
    SessionRow {
        notify_url: url.map(str::to_string),
        ..SessionRow::sample(id)
    }
}

/// Inserts a policy through a transaction (written as engine code is: a
/// function over `&mut Tx<'_>`).
fn attach(tx: &mut Tx<'_>, id: &str, status: PolicyStatus) -> StoreResult<PolicyRow> {
    let mut p = PolicyRow::sample(id, status, &["s1"]);
    tx.insert_policy(&mut p)?;
    Ok(p)
}

/// A policy round-trips: inserted (given the next `seq`), read back equal
/// inside the transaction and after it, written whole and by its
/// bookkeeping ops, listed by status; a missing one reads as `None` and
/// is never written by `put_policy`.
pub(crate) fn a_policy_round_trips(store: &Store) {
    let reads: &dyn Records = &**store;
    assert_eq!(reads.policy("p1").expect("read"), None);
    let (first, second) = store
        .write(|tx| {
            let a = attach(tx, "p1", PolicyStatus::Watching)?;
            let b = attach(tx, "p2", PolicyStatus::Queued)?;
            assert_eq!(tx.policy("p1")?.as_ref(), Some(&a), "a tx reads its writes");
            Ok((a, b))
        })
        .expect("insert");
    assert!(second.seq > first.seq, "{} then {}", first.seq, second.seq);
    assert_eq!(reads.policy("p1").expect("read"), Some(first.clone()));
    let mut changed = first.clone();
    changed.status = PolicyStatus::Gating;
    changed.reason = Some("turn ended".into());
    changed.retries_used = 2;
    changed.updated_at = 7;
    store.write(|tx| tx.put_policy(&changed)).expect("put");
    assert_eq!(reads.policy("p1").expect("read"), Some(changed.clone()));
    let mut next = changed.clone();
    next.next_id = Some("p2".into());
    next.status = PolicyStatus::Blocked; // record_next writes the next id alone
    store.write(|tx| tx.record_next(&next)).expect("record");
    let read = reads.policy("p1").expect("read").expect("there");
    assert_eq!(read.next_id.as_deref(), Some("p2"));
    assert_eq!(read.status, PolicyStatus::Gating, "never a change of state");
    let gating = reads.policies(&[PolicyStatus::Gating]).expect("list");
    assert_eq!(
        gating.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["p1"]
    );
    assert_eq!(reads.policies(&[]).expect("all").len(), 2);
    // Counted by status (the inbox's counts).
    let mut counts = reads.policy_counts().expect("counts");
    counts.sort();
    assert_eq!(
        counts,
        [("gating".to_string(), 1), ("queued".to_string(), 1)]
    );
    let missing = PolicyRow::sample("nope", PolicyStatus::Done, &["s1"]);
    assert!(store.write(|tx| tx.put_policy(&missing)).is_err());
    assert_eq!(reads.policy("nope").expect("read"), None, "never inserted");
}

/// Events append in order with growing cursors, read back typed by a
/// filter, and queue their webhook deliveries (the global URLs, the
/// session's own, each once) in the same transaction.
pub(crate) fn events_append_and_read_back(store: &Store) {
    let reads: &dyn Records = &**store;
    assert_eq!(reads.head_cursor().expect("head"), 0);
    assert_eq!(reads.oldest_cursor().expect("oldest"), None);
    let global = "http://127.0.0.1:1/global".to_string();
    let (a, b) = store
        .write(|tx| {
            tx.put_session(&session("s1", Some("http://127.0.0.1:1/session")))?;
            let a = tx.append_event(&event("session:turn-end"), Some("s1"), None, &[])?;
            let b = tx.append_event(
                &event("policy:blocked"),
                Some("s1"),
                Some("p1"),
                std::slice::from_ref(&global),
            )?;
            Ok((a, b))
        })
        .expect("append");
    assert!(b > a && a > 0, "{a} then {b}");
    assert_eq!(reads.head_cursor().expect("head"), b);
    assert_eq!(reads.oldest_cursor().expect("oldest"), Some(a));
    let all = reads
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("events");
    let kinds: Vec<&str> = all.iter().map(|e| e.event.kind()).collect();
    assert_eq!(kinds, ["session:turn-end", "policy:blocked"]);
    assert_eq!(all[1].policy_id.as_deref(), Some("p1"));
    assert_eq!(all[1].event, event("policy:blocked"));
    let after = reads
        .events(&EventFilter {
            since: a,
            types: vec!["policy:blocked".into()],
            limit: 10,
            ..Default::default()
        })
        .expect("events");
    assert_eq!(after.iter().map(|e| e.cursor).collect::<Vec<_>>(), [b]);
    assert!(
        reads
            .has_session_event("s1", "session:turn-end")
            .expect("has")
    );
    let due = reads.due_deliveries(now_ms() + 1, 10).expect("due");
    let mut urls: Vec<&str> = due.iter().map(|d| d.url.as_str()).collect();
    urls.sort();
    // The turn-end went to the session's URL; the block to both, once each.
    assert_eq!(
        urls,
        [
            "http://127.0.0.1:1/global",
            "http://127.0.0.1:1/session",
            "http://127.0.0.1:1/session"
        ]
    );
}

/// A body that fails rolls everything back: the policy, the events, their
/// deliveries, and what it queued to run after the commit.
pub(crate) fn a_rolled_back_write_leaves_nothing(store: &Store) {
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    let r: StoreResult<()> = store.write(|tx| {
        attach(tx, "p1", PolicyStatus::Queued)?;
        tx.append_event(
            &event("policy:passed"),
            None,
            Some("p1"),
            &["http://127.0.0.1:1/x".into()],
        )?;
        tx.after_commit(move || *flag.lock().expect("lock") = true);
        Err(StoreError::RolledBack)
    });
    assert!(matches!(r, Err(StoreError::RolledBack)), "{r:?}");
    assert_eq!(store.policy("p1").expect("read"), None);
    assert_eq!(store.head_cursor().expect("head"), 0);
    assert!(
        store
            .due_deliveries(now_ms() + 1, 10)
            .expect("due")
            .is_empty()
    );
    assert!(!*ran.lock().expect("lock"), "a rollback runs nothing");
}

/// What a transaction queues with `after_commit` runs once it committed,
/// with the store free again (it may write) and its events visible; never
/// on a rollback.
pub(crate) fn after_commit_runs_once_committed(store: Arc<Store>) {
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    let (s2, seen2) = (store.clone(), seen.clone());
    let cursor = store
        .write(|tx| {
            let c = tx.append_event(&event("policy:passed"), None, None, &[])?;
            tx.after_commit(move || {
                // The store is free again, and the event is committed.
                let n = s2.head_cursor().expect("read");
                seen2.lock().expect("lock").push(n);
                s2.write(|tx| tx.append_event(&event("policy:failed"), None, None, &[]))
                    .expect("a write after the commit");
            });
            Ok(c)
        })
        .expect("write");
    assert!(cursor > 0);
    assert_eq!(*seen.lock().expect("lock"), [cursor]);
    let seen3 = seen.clone();
    let r: StoreResult<()> = store.write(|tx| {
        tx.append_event(&event("policy:passed"), None, None, &[])?;
        tx.after_commit(move || seen3.lock().expect("lock").push(-1));
        Err(StoreError::Backend("refused".into()))
    });
    assert!(r.is_err());
    assert_eq!(
        *seen.lock().expect("lock"),
        [cursor],
        "a rollback runs nothing"
    );
    let kinds: Vec<String> = store
        .events(&EventFilter {
            limit: 10,
            ..Default::default()
        })
        .expect("events")
        .iter()
        .map(|e| e.event.kind().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["policy:passed", "policy:failed"],
        "the first event and the one written after its commit"
    );
}

fn run(id: &str) -> RoutineRow {
    RoutineRow {
        id: id.into(),
        label: Some("nightly".into()),
        spec: Some(
            serde_json::from_value(
                json!({"steps": [{"label": "a", "session": {"existing": "s1"}}]}),
            )
            .expect("a spec"),
        ),
        state: Some(RunState::Running {
            step: 0,
            restarts: 0,
            answered: 0,
        }),
        phase: "running".into(),
        step_session: Some("s1".into()),
        deadline_at: None,
        pending_request: None,
        reason: None,
        created_at: 1,
        updated_at: 1,
        damage: None,
        steps: vec![RoutineStepRow {
            index: 0,
            label: "a".into(),
            status: StepStatus::Running,
            session_id: Some("s1".into()),
            restarts: 0,
            response: None,
            started_at: Some(1),
            ended_at: None,
        }],
    }
}

/// A routine run with its steps, a standing policy and the operator's
/// passkey user id round-trip; an id inserted twice is an error; a removal
/// says whether there was something to remove.
pub(crate) fn runs_and_operator_records_round_trip(store: &Store) {
    let reads: &dyn Records = &**store;
    store
        .write(|tx| {
            tx.insert_routine(&run("r1"))?;
            tx.insert_routine_key("k1", "r1", "digest")
        })
        .expect("insert");
    assert_eq!(reads.routine("r1").expect("read"), Some(run("r1")));
    assert_eq!(
        reads.routine_on_session("s1").expect("read").map(|r| r.id),
        Some("r1".into())
    );
    assert_eq!(
        reads.routine_by_key("k1").expect("read"),
        Some(("r1".into(), "digest".into()))
    );
    let mut done = run("r1");
    done.phase = "done".into();
    done.state = Some(RunState::Done);
    done.step_session = None;
    done.steps[0].status = StepStatus::Done;
    done.steps[0].ended_at = Some(2);
    store.write(|tx| tx.put_routine(&done)).expect("put");
    assert_eq!(reads.routine("r1").expect("read"), Some(done));
    assert!(reads.active_routines().expect("active").is_empty());
    assert!(store.write(|tx| tx.insert_routine(&run("r1"))).is_err());

    let standing = StandingRow {
        id: "sp_1".into(),
        agents: vec!["claude".into()],
        under: vec!["/work".into()],
        label: None,
        policy: Some(AsGiven::parse(json!({"gate": {"command": "true"}})).expect("a template")),
        created_at: 1,
        damage: None,
    };
    store
        .write(|tx| tx.insert_standing(&standing))
        .expect("insert");
    assert!(store.write(|tx| tx.insert_standing(&standing)).is_err());
    assert_eq!(
        reads.standing_policy("sp_1").expect("read"),
        Some(standing.clone())
    );
    assert_eq!(reads.standing_policies().expect("list"), [standing]);
    assert!(store.write(|tx| tx.remove_standing("sp_1")).expect("rm"));
    assert!(!store.write(|tx| tx.remove_standing("sp_1")).expect("again"));

    let user = store.write(|tx| tx.passkey_user()).expect("made");
    assert_eq!(store.write(|tx| tx.passkey_user()).expect("kept"), user);
    assert!(reads.passkeys().expect("none").is_empty());
}
